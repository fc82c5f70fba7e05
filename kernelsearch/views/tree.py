"""`kernelsearch tree`: the idea tree of a run, as painted text or one JSON document, under filters."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Annotated, Any, Optional

import typer

from kernelsearch.store import DEFAULT_DB
from kernelsearch.store import queries as q
from kernelsearch.store.models import Run
from kernelsearch.store.status import Status
from kernelsearch.views import fmt
from kernelsearch.views.paint import STATUS_STYLE, Paint, stdout_console
from kernelsearch.views.session import DbOpt, fail, find_run, read_only_session, warn_damaged

FAILED = "failed"          # --status failed: every evaluated status but ok and harness_error (not the kernel's)
NOT_FAILED = (Status.ok.value, Status.harness_error.value, Status.unverified.value, q.QUEUED)


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
                    if (k.state not in NOT_FAILED if status == FAILED else k.state == status)]
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
    def kernel_label(self, k: q.KernelRow, paint: Paint) -> str:
        context = self.filtered and k.id not in self.matched
        on_path = k.id in self.on_path
        parts = []
        if on_path:
            parts.append(paint("★", "bold yellow"))
        parts.append(paint(f"k{k.id}", "bold" if not context else "dim"))
        parts.append(paint("seed" if k.is_seed else f"b{k.branch}", "dim"))
        reason = fmt.one_line(k.reason, 110) if k.status not in (None, Status.ok) else ""
        parts.append(paint(k.state + (":" if reason else ""), STATUS_STYLE.get(k.state, "red") if not context
                           else "dim"))
        if k.status == Status.ok:
            parts.append(paint(f"{fmt.x(k.speedup)} eager", "green" if (k.speedup or 0) > 1 else "yellow"))
            parts.append(paint(f"({fmt.timed(k.time_ms, k.timings)})", "dim"))
            if k.speedup_compile is not None:
                parts.append(f"{fmt.x(k.speedup_compile)} compile")
            if k.retime_failed:
                parts.append(paint(f"re-timing {k.retime_failed}: not ranked", "red"))
            if k.roofline_fraction is not None:
                parts.append(f"{fmt.pct(k.roofline_fraction)} roofline")
            if self.mixed and k.timing_kind == fmt.CPU_KIND:
                parts.append(paint("[cpu]", "dim"))
        elif reason:
            parts.append(paint(reason, "dim" if context else None))
        if k.id == self.best_id:
            parts.append(paint("← best", "bold yellow"))
        return " ".join(parts)

    def idea_label(self, i: q.IdeaRow, paint: Paint) -> str:
        ks = [self.t.kernels[k] for k in self.t.branches_of.get(i.id, [])]
        ok = [k for k in ks if k.status == Status.ok]
        best = max((k.speedup for k in ok if k.ranked and k.speedup is not None), default=None)
        unjudged = sum(1 for k in ks if k.status == Status.harness_error)
        summary = f"{len(ok)}/{len(ks)} ok" + (f", best {fmt.x(best)}" if best is not None else "")
        if unjudged:
            summary += f", {unjudged} not judged"
        if i.branches_wanted > len(ks):
            summary += f", {i.branches_wanted - len(ks)} not written"
        return " ".join([paint(f"i{i.id}", "cyan"), paint(f"r{i.round}", "dim"),
                         paint(fmt.one_line(i.title, 100) or "(untitled idea)", "bold cyan"),
                         paint(f"({summary})", "dim")])

    def lines(self, paint: Paint) -> list[str]:
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
            "speedup": k.speedup, "speedup_compile": k.speedup_compile, "timings": k.timings,
            "ref_timings": k.ref_timings, "retimes": k.retimes, "retime_failed": k.retime_failed, "ranked": k.ranked,
            "eval_time_ms": k.eval_time_ms, "eval_ref_time_ms": k.eval_ref_time_ms, "eval_speedup": k.eval_speedup,
            "roofline_fraction": k.roofline_fraction,
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
            "stop_reason": run.stop_reason, "device": run.device, "strategy": fmt.strategy(run),
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
                         "harness_error (the judge could not evaluate it), queued, or failed (any but ok, "
                         "harness_error and queued).")] = None,
    round_: Annotated[Optional[int], typer.Option("--round", min=0,
                                                  help="Only the ideas and kernels of round R.")] = None,
    depth: Annotated[Optional[int], typer.Option("--depth", min=0, help="Show at most D generations of ideas.")] = None,
) -> None:
    """The idea tree of a run: each round's ideas under the kernel they came from, each idea with its branches."""
    if status is not None and status not in (*q.STATUSES, q.QUEUED, FAILED):
        fail(f"unknown --status {status!r}; one of: {', '.join((*q.STATUSES, q.QUEUED, FAILED))}")
    with read_only_session(db) as s:
        run = find_run(s, name, db)
        warn_damaged(s, run)
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
    console = stdout_console()
    paint = Paint(console)
    head = [paint(f"run {run.name}", "bold") + f" · problem {run.problem} · {run.status}"
            + (f" ({run.stop_reason})" if run.stop_reason else "") + (f" · device {run.device}" if run.device else "")
            + f" · strategy {fmt.strategy(run)}",
            f"{st.kernels} kernels, {st.ideas} ideas, {st.rounds} rounds · evaluations: "
            f"{fmt.by_status(st.by_status, st.queued)} · best "
            + (f"{fmt.x(st.best_speedup)} (k{st.best_kernel_id}, {fmt.timed(st.best_time_ms, st.best_timings)})"
               if st.best_speedup is not None else "—")
            + f" · {fmt.tokens(st.tokens)} tokens · {fmt.cost_of(st)} · {fmt.dur(st.wall_s)}"]
    note = fmt.timing_note(view.kinds)
    if note:
        head.append(paint(note, "yellow"))
    ref = fmt.reference_line(st)
    if ref:
        head.append(paint(ref, "dim"))
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
