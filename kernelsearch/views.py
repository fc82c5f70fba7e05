"""Read-only views of the store: `runs`, `tree`, `show`, `diff`, `compare`, `report`, `export-tsv`.

Every command opens the store read-only (and, on top, sets SQLite's `query_only` on its connections), so none
of them can change it. A missing store, an unknown run or an unknown kernel is one line on stderr and exit
code 2. The queries live in `kernelsearch.store.queries`; formatting in `fmt.py`; the HTML page in `report.py`.
"""
from __future__ import annotations

import csv
import difflib
import io
import json
import os
import sys
import textwrap
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Iterator, NoReturn, Optional

import typer
from rich.color import ColorSystem
from rich.console import Console
from rich.style import Style
from rich.table import Table
from rich.text import Text
from sqlalchemy import event, select
from sqlalchemy.exc import DatabaseError
from sqlmodel import Session

from kernelsearch import fmt
from kernelsearch.report import build_report
from kernelsearch.store import queries as q
from kernelsearch.store.database import open_store
from kernelsearch.store.models import Evaluation, Run

DEFAULT_DB = Path("runs/kernelsearch.db")
FAILED = "failed"          # --status failed: every evaluated status but ok

DbOpt = Annotated[Path, typer.Option("--db", help="The SQLite store to read.", show_default=True)]


# -- opening the store ---------------------------------------------------------------------------------------
def _fail(msg: str) -> NoReturn:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


@contextmanager
def _session(db: Path) -> Iterator[Session]:
    """A read-only session on the store at `db`; a missing or foreign file is a clear error (exit 2)."""
    if not db.is_file():
        _fail(f"no store at {db} (give one with --db)")
    try:
        engine = open_store(db, readonly=True)
    except DatabaseError as e:
        _fail(f"{db} is not a readable SQLite store: {e.orig if hasattr(e, 'orig') else e}")

    @event.listens_for(engine, "connect")
    def _query_only(dbapi_conn, _record):  # noqa: ANN001
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA query_only=ON")   # any write through this engine is an error
        cur.close()

    try:
        with Session(engine) as session:
            try:
                session.execute(select(Run.id).limit(1)).all()
                session.execute(select(Evaluation.id).limit(1)).all()
            except DatabaseError:
                _fail(f"{db} is not a kernelsearch store (no run/evaluation tables)")
            yield session
    finally:
        engine.dispose()


def _run(session: Session, name: str, db: Path) -> Run:
    run = q.get_run(session, name)
    if run is None:
        names = [r.name for r in q.list_runs(session)]
        known = f"runs: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}" if names else "it has no runs"
        _fail(f"no run named {name!r} in {db} ({known})")
    return run


def _kernel_id(text: str) -> int:
    """`12` or `k12` (as the tree prints it)."""
    t = text.strip()
    t = t[1:] if t[:1] in ("k", "K") else t
    if not t.isdigit():
        _fail(f"not a kernel id: {text!r} (expected a number such as 12 or k12)")
    return int(t)


def _console() -> Console:
    """Wide when writing to a pipe or file (so lines stay whole), the terminal's width otherwise."""
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200
    return Console(width=width, highlight=False, soft_wrap=False, markup=False)   # store text is not markup


_COLOR_SYSTEMS = {"standard": ColorSystem.STANDARD, "256": ColorSystem.EIGHT_BIT,
                  "truecolor": ColorSystem.TRUECOLOR, "windows": ColorSystem.WINDOWS}


class _Paint:
    """Styles text as ANSI strings directly: a 10,000-line tree costs milliseconds, not rich.Tree's seconds."""

    def __init__(self, console: Console):
        cs = console.color_system if console.is_terminal and not console.no_color else None
        self.cs = _COLOR_SYSTEMS.get(cs) if cs else None
        self._styles: dict[str, Style] = {}

    def __call__(self, text: str, style: Optional[str] = None) -> str:
        if not style or self.cs is None:
            return text
        st = self._styles.get(style)
        if st is None:
            st = self._styles[style] = Style.parse(style)
        return st.render(text, color_system=self.cs)


_STATUS_STYLE = {"ok": "bold green", "queued": "blue", "incorrect": "red", "compile_error": "magenta",
                 "timeout": "yellow", "crash": "red", "rejected": "bold red"}


# -- runs ----------------------------------------------------------------------------------------------------
def runs_cmd(db: DbOpt = DEFAULT_DB) -> None:
    """Every run in the store: status, rounds, evaluations, best speedup, tokens, cost, wall time."""
    with _session(db) as s:
        runs = q.list_runs(s)
        if not runs:
            typer.echo(f"no runs in {db}")
            return
        table = Table(title=f"runs in {db}", title_justify="left", header_style="bold")
        for col in ("name", "problem", "status", "stop reason", "rounds", "evaluations", "best",
                    "tokens", "cost", "wall", "started"):
            table.add_column(col, justify="right" if col in ("rounds", "tokens", "cost", "wall") else "left")
        for run in runs:
            st = q.run_stats(s, run.id)
            best = "—" if st.best_speedup is None else f"{fmt.x(st.best_speedup)} k{st.best_kernel_id}"
            if st.best_speedup is not None and st.timing_kinds == [fmt.CPU_KIND]:
                best += " [cpu]"
            table.add_row(run.name, run.problem, run.status, run.stop_reason or "—", str(st.rounds),
                          fmt.by_status(st.by_status, st.queued), best, fmt.tokens(st.tokens), fmt.cost_of(st),
                          fmt.dur(st.wall_s), fmt.when(run.started_at))
        _console().print(table)


# -- tree ----------------------------------------------------------------------------------------------------
class _TreeView:
    """Which nodes of a RunTree to show under the filters, and how to print them (text or JSON)."""

    def __init__(self, t: q.RunTree, *, best: Optional[int], status: Optional[str], round_: Optional[int],
                 depth: Optional[int]):
        self.t, self.depth = t, depth
        top = t.best_kernel()
        self.best_id = top.id if top else None
        self.best_path = t.path_to(top.id) if top else []
        self.on_path = set(self.best_path)
        self.kinds = sorted({k.timing_kind for k in t.kernels.values() if k.timing_kind})
        self.mixed = len(self.kinds) > 1 and fmt.CPU_KIND in self.kinds
        self.filtered = best is not None or status is not None or round_ is not None
        self.matched: set[int] = set()
        self.kernels: Optional[set[int]] = None      # None: all
        self.ideas: Optional[set[int]] = None
        self.printed = 0                              # kernels printed by the last lines() or JSON walk
        if self.filtered:
            self._select(best, status, round_)

    def _select(self, best: Optional[int], status: Optional[str], round_: Optional[int]) -> None:
        t = self.t
        cand = t.kernels.values()
        if best is not None:
            cand = t.best(best)
        if status is not None:
            cand = [k for k in cand
                    if (k.state != "ok" and k.state != q.QUEUED if status == FAILED else k.state == status)]
        if round_ is not None:
            cand = [k for k in cand if k.round == round_]
        self.matched = {k.id for k in cand}
        kernels: set[int] = set()
        for kid in self.matched:
            kernels.update(t.path_to(kid))
        ideas = {t.kernels[k].idea_id for k in kernels if t.kernels[k].idea_id in t.ideas}
        if round_ is not None and best is None and status is None:
            for i in t.ideas.values():        # ideas of the round that have no branches yet still show
                if i.round == round_:
                    ideas.add(i.id)
                    if i.parent_kernel_id in t.kernels:
                        kernels.update(t.path_to(i.parent_kernel_id))
        self.kernels, self.ideas = kernels, ideas

    # visibility ---------------------------------------------------------------------------------------------
    def _kernel_children(self, kid: int, depth: int) -> tuple[list[int], list[int], int]:
        """(ideas, direct kernels) shown under kernel `kid` at idea-depth `depth`, and ideas hidden by --depth."""
        ideas = self.t.ideas_of.get(kid, [])
        if self.ideas is not None:
            ideas = [i for i in ideas if i in self.ideas]
        hidden = 0
        if self.depth is not None and depth >= self.depth:
            hidden, ideas = len(ideas), []
        direct = self.t.direct_children.get(kid, [])
        if self.kernels is not None:
            direct = [k for k in direct if k in self.kernels]
        return ideas, direct, hidden

    def _branches(self, iid: int) -> list[int]:
        ks = sorted(self.t.branches_of.get(iid, []), key=lambda k: (self.t.kernels[k].branch, k))
        return ks if self.kernels is None else [k for k in ks if k in self.kernels]

    def roots(self) -> list[int]:
        rs = self.t.roots
        return rs if self.kernels is None else [k for k in rs if k in self.kernels]

    def top_ideas(self) -> list[int]:
        ideas = self.t.top_ideas
        if self.depth is not None and self.depth < 1:
            return []
        return ideas if self.ideas is None else [i for i in ideas if i in self.ideas]

    # text ---------------------------------------------------------------------------------------------------
    def kernel_label(self, k: q.KernelRow, paint: _Paint) -> str:
        context = self.filtered and k.id not in self.matched
        on_path = k.id in self.on_path
        parts = []
        if on_path:
            parts.append(paint("★", "bold yellow"))
        parts.append(paint(f"k{k.id}", "bold" if not context else "dim"))
        parts.append(paint("seed" if k.is_seed else f"b{k.branch}", "dim"))
        reason = fmt.one_line(k.reason, 110) if k.status not in (None, "ok") else ""
        parts.append(paint(k.state + (":" if reason else ""), _STATUS_STYLE.get(k.state, "red") if not context
                           else "dim"))
        if k.status == "ok":
            parts.append(paint(f"{fmt.x(k.speedup)} eager", "green" if (k.speedup or 0) > 1 else "yellow"))
            if k.speedup_compile is not None:
                parts.append(f"{fmt.x(k.speedup_compile)} compile")
            if k.roofline_fraction is not None:
                parts.append(f"{fmt.pct(k.roofline_fraction)} roofline")
            if self.mixed and k.timing_kind == fmt.CPU_KIND:
                parts.append(paint("[cpu]", "dim"))
        elif reason:
            parts.append(paint(reason, "dim" if context else None))
        if k.id == self.best_id:
            parts.append(paint("← best", "bold yellow"))
        return " ".join(parts)

    def idea_label(self, i: q.IdeaRow, paint: _Paint) -> str:
        ks = [self.t.kernels[k] for k in self.t.branches_of.get(i.id, [])]
        ok = [k for k in ks if k.status == "ok"]
        best = max((k.speedup for k in ok if k.speedup is not None), default=None)
        summary = f"{len(ok)}/{len(ks)} ok" + (f", best {fmt.x(best)}" if best is not None else "")
        if i.branches_wanted > len(ks):
            summary += f", {i.branches_wanted - len(ks)} not written"
        return " ".join([paint(f"i{i.id}", "cyan"), paint(f"r{i.round}", "dim"),
                         paint(fmt.one_line(i.title, 100) or "(untitled idea)", "bold cyan"),
                         paint(f"({summary})", "dim")])

    def lines(self, paint: _Paint) -> list[str]:
        out: list[str] = []
        guide = {True: ("└── ", "    "), False: ("├── ", "│   ")}

        def kernel(kid: int, prefix: str, conn: str, depth: int) -> None:
            k = self.t.kernels[kid]
            self.printed += 1
            out.append(prefix + paint(conn, "dim") + self.kernel_label(k, paint))
            ideas, direct, hidden = self._kernel_children(kid, depth)
            child_prefix = prefix + _cont(conn)
            items: list[tuple[str, int]] = [("i", i) for i in ideas] + [("k", c) for c in direct]
            if hidden:
                items.append(("more", hidden))
            for n, (kind, ref) in enumerate(items):
                c, _ = guide[n == len(items) - 1]
                if kind == "i":
                    idea(ref, child_prefix, c, depth + 1)
                elif kind == "k":
                    kernel(ref, child_prefix, c, depth)
                else:
                    more = f"… {ref} idea{'s' if ref > 1 else ''} below (raise --depth)"
                    out.append(child_prefix + paint(c, "dim") + paint(more, "dim"))

        def idea(iid: int, prefix: str, conn: str, depth: int) -> None:
            out.append(prefix + paint(conn, "dim") + self.idea_label(self.t.ideas[iid], paint))
            ks = self._branches(iid)
            child_prefix = prefix + _cont(conn)
            for n, kid in enumerate(ks):
                kernel(kid, child_prefix, guide[n == len(ks) - 1][0], depth)

        def _cont(conn: str) -> str:
            return {"└── ": "    ", "├── ": paint("│   ", "dim"), "": ""}[conn]

        for kid in self.roots():
            kernel(kid, "", "", 0)
        tops = self.top_ideas()
        if tops:
            out.append(paint("ideas with no parent kernel in this run:", "dim"))
            for n, iid in enumerate(tops):
                idea(iid, "", guide[n == len(tops) - 1][0], 1)
        return out

    # json ---------------------------------------------------------------------------------------------------
    def kernel_json(self, k: q.KernelRow, depth: int) -> dict[str, Any]:
        self.printed += 1
        ideas, direct, hidden = self._kernel_children(k.id, depth)
        d: dict[str, Any] = {
            "kind": "kernel", "id": k.id, "idea_id": k.idea_id, "parent_kernel_id": self.t.parent_of(k.id),
            "round": k.round, "branch": k.branch, "seed": k.is_seed, "language": k.language,
            "code_hash": k.code_hash, "status": k.state, "reason": k.reason, "stage": k.stage,
            "time_ms": k.time_ms, "ref_time_ms": k.ref_time_ms, "compile_ref_time_ms": k.compile_ref_time_ms,
            "speedup": k.speedup, "speedup_compile": k.speedup_compile, "roofline_fraction": k.roofline_fraction,
            "gbps": k.gbps, "tflops": k.tflops, "bottleneck": k.bottleneck, "timing_kind": k.timing_kind,
            "device": k.device, "on_best_path": k.id in self.on_path, "best": k.id == self.best_id,
            "matched": (k.id in self.matched) if self.filtered else True,
            "ideas": [self.idea_json(self.t.ideas[i], depth + 1) for i in ideas],
            "children": [self.kernel_json(self.t.kernels[c], depth) for c in direct],
        }
        if hidden:
            d["ideas_hidden_by_depth"] = hidden
        return d

    def idea_json(self, i: q.IdeaRow, depth: int) -> dict[str, Any]:
        return {"kind": "idea", "id": i.id, "round": i.round, "parent_kernel_id": i.parent_kernel_id,
                "title": i.title, "text": i.text, "branches_wanted": i.branches_wanted, "status": i.status,
                "kernels": [self.kernel_json(self.t.kernels[k], depth) for k in self._branches(i.id)]}


def _run_json(run: Run) -> dict[str, Any]:
    return {"id": run.id, "name": run.name, "problem": run.problem, "status": run.status,
            "stop_reason": run.stop_reason, "device": run.device,
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None}


def _stats_json(st: q.RunStats) -> dict[str, Any]:
    d = asdict(st)
    d["tokens"] = st.tokens
    return d


def tree_cmd(
    name: Annotated[str, typer.Argument(help="The run's name (see `kernelsearch runs`).")],
    db: DbOpt = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document (ids are the store's).")] = False,
    best: Annotated[Optional[int], typer.Option("--best", min=1, help="Only the paths to the N best kernels.")] = None,
    status: Annotated[Optional[str], typer.Option(
        "--status", help="Only kernels with this status: ok, compile_error, incorrect, timeout, crash, rejected, "
                         "queued, or failed (any but ok and queued).")] = None,
    round_: Annotated[Optional[int], typer.Option("--round", min=0,
                                                  help="Only the ideas and kernels of round R.")] = None,
    depth: Annotated[Optional[int], typer.Option("--depth", min=0, help="Show at most D generations of ideas.")] = None,
) -> None:
    """The idea tree of a run: each round's ideas under the kernel they came from, each idea with its branches."""
    if status is not None and status not in (*q.STATUSES, q.QUEUED, FAILED):
        _fail(f"unknown --status {status!r}; one of: {', '.join((*q.STATUSES, q.QUEUED, FAILED))}")
    with _session(db) as s:
        run = _run(s, name, db)
        t = q.tree(s, run.id)
        st = q.run_stats(s, run.id)
    view = _TreeView(t, best=best, status=status, round_=round_, depth=depth)
    filters = {"best": best, "status": status, "round": round_, "depth": depth}
    if as_json:
        doc = {"run": _run_json(run), "stats": _stats_json(st),
               "filters": {k: v for k, v in filters.items() if v is not None},
               "best_kernel_id": view.best_id, "best_path": view.best_path,
               "roots": [view.kernel_json(t.kernels[k], 0) for k in view.roots()],
               "ideas": [view.idea_json(t.ideas[i], 1) for i in view.top_ideas()]}
        doc["shown_kernels"] = view.printed
        sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")   # compact: the C encoder (indent is 10x slower)
        return
    console = _console()
    paint = _Paint(console)
    head = [paint(f"run {run.name}", "bold") + f" · problem {run.problem} · {run.status}"
            + (f" ({run.stop_reason})" if run.stop_reason else "") + (f" · device {run.device}" if run.device else ""),
            f"{st.kernels} kernels, {st.ideas} ideas, {st.rounds} rounds · evaluations: "
            f"{fmt.by_status(st.by_status, st.queued)} · best "
            + (f"{fmt.x(st.best_speedup)} (k{st.best_kernel_id})" if st.best_speedup is not None else "—")
            + f" · {fmt.tokens(st.tokens)} tokens · {fmt.cost_of(st)} · {fmt.dur(st.wall_s)}"]
    note = fmt.timing_note(view.kinds)
    if note:
        head.append(paint(note, "yellow"))
    if view.best_path:
        head.append(paint("★ marks the path from the starter to the best kernel", "dim"))
    body = view.lines(paint)
    if view.filtered or depth is not None:
        desc = " ".join(f"--{k} {v}" for k, v in filters.items() if v is not None)
        what = f"{len(view.matched)} of {len(t.kernels)} kernels match ({desc})" if view.filtered else \
            f"{view.printed} of {len(t.kernels)} kernels shown ({desc})"
        if view.filtered:
            what += f"; {view.printed - len(view.matched)} ancestors shown dimmed for context"
        head.append(paint(what, "dim"))
    if not body:
        body = [paint("(nothing matches)" if view.filtered else "(the run has no kernels yet)", "dim")]
    sys.stdout.write("\n".join(head + [""] + body) + "\n")


# -- show ----------------------------------------------------------------------------------------------------
def _detail_lines(obj: Any, indent: int = 2, depth: int = 0) -> list[str]:
    pad = " " * indent
    if isinstance(obj, dict):
        out: list[str] = []
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v and depth < 4 and not _short(v):
                out.append(f"{pad}{k}:")
                out.extend(_detail_lines(v, indent + 2, depth + 1))
            else:
                out.append(f"{pad}{k}: {_scalar(v)}")
        return out
    if isinstance(obj, list):
        out = []
        for v in obj:
            if isinstance(v, dict) and depth < 4:
                sub = _detail_lines(v, indent + 2, depth + 1)
                out.append(f"{pad}- " + sub[0].strip() if sub else f"{pad}- {{}}")
                out.extend(sub[1:])
            else:
                out.append(f"{pad}- {_scalar(v)}")
        return out
    return [f"{pad}{_scalar(obj)}"]


def _short(v: Any) -> bool:
    return isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v) and len(json.dumps(v)) <= 100


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        return fmt.one_line(json.dumps(v), 160)
    return fmt.one_line(str(v), 400) if isinstance(v, str) else str(v)


def _kernel_brief(k: q.KernelRow) -> str:
    res = k.state
    if k.status == "ok":
        res += f" {fmt.x(k.speedup)} eager"
        if k.speedup_compile is not None:
            res += f", {fmt.x(k.speedup_compile)} compile"
    elif k.reason:
        res += f": {fmt.one_line(k.reason, 80)}"
    return f"k{k.id} ({res})"


def show_cmd(
    kernel: Annotated[str, typer.Argument(metavar="KERNEL_ID", help="A kernel id as the tree prints it (12 or k12).")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """One kernel: its idea, every stage's evaluation result, its lineage up to the starter, and its code."""
    kid = _kernel_id(kernel)
    with _session(db) as s:
        k = q.get_kernel(s, kid)
        if k is None:
            _fail(f"no kernel {kid} in {db}")
        run = s.get(Run, k.run_id)
        ev = q.get_evaluation(s, kid)
        chain = q.lineage(s, kid)
    c = _console()
    idea = chain[-1][1] if chain else None
    c.print(Text.assemble((f"kernel k{k.id}", "bold"), f" · run {run.name if run else k.run_id}"
                          f" ({run.problem if run else '?'}) · round {k.round} · "
                          + ("seed (the starter)" if k.idea_id is None else f"branch {k.branch} of idea i{k.idea_id}")
                          + f" · {k.language} · hash {k.code_hash[:12]} · written {fmt.when(k.created_at)}"))
    if idea is not None:
        c.print(Text.assemble(("\nidea ", "bold"), (f"i{idea.id}", "cyan"), f" (round {idea.round}, from "
                              f"k{idea.parent_kernel_id}): ", (idea.title, "bold cyan")))
        for para in (idea.text or "").strip().splitlines():
            c.print(Text(textwrap.fill(para, width=110, initial_indent="  ", subsequent_indent="  ")
                         if para.strip() else ""))
    c.print(Text("\nevaluation", style="bold"))
    if ev is None:
        c.print("  queued: not evaluated yet")
    else:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim", justify="right")
        grid.add_column()
        style = _STATUS_STYLE.get(ev.status, "red")
        grid.add_row("status", Text.assemble((ev.status, style), f"  (last stage: {ev.stage or '—'})"))
        if ev.reason:
            grid.add_row("reason", ev.reason)
        kind = ev.timing_kind or "—"
        if ev.timing_kind == fmt.CPU_KIND:
            kind += " (CPU interpreter timing: not comparable with GPU timings)"
        grid.add_row("timing", kind)
        if ev.time_ms is not None:
            refs = [f"eager {fmt.ms(ev.ref_time_ms)}"]
            if ev.compile_ref_time_ms is not None:
                refs.append(f"torch.compile {fmt.ms(ev.compile_ref_time_ms)}")
            grid.add_row("time", f"{fmt.ms(ev.time_ms)}  (reference: {', '.join(refs)})")
        if ev.speedup is not None or ev.speedup_compile is not None:
            grid.add_row("speedup", f"{fmt.x(ev.speedup)} over eager · {fmt.x(ev.speedup_compile)} over torch.compile")
        if any(v is not None for v in (ev.gbps, ev.tflops, ev.roofline_fraction)):
            tp = []
            if ev.gbps is not None:
                tp.append(f"{ev.gbps:.1f} GB/s")
            if ev.tflops is not None:
                tp.append(f"{ev.tflops:.3f} TFLOP/s")
            if ev.roofline_fraction is not None:
                tp.append(f"{fmt.pct(ev.roofline_fraction)} of roofline")
            if ev.bottleneck:
                tp.append(f"{ev.bottleneck}-bound")
            grid.add_row("throughput", " · ".join(tp))
        dev = ev.device or "—"
        if ev.gpu_index is not None:
            dev += f" (gpu {ev.gpu_index})"
        grid.add_row("device", dev)
        if ev.wall_s is not None:
            grid.add_row("worker wall", fmt.dur(ev.wall_s))
        grid.add_row("evaluated", fmt.when(ev.created_at))
        c.print(grid)
        try:
            detail = json.loads(ev.detail_json or "{}")
        except json.JSONDecodeError:
            detail = {"(unparsed detail)": ev.detail_json}
        if detail:
            c.print(Text("\ndetail (per stage)", style="bold"))
            lines = _detail_lines(detail)
            if len(lines) > 200:
                lines = lines[:200] + [f"  … {len(lines) - 200} more lines"]
            c.print(Text("\n".join(lines)), soft_wrap=True)
        if ev.error_text:
            c.print(Text("\nerror text", style="bold"))
            c.print(Text(textwrap.indent(ev.error_text.rstrip(), "  ")), soft_wrap=True)
    c.print(Text("\nlineage (starter → this kernel)", style="bold"))
    for n, (kr, ir) in enumerate(chain):
        lead = "  " + "   " * (n - 1) + "└─ " if n else "  "
        via = f"i{ir.id} r{ir.round} “{fmt.one_line(ir.title, 70)}” → " if ir else "seed "
        c.print(Text(lead + via + _kernel_brief(kr) + ("  ← this kernel" if kr.id == kid else "")), soft_wrap=True)
    from rich.syntax import Syntax  # pygments: imported only by the command that highlights

    code = k.code.rstrip("\n")
    c.print(Text(f"\ncode ({k.language}, {code.count(chr(10)) + 1} lines)", style="bold"))
    c.print(Syntax(code, "python", line_numbers=True, word_wrap=False, theme="ansi_dark"), soft_wrap=True)


# -- diff ----------------------------------------------------------------------------------------------------
def diff_cmd(
    a: Annotated[str, typer.Argument(metavar="A", help="The old kernel (12 or k12).")],
    b: Annotated[str, typer.Argument(metavar="B", help="The new kernel.")],
    db: DbOpt = DEFAULT_DB,
    context: Annotated[int, typer.Option("--context", "-U", min=0, help="Lines of context.")] = 3,
) -> None:
    """Unified diff of two kernels' code."""
    ids = (_kernel_id(a), _kernel_id(b))
    with _session(db) as s:
        ks = []
        for kid in ids:
            k = q.get_kernel(s, kid)
            if k is None:
                _fail(f"no kernel {kid} in {db}")
            ks.append(k)
        ideas = q.ideas_by_id(s, [k.idea_id for k in ks if k.idea_id is not None])
        names = {r.id: r.name for r in q.list_runs(s)}

    def label(k: Any) -> str:
        what = "seed" if k.idea_id is None else f"i{k.idea_id} “{fmt.one_line(ideas[k.idea_id].title, 60)}”" \
            if k.idea_id in ideas else f"i{k.idea_id}"
        return f"k{k.id} ({names.get(k.run_id, k.run_id)}, round {k.round}, {what})"

    ka, kb = ks
    if ka.code == kb.code:
        typer.echo(f"k{ka.id} and k{kb.id} have identical code")
        return
    lines = list(difflib.unified_diff(ka.code.splitlines(), kb.code.splitlines(), fromfile=label(ka),
                                      tofile=label(kb), n=context, lineterm=""))
    paint = _Paint(_console())
    styled = []
    for ln in lines:
        if ln.startswith(("+++", "---")):
            styled.append(paint(ln, "bold"))
        elif ln.startswith("@@"):
            styled.append(paint(ln, "cyan"))
        elif ln.startswith("+"):
            styled.append(paint(ln, "green"))
        elif ln.startswith("-"):
            styled.append(paint(ln, "red"))
        else:
            styled.append(ln)
    sys.stdout.write("\n".join(styled) + "\n")


# -- compare -------------------------------------------------------------------------------------------------
def compare_cmd(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Two runs side by side: best kernel per problem, evaluations, tokens, cost, time."""
    with _session(db) as s:
        runs = [_run(s, n, db) for n in (run_a, run_b)]
        stats = [q.run_stats(s, r.id) for r in runs]
    table = Table(title="compare", title_justify="left", header_style="bold")
    table.add_column("")
    for r in runs:
        table.add_column(r.name, justify="right")

    def row(label: str, *vals: str) -> None:
        table.add_row(label, *vals)

    row("problem", *(r.problem for r in runs))
    row("status", *(r.status + (f" ({r.stop_reason})" if r.stop_reason else "") for r in runs))
    row("device", *(r.device or "—" for r in runs))
    row("timing", *(", ".join(st.timing_kinds) or "—" for st in stats))
    row("best speedup (eager)", *(f"{fmt.x(st.best_speedup)} k{st.best_kernel_id}" if st.best_kernel_id else "—"
                                  for st in stats))
    row("best vs torch.compile", *(fmt.x(st.best_speedup_compile) for st in stats))
    row("best time", *(fmt.ms(st.best_time_ms) for st in stats))
    row("best roofline", *(fmt.pct(st.best_roofline_fraction) for st in stats))
    row("rounds", *(str(st.rounds) for st in stats))
    row("ideas", *(str(st.ideas) for st in stats))
    row("evaluations", *(str(st.evaluations) for st in stats))
    for status in [x for x in q.STATUSES if any(st.by_status.get(x) for st in stats)]:
        row(f"  {status}", *(str(st.by_status.get(status, 0)) for st in stats))
    if any(st.queued for st in stats):
        row("  queued", *(str(st.queued) for st in stats))
    row("correct rate", *(fmt.pct(st.correct / st.evaluations) if st.evaluations else "—" for st in stats))
    row("LLM calls (errors)", *(f"{st.llm_calls} ({st.llm_errors})" for st in stats))
    row("tokens in / out", *(f"{fmt.tokens(st.tokens_in)} / {fmt.tokens(st.tokens_out)}" for st in stats))
    row("cost", *(fmt.cost_of(st) for st in stats))
    row("wall time", *(fmt.dur(st.wall_s) for st in stats))
    row("evaluations / hour", *(f"{st.evaluations / st.wall_s * 3600:.0f}" if st.wall_s else "—" for st in stats))
    c = _console()
    c.print(table)
    a, b = stats
    if runs[0].problem != runs[1].problem:
        c.print(f"different problems ({runs[0].problem} vs {runs[1].problem}): each run's best is for its own problem")
    elif a.timing_kinds != b.timing_kinds and (fmt.CPU_KIND in a.timing_kinds + b.timing_kinds):
        c.print(Text("timings not comparable: one run has CPU-interpreter timings, the other GPU timings",
                     style="yellow"))
    elif a.best_speedup and b.best_speedup:
        lead = runs[1].name if b.best_speedup > a.best_speedup else runs[0].name
        ratio = max(a.best_speedup, b.best_speedup) / min(a.best_speedup, b.best_speedup)
        c.print(f"{runs[0].problem}: {lead} is ahead by {ratio:.2f}× in best speedup")


# -- export-tsv ----------------------------------------------------------------------------------------------
TSV_COLUMNS = ("experiment", "tag", "kernel_type", "throughput_tflops", "latency_us", "pct_peak",
               "speedup_vs_pytorch", "correctness", "peak_vram_mb", "description")


def _peak_vram(detail_json: Optional[str]) -> Optional[float]:
    """`peak_vram_mb` at the top of an evaluation's detail or in one of its stages."""
    try:
        d = json.loads(detail_json or "{}")
    except json.JSONDecodeError:
        return None
    if not isinstance(d, dict):
        return None
    for holder in [d, *[v for v in d.values() if isinstance(v, dict)]]:
        v = holder.get("peak_vram_mb")
        if isinstance(v, (int, float)):
            return float(v)
    return None


def _num(v: Optional[float], fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def export_tsv_cmd(
    name: Annotated[str, typer.Argument(help="The run's name.")],
    db: DbOpt = DEFAULT_DB,
    out: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write here instead of stdout.")] = None,
) -> None:
    """Every evaluated kernel as a row of AutoKernel's results.tsv (same columns, tab-separated).

    experiment counts evaluations in the order they finished; tag is r<round>-k<kernel id>; correctness is PASS
    (status ok) or FAIL (any other status, named in the description); empty cells mean "not measured".
    """
    with _session(db) as s:
        run = _run(s, name, db)
        t = q.tree(s, run.id)
        details = q.detail_jsons(s, run.id)
    done = sorted((k for k in t.kernels.values() if k.status is not None), key=lambda k: k.eval_id)
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow(TSV_COLUMNS)
    for n, k in enumerate(done, start=1):
        idea = t.ideas.get(k.idea_id) if k.idea_id is not None else None
        desc = "starter (seed)" if k.is_seed else (idea.title if idea else f"idea {k.idea_id}")
        if k.status != "ok":
            desc = f"{k.status}: {k.reason or ''} | {desc}"
        if k.timing_kind == fmt.CPU_KIND:
            desc += " [cpu-interpreter timing]"
        desc = " ".join(desc.replace("\t", " ").split())
        w.writerow([n, f"r{k.round}-k{k.id}", run.problem, _num(k.tflops, ".6g"),
                    _num(k.time_ms * 1000 if k.time_ms is not None else None, ".3f"),
                    _num(k.roofline_fraction * 100 if k.roofline_fraction is not None else None, ".2f"),
                    _num(k.speedup, ".4g"), "PASS" if k.status == "ok" else "FAIL",
                    _num(_peak_vram(details.get(k.id)), ".1f"), desc])
    text = buf.getvalue()
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}: {len(done)} evaluations of run {run.name}", err=True)


# -- report --------------------------------------------------------------------------------------------------
def report_cmd(
    name: Annotated[str, typer.Argument(help="The run's name.")],
    db: DbOpt = DEFAULT_DB,
    out: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")] = Path("report.html"),
) -> None:
    """One self-contained HTML page (no network needed): collapsible tree, code, results, progress plots,
    per-round statistics and cost."""
    with _session(db) as s:
        run = _run(s, name, db)
        page = build_report(s, run)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    typer.echo(f"wrote {out} ({len(page.encode()) / 1e6:.2f} MB)")


def register(app: typer.Typer) -> None:
    """Add the read-only commands to the CLI."""
    app.command("runs")(runs_cmd)
    app.command("tree")(tree_cmd)
    app.command("show")(show_cmd)
    app.command("diff")(diff_cmd)
    app.command("compare")(compare_cmd)
    app.command("report")(report_cmd)
    app.command("export-tsv")(export_tsv_cmd)
