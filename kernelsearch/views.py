"""Read-only views of the store: `runs`, `tree`, `show`, `diff`, `compare`, `report`, `export-tsv`.

Every command opens the store read-only (and, on top, sets SQLite's `query_only` on its connections), so none
of them can change it. A missing store, an unknown run or an unknown kernel is one line on stderr and exit
code 2. The queries live in `kernelsearch.store.queries`; this module only formats.
"""
from __future__ import annotations

import csv
import difflib
import html
import io
import json
import math
import os
import sys
import textwrap
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime
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

from kernelsearch.store import queries as q
from kernelsearch.store.database import open_store
from kernelsearch.store.models import Evaluation, Run

DEFAULT_DB = Path("runs/kernelsearch.db")
CPU_KIND = "cpu-interpreter"
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


# -- formatting ----------------------------------------------------------------------------------------------
def _x(v: Optional[float]) -> str:
    if v is None:
        return "—"
    return f"{v:.2g}×" if v < 0.1 else f"{v:.2f}×" if v < 100 else f"{v:.0f}×"


def _pct(v: Optional[float]) -> str:
    return "—" if v is None else f"{v * 100:.0f}%"


def _ms(v: Optional[float]) -> str:
    if v is None:
        return "—"
    if v >= 1000:
        return f"{v / 1000:.3g} s"
    if v >= 1:
        return f"{v:.3g} ms"
    return f"{v * 1000:.3g} µs"


def _dur(s: Optional[float]) -> str:
    if s is None:
        return "—"
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def _tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}k"
    if n >= 1000:
        return f"{n / 1e3:.1f}k"
    return str(n)


def _cost(c: float) -> str:
    return f"${c:.2f}" if c >= 0.1 or c == 0 else f"${c:.4f}"


def _cost_of(st: q.RunStats) -> str:
    """The run's cost; calls whose model had no price are counted, not guessed."""
    if st.llm_calls and st.unpriced_calls == st.llm_calls:
        return f"unpriced ({st.llm_calls} calls)"
    return _cost(st.cost_usd) + (f" +{st.unpriced_calls} unpriced" if st.unpriced_calls else "")


def _one_line(s: Optional[str], n: int = 120) -> str:
    if not s:
        return ""
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _when(d: Optional[datetime]) -> str:
    return d.strftime("%Y-%m-%d %H:%M:%S") if d else "—"


def _by_status(by_status: dict[str, int], queued: int = 0) -> str:
    order = [s for s in q.STATUSES if by_status.get(s)] + sorted(s for s in by_status if s not in q.STATUSES)
    parts = [f"{by_status[s]} {s}" for s in order]
    if queued:
        parts.append(f"{queued} queued")
    return " · ".join(parts) if parts else "none"


def _timing_note(kinds: list[str]) -> Optional[str]:
    if not kinds:
        return None
    if kinds == [CPU_KIND]:
        return "timings: CPU interpreter (labelled; never comparable with GPU timings)"
    if CPU_KIND in kinds:
        return f"timings: mixed ({', '.join(kinds)}); CPU-interpreter speedups are marked [cpu]"
    return f"timings: {', '.join(kinds)}"


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
            best = "—" if st.best_speedup is None else f"{_x(st.best_speedup)} k{st.best_kernel_id}"
            if st.best_speedup is not None and st.timing_kinds == [CPU_KIND]:
                best += " [cpu]"
            table.add_row(run.name, run.problem, run.status, run.stop_reason or "—", str(st.rounds),
                          _by_status(st.by_status, st.queued), best, _tokens(st.tokens), _cost_of(st),
                          _dur(st.wall_s), _when(run.started_at))
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
        self.mixed = len(self.kinds) > 1 and CPU_KIND in self.kinds
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
        reason = _one_line(k.reason, 110) if k.status not in (None, "ok") else ""
        parts.append(paint(k.state + (":" if reason else ""), _STATUS_STYLE.get(k.state, "red") if not context
                           else "dim"))
        if k.status == "ok":
            parts.append(paint(f"{_x(k.speedup)} eager", "green" if (k.speedup or 0) > 1 else "yellow"))
            if k.speedup_compile is not None:
                parts.append(f"{_x(k.speedup_compile)} compile")
            if k.roofline_fraction is not None:
                parts.append(f"{_pct(k.roofline_fraction)} roofline")
            if self.mixed and k.timing_kind == CPU_KIND:
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
        summary = f"{len(ok)}/{len(ks)} ok" + (f", best {_x(best)}" if best is not None else "")
        if i.branches_wanted > len(ks):
            summary += f", {i.branches_wanted - len(ks)} not written"
        return " ".join([paint(f"i{i.id}", "cyan"), paint(f"r{i.round}", "dim"),
                         paint(_one_line(i.title, 100) or "(untitled idea)", "bold cyan"),
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
            f"{_by_status(st.by_status, st.queued)} · best "
            + (f"{_x(st.best_speedup)} (k{st.best_kernel_id})" if st.best_speedup is not None else "—")
            + f" · {_tokens(st.tokens)} tokens · {_cost_of(st)} · {_dur(st.wall_s)}"]
    note = _timing_note(view.kinds)
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
        return _one_line(json.dumps(v), 160)
    return _one_line(str(v), 400) if isinstance(v, str) else str(v)


def _kernel_brief(k: q.KernelRow) -> str:
    res = k.state
    if k.status == "ok":
        res += f" {_x(k.speedup)} eager"
        if k.speedup_compile is not None:
            res += f", {_x(k.speedup_compile)} compile"
    elif k.reason:
        res += f": {_one_line(k.reason, 80)}"
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
                          + f" · {k.language} · hash {k.code_hash[:12]} · written {_when(k.created_at)}"))
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
        if ev.timing_kind == CPU_KIND:
            kind += " (CPU interpreter timing: not comparable with GPU timings)"
        grid.add_row("timing", kind)
        if ev.time_ms is not None:
            refs = [f"eager {_ms(ev.ref_time_ms)}"]
            if ev.compile_ref_time_ms is not None:
                refs.append(f"torch.compile {_ms(ev.compile_ref_time_ms)}")
            grid.add_row("time", f"{_ms(ev.time_ms)}  (reference: {', '.join(refs)})")
        if ev.speedup is not None or ev.speedup_compile is not None:
            grid.add_row("speedup", f"{_x(ev.speedup)} over eager · {_x(ev.speedup_compile)} over torch.compile")
        if any(v is not None for v in (ev.gbps, ev.tflops, ev.roofline_fraction)):
            tp = []
            if ev.gbps is not None:
                tp.append(f"{ev.gbps:.1f} GB/s")
            if ev.tflops is not None:
                tp.append(f"{ev.tflops:.3f} TFLOP/s")
            if ev.roofline_fraction is not None:
                tp.append(f"{_pct(ev.roofline_fraction)} of roofline")
            if ev.bottleneck:
                tp.append(f"{ev.bottleneck}-bound")
            grid.add_row("throughput", " · ".join(tp))
        dev = ev.device or "—"
        if ev.gpu_index is not None:
            dev += f" (gpu {ev.gpu_index})"
        grid.add_row("device", dev)
        if ev.wall_s is not None:
            grid.add_row("worker wall", _dur(ev.wall_s))
        grid.add_row("evaluated", _when(ev.created_at))
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
        via = f"i{ir.id} r{ir.round} “{_one_line(ir.title, 70)}” → " if ir else "seed "
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
        what = "seed" if k.idea_id is None else f"i{k.idea_id} “{_one_line(ideas[k.idea_id].title, 60)}”" \
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
    row("best speedup (eager)", *(f"{_x(st.best_speedup)} k{st.best_kernel_id}" if st.best_kernel_id else "—"
                                  for st in stats))
    row("best vs torch.compile", *(_x(st.best_speedup_compile) for st in stats))
    row("best time", *(_ms(st.best_time_ms) for st in stats))
    row("best roofline", *(_pct(st.best_roofline_fraction) for st in stats))
    row("rounds", *(str(st.rounds) for st in stats))
    row("ideas", *(str(st.ideas) for st in stats))
    row("evaluations", *(str(st.evaluations) for st in stats))
    for status in [x for x in q.STATUSES if any(st.by_status.get(x) for st in stats)]:
        row(f"  {status}", *(str(st.by_status.get(status, 0)) for st in stats))
    if any(st.queued for st in stats):
        row("  queued", *(str(st.queued) for st in stats))
    row("correct rate", *(_pct(st.correct / st.evaluations) if st.evaluations else "—" for st in stats))
    row("LLM calls (errors)", *(f"{st.llm_calls} ({st.llm_errors})" for st in stats))
    row("tokens in / out", *(f"{_tokens(st.tokens_in)} / {_tokens(st.tokens_out)}" for st in stats))
    row("cost", *(_cost_of(st) for st in stats))
    row("wall time", *(_dur(st.wall_s) for st in stats))
    row("evaluations / hour", *(f"{st.evaluations / st.wall_s * 3600:.0f}" if st.wall_s else "—" for st in stats))
    c = _console()
    c.print(table)
    a, b = stats
    if runs[0].problem != runs[1].problem:
        c.print(f"different problems ({runs[0].problem} vs {runs[1].problem}): each run's best is for its own problem")
    elif a.timing_kinds != b.timing_kinds and (CPU_KIND in a.timing_kinds + b.timing_kinds):
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
        if k.timing_kind == CPU_KIND:
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


def build_report(session: Session, run: Run) -> str:
    """The report page of one run, as a string."""
    t = q.tree(session, run.id)
    st = q.run_stats(session, run.id)
    rounds = q.round_stats(session, run.id)
    points = q.progress(session, run.id)
    costs = q.cost_breakdown(session, run.id)
    hash_of, codes = q.kernel_codes(session, run.id)
    errors = q.error_texts(session, run.id)
    return _Report(run, t, st, rounds, points, costs, hash_of, codes, errors).html()


_E = html.escape


class _Report:
    def __init__(self, run: Run, t: q.RunTree, st: q.RunStats, rounds: list[q.RoundStats],
                 points: list[q.ProgressPoint], costs: list[q.CostRow], hash_of: dict[int, str],
                 codes: dict[str, str], errors: dict[int, str]):
        self.run, self.t, self.st, self.rounds, self.points = run, t, st, rounds, points
        self.costs, self.hash_of, self.codes, self.errors = costs, hash_of, codes, errors
        top = t.best_kernel()
        self.best = top
        self.on_path = set(t.path_to(top.id)) if top else set()
        self.kinds = sorted({k.timing_kind for k in t.kernels.values() if k.timing_kind})
        self.cpu = self.kinds == [CPU_KIND]

    # pieces -------------------------------------------------------------------------------------------------
    def _summary(self) -> str:
        r, st = self.run, self.st
        cards = [
            ("best speedup", f"{_x(st.best_speedup)}" + (" [cpu]" if self.cpu and st.best_speedup else ""),
             f'<a href="#k{st.best_kernel_id}">k{st.best_kernel_id}</a>' if st.best_kernel_id else "no correct kernel"),
            ("vs torch.compile", _x(st.best_speedup_compile), "best kernel"),
            ("roofline", _pct(st.best_roofline_fraction), "best kernel"),
            ("evaluations", str(st.evaluations), _E(_by_status(st.by_status, st.queued))),
            ("ideas", str(st.ideas), f"{st.rounds} rounds, {st.kernels} kernels"),
            ("tokens", _tokens(st.tokens), f"{_tokens(st.tokens_in)} in / {_tokens(st.tokens_out)} out"),
            ("cost", _cost_of(st), f"{st.llm_calls} LLM calls, {st.llm_errors} errors"),
            ("wall time", _dur(st.wall_s), f"{_when(r.started_at)} → {_when(r.finished_at)}"),
        ]
        body = "".join(f'<div class="card"><div class="lab">{_E(a)}</div><div class="val">{_E(b)}</div>'
                       f'<div class="sub">{c}</div></div>' for a, b, c in cards)
        meta = (f"problem <b>{_E(r.problem)}</b> · status <b>{_E(r.status)}</b>"
                + (f" ({_E(r.stop_reason)})" if r.stop_reason else "")
                + (f" · device {_E(r.device)}" if r.device else ""))
        note = _timing_note(self.kinds)
        note_html = f'<p class="note">{_E(note)}</p>' if note else ""
        return f'<p class="meta">{meta}</p>{note_html}<div class="cards">{body}</div>'

    def _plots(self) -> str:
        ok = [(p.n, p.t_s, p.speedup) for p in self.points if p.speedup is not None]
        fails_n = [p.n for p in self.points if p.status != "ok"]
        fails_t = [p.t_s for p in self.points if p.status != "ok"]
        steps_n = [(p.n, p.best_so_far) for p in self.points if p.best_so_far is not None]
        steps_t = [(p.t_s, p.best_so_far) for p in self.points if p.best_so_far is not None]
        ylabel = "speedup over eager" + (" (CPU interpreter)" if self.cpu else "")
        tmax = max((p.t_s for p in self.points), default=0.0)
        unit, div = ("h", 3600.0) if tmax > 3 * 3600 else ("min", 60.0) if tmax > 180 else ("s", 1.0)
        best = self.best
        best_n = next((p for p in self.points if best and p.kernel_id == best.id), None)
        mark_n = (best_n.n, best.speedup) if best_n and best else None
        mark_t = (best_n.t_s / div, best.speedup) if best_n and best else None
        a = _svg_plot([(n, y) for n, _, y in ok], fails_n, steps_n, mark_n, "best speedup vs evaluations",
                      "evaluations", ylabel, len(self.points), best.id if best else None, "by-evals")
        b = _svg_plot([(t / div, y) for _, t, y in ok], [x / div for x in fails_t],
                      [(x / div, y) for x, y in steps_t], mark_t, "best speedup vs wall time",
                      f"wall time ({unit})", ylabel, tmax / div, best.id if best else None, "by-time")
        return f'<div class="plots">{a}{b}</div>'

    def _rounds_table(self) -> str:
        rows = []
        for rs in self.rounds:
            failed = {s: n for s, n in rs.by_status.items() if s != "ok"}
            rows.append(
                f"<tr><td>{rs.round}</td><td>{rs.ideas}</td><td>{rs.branches}</td><td>{rs.evaluated}</td>"
                f"<td>{rs.correct}</td><td class=l>{_E(_by_status(failed)) if failed else '—'}</td>"
                f"<td>{_x(rs.best_speedup)}</td><td>{_x(rs.best_so_far)}</td><td>{_tokens(rs.tokens)}</td>"
                f"<td>{'unpriced' if rs.calls and rs.unpriced == rs.calls else _cost(rs.cost_usd)}</td></tr>")
        return ('<table class="stats"><thead><tr><th>round</th><th>ideas</th><th>branches</th><th>evaluated</th>'
                '<th>correct</th><th class=l>failed</th><th>best in round</th><th>best so far</th><th>tokens</th>'
                f'<th>cost</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')

    def _cost_table(self) -> str:
        if not self.costs:
            return '<p class="dim">no LLM calls recorded</p>'
        rows = [f"<tr><td class=l>{_E(c.role)}</td><td class=l>{_E(c.provider)}</td><td class=l>{_E(c.model)}</td>"
                f"<td>{c.calls}</td><td>{c.errors}</td><td>{c.tokens_in:,}</td><td>{c.tokens_out:,}</td>"
                f"<td>{_row_cost(c)}</td><td>{_dur(c.latency_s)}</td></tr>" for c in self.costs]
        tot = self.st
        rows.append(f'<tr class="tot"><td class=l colspan=3>total</td><td>{tot.llm_calls}</td><td>{tot.llm_errors}'
                    f'</td><td>{tot.tokens_in:,}</td><td>{tot.tokens_out:,}</td><td>{_E(_cost_of(tot))}</td>'
                    f'<td>{_dur(sum(c.latency_s for c in self.costs))}</td></tr>')
        return ('<table class="stats"><thead><tr><th class=l>role</th><th class=l>provider</th><th class=l>model'
                '</th><th>calls</th><th>errors</th><th>tokens in</th><th>tokens out</th><th>cost</th>'
                f'<th>latency (sum)</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')

    def _kernel_data(self) -> dict[str, dict[str, Any]]:
        """Per kernel, the results the page renders when the kernel is opened (keys kept short: 10,000 kernels)."""
        data: dict[str, dict[str, Any]] = {}
        for k in self.t.kernels.values():
            d: dict[str, Any] = {"s": k.state, "R": k.round, "B": k.branch, "L": k.language, "h": k.code_hash}
            for key, v in (("g", k.stage), ("r", k.reason), ("t", k.time_ms), ("e", k.ref_time_ms),
                           ("c", k.compile_ref_time_ms), ("x", k.speedup), ("y", k.speedup_compile),
                           ("b", k.gbps), ("f", k.tflops), ("o", k.roofline_fraction), ("n", k.bottleneck),
                           ("j", k.timing_kind), ("d", k.device)):
                if v is not None:
                    d[key] = v
            err = self.errors.get(k.id)
            if err:
                d["E"] = err if len(err) <= 4000 else err[:4000] + f"\n… ({len(err) - 4000} more characters)"
            data[str(k.id)] = d
        return data

    def _kernel(self, kid: int, out: list[str]) -> None:
        t, k = self.t, self.t.kernels[kid]
        cls = ["k", f"s-{k.state}"]
        if kid in self.on_path:
            cls.append("path")
        if self.best and kid == self.best.id:
            cls.append("best")
        badge = f'<span class="st">{_E(k.state)}</span>'
        if k.status == "ok":
            info = f'<span class="x">{_x(k.speedup)}</span> eager'
            if k.speedup_compile is not None:
                info += f" · {_x(k.speedup_compile)} compile"
            if k.roofline_fraction is not None:
                info += f" · {_pct(k.roofline_fraction)} roofline"
        else:
            info = f'<span class="why">{_E(_one_line(k.reason, 140))}</span>'
        star = '<span class="star" title="on the path to the best kernel">★</span> ' if kid in self.on_path else ""
        role = "seed" if k.is_seed else f"b{k.branch}"
        is_open = " open" if kid in self.on_path else ""
        out.append(f'<li><details class="{" ".join(cls)}" id="k{kid}"{is_open}><summary>{star}<b>k{kid}</b> '
                   f'<span class="dim">{role}</span> {badge} {info}</summary>')
        out.append(f'<details class="res" data-k="{kid}"><summary>results &amp; code</summary></details>')
        ideas = t.ideas_of.get(kid, [])
        direct = t.direct_children.get(kid, [])
        if ideas or direct:
            out.append('<ul>')
            for iid in ideas:
                self._idea(iid, out)
            for c in direct:
                self._kernel(c, out)
            out.append('</ul>')
        out.append('</details></li>')

    def _idea(self, iid: int, out: list[str]) -> None:
        t, i = self.t, self.t.ideas[iid]
        ks = sorted(t.branches_of.get(iid, []), key=lambda k: (t.kernels[k].branch, k))
        ok = [t.kernels[k] for k in ks if t.kernels[k].status == "ok"]
        best = max((k.speedup for k in ok if k.speedup is not None), default=None)
        on_path = any(k in self.on_path for k in ks)
        summ = f"{len(ok)}/{len(ks)} ok" + (f", best {_x(best)}" if best is not None else "")
        out.append(f'<li><details class="idea{" path" if on_path else ""}" id="i{iid}"{" open" if on_path else ""}>'
                   f'<summary><span class="iid">i{iid}</span> <span class="dim">r{i.round}</span> '
                   f'<span class="title">{_E(_one_line(i.title, 160))}</span> <span class="dim">({summ})</span>'
                   f'</summary><div class="itext">{_E(i.text or "")}</div><ul>')
        for kid in ks:
            self._kernel(kid, out)
        out.append('</ul></details></li>')

    def _tree(self) -> str:
        out: list[str] = ['<ul class="tree">']
        for kid in self.t.roots:
            self._kernel(kid, out)
        for iid in self.t.top_ideas:
            self._idea(iid, out)
        out.append('</ul>')
        if len(out) == 2:
            return '<p class="dim">the run has no kernels yet</p>'
        return "".join(out)

    def _best(self) -> str:
        b = self.best
        if b is None:
            return '<p class="dim">no correct kernel yet</p>'
        path = self.t.path_to(b.id)
        steps = []
        for kid in path:
            k = self.t.kernels[kid]
            idea = self.t.ideas.get(k.idea_id) if k.idea_id is not None else None
            via = f'<span class="iid">i{idea.id}</span> {_E(_one_line(idea.title, 100))} → ' if idea else "seed → "
            steps.append(f'<li>{via}<a href="#k{kid}">k{kid}</a> {_E(k.state)} {_x(k.speedup)}</li>')
        code = self.codes.get(self.hash_of.get(b.id, ""), "")
        return (f'<ol class="lineage">{"".join(steps)}</ol><div class="resbox" data-k="{b.id}"></div>'
                f'<pre class="code" data-h="{_E(self.hash_of.get(b.id, ""))}">{_E(code)}</pre>')

    def html(self) -> str:
        r = self.run
        data = _line_table(self.codes)
        data["k"] = self._kernel_data()
        data["cpu"] = CPU_KIND
        code_json = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
        code_json = code_json.replace("<", "\\u003c")   # no "</script>" or "<!--" can end the element early
        title = f"kernelsearch · {r.name}"
        return "".join([
            "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
            '<meta name=viewport content="width=device-width,initial-scale=1">',
            f"<title>{_E(title)}</title><style>{_CSS}</style></head><body>",
            f'<header><h1>{_E(title)}</h1>{self._summary()}</header>',
            '<section id="progress"><h2>Progress</h2>', self._plots(), "</section>",
            '<section id="rounds"><h2>Rounds</h2><div class="scroll">', self._rounds_table(), "</div></section>",
            '<section id="cost"><h2>Cost</h2>', self._cost_table(), "</section>",
            '<section id="best"><h2>Best kernel', f" k{self.best.id}" if self.best else "", "</h2>",
            self._best(), "</section>",
            '<section id="tree"><h2>Idea tree</h2><div class="ctl"><button type=button data-act=open>expand all'
            '</button><button type=button data-act=close>collapse all</button><button type=button data-act=path>'
            'best path only</button> <span class="dim">★ the path from the starter to the best kernel · '
            f'{len(self.t.kernels)} kernels, {len(self.t.ideas)} ideas</span></div>',
            self._tree(), "</section>",
            f'<footer class="dim">written by kernelsearch from the store; run id {r.id}.</footer>',
            f'<script type="application/json" id="ks-code">{code_json}</script>',
            f"<script>{_JS}</script></body></html>",
        ])


def _line_table(codes: dict[str, str]) -> dict[str, Any]:
    """Each distinct source line once, each code as a list of line numbers into that table. Kernels of one run
    share most lines (10,000 variants of one kernel: 24 MB as text, about 3 MB this way)."""
    index: dict[str, int] = {}
    lines: list[str] = []
    out: dict[str, list[int]] = {}
    for h, code in codes.items():
        ids = []
        for ln in code.split("\n"):
            i = index.get(ln)
            if i is None:
                i = index[ln] = len(lines)
                lines.append(ln)
            ids.append(i)
        out[h] = ids
    return {"lines": lines, "codes": out}


def _row_cost(c: q.CostRow) -> str:
    if c.unpriced == c.calls:
        return "unpriced"
    return _cost(c.cost_usd) + (f" +{c.unpriced} unpriced" if c.unpriced else "")


def _nice_step(span: float, n: int = 5) -> float:
    if span <= 0:
        return 1.0
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def _fmt_tick(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.2g}" if abs(v) < 1 else f"{v:.3g}"


def _svg_plot(points: list[tuple[float, float]], fails: list[float], steps: list[tuple[float, float]],
              mark: Optional[tuple[float, float]], title: str, xlabel: str, ylabel: str, xmax: float,
              best_id: Optional[int], css_id: str) -> str:
    """An inline SVG: every correct evaluation as a dot, failures as ticks on the axis, the best-so-far as a
    step line, and y = 1 (eager) dashed. Dots and ticks are one path each, so 10,000 points stay small."""
    W, H, L, R, T, B = 560, 320, 56, 16, 30, 44
    pw, ph = W - L - R, H - T - B
    # y = 1 (eager) is in range unless every speedup is far below it (CPU-interpreter runs: 0.002x and such)
    ymax_data = max([y for _, y in points] or [1.0])
    if ymax_data > 0.3:
        ymax_data = max(ymax_data, 1.0)
    ystep = _nice_step(ymax_data * 1.1)
    ymax = ystep * math.ceil(ymax_data * 1.1 / ystep)
    xmax = max(xmax, max((x for x, _ in points), default=0.0), max(fails, default=0.0), 1e-9)
    xstep = _nice_step(xmax)
    xmax = xstep * math.ceil(xmax / xstep)

    def X(v: float) -> float:
        return L + pw * v / xmax

    def Y(v: float) -> float:
        return T + ph * (1 - min(v, ymax) / ymax)

    parts = [f'<svg class="plot" id="plot-{css_id}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
             f'aria-label="{_E(title)}"><text x="{L}" y="18" class="pt">{_E(title)}</text>']
    grid, labels = [], []
    y = 0.0
    while y <= ymax + 1e-9:
        grid.append(f"M{L} {Y(y):.1f}H{L + pw}")
        labels.append(f'<text x="{L - 6}" y="{Y(y) + 4:.1f}" text-anchor="end">{_fmt_tick(y)}</text>')
        y += ystep
    x = 0.0
    while x <= xmax + 1e-9:
        grid.append(f"M{X(x):.1f} {T}V{T + ph}")
        labels.append(f'<text x="{X(x):.1f}" y="{T + ph + 16}" text-anchor="middle">{_fmt_tick(x)}</text>')
        x += xstep
    parts.append(f'<path class="grid" d="{"".join(grid)}"/>')
    parts.append(f'<path class="axis" d="M{L} {T}V{T + ph}H{L + pw}"/>')
    parts.extend(labels)
    parts.append(f'<text x="{L + pw / 2}" y="{H - 6}" text-anchor="middle" class="al">{_E(xlabel)}</text>')
    parts.append(f'<text transform="translate(14 {T + ph / 2}) rotate(-90)" text-anchor="middle" class="al">'
                 f'{_E(ylabel)}</text>')
    if ymax >= 1.0:
        parts.append(f'<path class="eager" d="M{L} {Y(1.0):.1f}H{L + pw}"/>'
                     f'<text x="{L + pw - 2}" y="{Y(1.0) - 4:.1f}" text-anchor="end" class="el">eager</text>')
    if not points and not fails:
        parts.append(f'<text x="{L + pw / 2}" y="{T + ph / 2}" text-anchor="middle" class="al">'
                     'no evaluations yet</text>')
    if fails:
        parts.append('<path class="fails" d="' + "".join(f"M{X(v):.1f} {T + ph}v-6" for v in fails) + '"/>')
    if points:
        parts.append('<path class="dots" d="' + "".join(f"M{X(a):.1f} {Y(b):.1f}h0" for a, b in points) + '"/>')
    if steps:
        d = [f"M{X(steps[0][0]):.1f} {Y(steps[0][1]):.1f}"]
        for (x0, y0), (x1, y1) in zip(steps, steps[1:]):
            if y1 != y0:
                d.append(f"H{X(x1):.1f}V{Y(y1):.1f}")
        d.append(f"H{X(xmax):.1f}")
        parts.append(f'<path class="best" d="{"".join(d)}"/>')
    if mark is not None:
        mx, my = X(mark[0]), Y(mark[1])
        anchor = "end" if mx > L + 0.8 * pw else "start" if mx < L + 0.2 * pw else "middle"
        parts.append(f'<circle class="mark" cx="{mx:.1f}" cy="{my:.1f}" r="5"><title>best: k{best_id}, '
                     f'{_x(mark[1])}</title></circle><text x="{mx:.1f}" y="{max(my - 9, T - 2):.1f}" '
                     f'text-anchor="{anchor}" class="ml">{_x(mark[1])} k{best_id}</text>')
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
:root{--fg:#1d232a;--dim:#6b7480;--bg:#fff;--line:#d8dde3;--ok:#16794c;--bad:#b42318;--warn:#a15c00;--acc:#1f5fbf;
--path:#b7791f}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);
background:var(--bg);margin:0 auto;max-width:1240px;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);
padding-bottom:4px}
a{color:var(--acc)}.dim{color:var(--dim)}.meta{margin:4px 0}.note{color:var(--warn);margin:4px 0}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin-top:10px}.card{border:1px solid var(--line);border-radius:6px;
padding:8px 12px;min-width:130px}.card .lab{color:var(--dim);font-size:12px}.card .val{font-size:20px;font-weight:600}
.card .sub{color:var(--dim);font-size:12px;max-width:260px}
.plots{display:flex;flex-wrap:wrap;gap:16px}.plot{border:1px solid var(--line);border-radius:6px;background:#fff}
.plot text{font-size:11px;fill:var(--fg)}.plot .pt{font-size:13px;font-weight:600}.plot .al{fill:var(--dim)}
.plot .grid{stroke:#eef0f3;fill:none}.plot .axis{stroke:#8a939e;fill:none}.plot .eager{stroke:#8a939e;
stroke-dasharray:4 3;fill:none}.plot .el{fill:var(--dim)}.plot .dots{stroke:#9aa6b5;stroke-width:4;
stroke-linecap:round;fill:none;opacity:.7}.plot .fails{stroke:var(--bad);stroke-width:1;opacity:.5;fill:none}
.plot .best{stroke:var(--acc);stroke-width:2;fill:none}.plot .mark{fill:var(--path);stroke:#fff}
.plot .ml{font-weight:600;fill:var(--path)}
table.stats{border-collapse:collapse;font-variant-numeric:tabular-nums}table.stats th,table.stats td{
padding:3px 10px;border-bottom:1px solid var(--line);text-align:right}table.stats .l{text-align:left}
table.stats tr.tot td{font-weight:600}table.stats td{white-space:nowrap}.scroll{overflow-x:auto}
table.res{border-collapse:collapse;margin:6px 0;font-size:13px}table.res th{text-align:right;color:var(--dim);
font-weight:normal;padding:1px 10px 1px 0;vertical-align:top}table.res td{padding:1px 0}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:8px 10px;overflow:auto;
font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;max-height:560px}pre.err{color:var(--bad)}
pre.code:empty::before{content:"(code loads when opened)";color:var(--dim)}
.code .k{color:#8839ef;font-weight:600}.code .s{color:#0a7a3d}.code .c{color:#7a8490;font-style:italic}
.code .m{color:#b35900}.code .nd{color:#1f5fbf}.code .nb{color:#00739e}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:18px;border-left:1px dotted var(--line)}
ul.tree{padding-left:0;border:0}details>summary{cursor:pointer;padding:1px 0}details.k>summary .st{
font-weight:600}details.s-ok>summary .st{color:var(--ok)}details.k:not(.s-ok):not(.s-queued)>summary .st{
color:var(--bad)}details.s-queued>summary .st{color:var(--acc)}.why{color:var(--dim)}.x{font-weight:600}
details.path>summary{background:#fff7e0}details.best>summary{background:#ffe9b3}.star{color:var(--path)}
.iid{color:#00739e;font-weight:600}.idea .title{font-weight:600}.itext{white-space:pre-wrap;color:#36404a;
margin:2px 0 4px 18px;font-size:13px}details.res{margin:2px 0 6px 18px}details.res>summary{color:var(--dim);
font-size:12px}.ctl{margin:4px 0 10px}.ctl button{margin-right:6px}ol.lineage{margin:4px 0 8px}
footer{margin-top:32px;font-size:12px}
"""

# The page's only script: fills a kernel's code from the embedded JSON when its panel opens, highlights Python
# (a small tokenizer: keywords, strings, comments, numbers, decorators), and drives the tree buttons.
_JS = r"""
(function(){
"use strict";
var DATA=JSON.parse(document.getElementById("ks-code").textContent);
function codeOf(h){var ix=DATA.codes[h];return ix?ix.map(function(i){return DATA.lines[i];}).join("\n"):"";}
var KW=new Set(("False None True and as assert async await break class continue def del elif else except "+
"finally for from global if import in is lambda nonlocal not or pass raise return try while with yield").split(" "));
var NB=new Set(["tl","triton","torch","self","range","len","int","float","min","max"]);
var RE=/(#[^\n]*)|(\x22\x22\x22[\s\S]*?\x22\x22\x22|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(@[\w.]+)|\b(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\b|([A-Za-z_]\w*)/g;
function esc(s){return s.replace(/&/g,"&amp;").replace(/</g,"&lt;").replace(/>/g,"&gt;");}
function hl(code){
  var out=[],last=0,m;RE.lastIndex=0;
  while((m=RE.exec(code))!==null){
    out.push(esc(code.slice(last,m.index)));last=RE.lastIndex;
    var cls=m[1]?"c":m[2]?"s":m[3]?"nd":m[4]?"m":KW.has(m[5])?"k":NB.has(m[5])?"nb":null;
    out.push(cls?'<span class="'+cls+'">'+esc(m[0])+"</span>":esc(m[0]));
  }
  out.push(esc(code.slice(last)));return out.join("");
}
function fill(pre){
  if(pre.dataset.done)return;
  var code=pre.textContent||codeOf(pre.dataset.h);
  pre.innerHTML=hl(code);pre.dataset.done="1";
}
function ms(v){return v>=1000?(v/1000).toPrecision(3)+" s":v>=1?v.toPrecision(3)+" ms":(v*1000).toPrecision(3)+" \u00b5s";}
function x(v){return (v<0.1?v.toPrecision(2):v<100?v.toFixed(2):v.toFixed(0))+"\u00d7";}
function pct(v){return (v*100).toFixed(0)+"%";}
function results(kid){
  var d=DATA.k[kid];if(!d)return "";
  var rows=[["status",esc(d.s)+(d.g?" ("+esc(d.g)+")":"")+(d.r?" \u2014 "+esc(d.r):"")]];
  if(d.t!=null){var refs=["eager "+ms(d.e)];if(d.c!=null)refs.push("torch.compile "+ms(d.c));
    rows.push(["time",ms(d.t)+" (reference: "+refs.join(", ")+")"]);}
  if(d.x!=null)rows.push(["speedup",x(d.x)+" over eager"+(d.y!=null?" \u00b7 "+x(d.y)+" over torch.compile":"")]);
  var tp=[];if(d.b!=null)tp.push(d.b.toFixed(1)+" GB/s");if(d.f!=null)tp.push(d.f.toFixed(3)+" TFLOP/s");
  if(d.o!=null)tp.push(pct(d.o)+" of roofline");if(d.n)tp.push(esc(d.n)+"-bound");
  if(tp.length)rows.push(["throughput",tp.join(" \u00b7 ")]);
  if(d.j||d.d)rows.push(["timing",esc(d.j||"\u2014")+(d.j===DATA.cpu?" (not comparable with GPU timings)":"")+
    (d.d?" \u00b7 "+esc(d.d):"")]);
  rows.push(["kernel","round "+d.R+" \u00b7 branch "+d.B+" \u00b7 "+esc(d.L)+" \u00b7 "+esc(d.h)]);
  return '<table class="res">'+rows.map(function(r){return "<tr><th>"+r[0]+"</th><td>"+r[1]+"</td></tr>";}).join("")+
    "</table>"+(d.E?'<pre class="err">'+esc(d.E)+"</pre>":"");
}
function openRes(det){
  if(det.dataset.done)return;det.dataset.done="1";
  var kid=det.dataset.k,d=DATA.k[kid],box=document.createElement("div");
  box.innerHTML=results(kid);det.appendChild(box);
  var pre=document.createElement("pre");pre.className="code";pre.dataset.h=d?d.h:"";det.appendChild(pre);fill(pre);
}
window.ksOpen=openRes;
document.addEventListener("toggle",function(e){
  var d=e.target;if(d.open&&d.classList&&d.classList.contains("res"))openRes(d);
},true);
document.querySelectorAll(".resbox").forEach(function(b){b.innerHTML=results(b.dataset.k);});
document.querySelectorAll("#best pre.code").forEach(fill);
function openTo(id){
  var el=document.getElementById(id);
  for(var p=el;p;p=p.parentElement){if(p.tagName==="DETAILS")p.open=true;}
  if(el){var res=el.querySelector(":scope>details.res");if(res){res.open=true;openRes(res);}}
}
window.addEventListener("hashchange",function(){var h=location.hash.slice(1);if(h)openTo(h);});
if(location.hash.length>1&&document.getElementById(location.hash.slice(1)))openTo(location.hash.slice(1));
document.querySelectorAll(".ctl button").forEach(function(b){b.addEventListener("click",function(){
  var act=b.dataset.act;document.querySelectorAll("#tree details.k, #tree details.idea").forEach(function(d){
    d.open=act==="open"?true:act==="close"?false:d.classList.contains("path");});
});});
})();
"""  # noqa: E501  (the tokenizer's regular expression is one line)


def register(app: typer.Typer) -> None:
    """Add the read-only commands to the CLI."""
    app.command("runs")(runs_cmd)
    app.command("tree")(tree_cmd)
    app.command("show")(show_cmd)
    app.command("diff")(diff_cmd)
    app.command("compare")(compare_cmd)
    app.command("report")(report_cmd)
    app.command("export-tsv")(export_tsv_cmd)
