"""The live view of a running search: the controller's events (`emit(kind, data)`) drawn as they come.

On a terminal, a rich panel stays at the bottom of the screen and is redrawn on every event (and a few times a
second, so the clock moves): round, evaluations done / running / queued, the best kernel so far with its id,
tokens, cost, elapsed time and what is left of each budget; the events' own lines (a round's seeds and ideas,
each kernel's verdict) scroll above it. Where the output is not a terminal (a log file, CI, a pipe) there is no
panel: each verdict is followed by one plain status line with the same fields.

Counts come from the store at each event (done: kernels with an evaluation; queued: kernels without one that
have not started), `running` from the events (started, not yet answered), so a resumed run's queue and a kernel
refused before evaluation (families/feasibility.py: answered without ever starting) are counted right.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kernelsearch.store import queries as q
from kernelsearch.store import session_scope
from kernelsearch.store.status import Status


@dataclass
class Snapshot:
    """What the view shows, at one moment."""

    round: int = 0
    done: int = 0
    running: int = 0
    queued: int = 0
    best_speedup: float | None = None
    best_kernel: int | None = None
    tokens: int = 0
    cost: float = 0.0
    elapsed_s: float = 0.0
    stopped: str | None = None


def _duration(s: float) -> str:
    s = max(int(round(s)), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class LiveView:
    """An event sink for the controller (call it with `(kind, data)`); `with view:` around the run draws the panel
    on a terminal. `budgets`: the run's (evaluations, tokens, dollars, wall_time_s; 0 or None: no limit)."""

    def __init__(self, console: Console, engine, run_id: int, budgets: Any = None, *, clock=time.monotonic):
        self.c, self.engine, self.run_id, self.budgets = console, engine, run_id, budgets
        self.clock = clock
        self.snap = Snapshot()
        self._running: set[int] = set()
        self._t0 = clock()
        with session_scope(engine) as s:
            self._elapsed_base = q.run_elapsed(s, run_id)
        self._refresh_counts()
        self.terminal = console.is_terminal
        self._live: Live | None = None

    # -- the run's lifetime ---------------------------------------------------------------------------------
    def __enter__(self) -> LiveView:
        if self.terminal:
            self._live = Live(get_renderable=self.render, console=self.c, refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # -- events ---------------------------------------------------------------------------------------------
    def __call__(self, kind: str, data: dict) -> None:
        if kind == "evaluating":
            self._running.add(data["kernel_id"])
        elif kind in ("evaluated", "not_started"):
            self._running.discard(data["kernel_id"])
        elif kind in ("round", "first_kernels"):
            self.snap.round = data["round"]
        elif kind == "finished":
            self.snap.stopped = data["reason"]
        self._refresh_counts()
        self._lines(kind, data)
        if kind == "evaluated" and not self.terminal:
            self.c.print("        " + self.status_line(), style="dim", markup=False, highlight=False)
        if self._live is not None:
            self._live.refresh()

    def _refresh_counts(self) -> None:
        with session_scope(self.engine) as s:
            made = q.kernel_count(s, self.run_id)
            waiting = len(q.queued_kernels(s, self.run_id))
            self.snap.tokens, self.snap.cost = q.usage(s, self.run_id)
            best = q.best_kernels(s, self.run_id, 1)   # by its own time; the speedup: the run's reference over it
        self.snap.done = made - waiting
        self.snap.running = len(self._running)
        self.snap.queued = max(waiting - self.snap.running, 0)
        if best:
            self.snap.best_speedup, self.snap.best_kernel = best[0].speedup, best[0].id

    def _lines(self, kind: str, data: dict) -> None:
        """The events' own lines (what Progress printed before the panel)."""
        p = self.c.print
        if kind == "round":
            p(f"[bold]round {data['round']}[/]: seeds {data['seeds']}")
        elif kind == "ideas":
            p(f"  {data['n']} ideas: " + "; ".join(data["titles"]), markup=False)
        elif kind == "evaluated":
            sp = data.get("speedup")
            ok = data["status"] == Status.ok and sp is not None
            what = f"{sp:.3g}x" if ok else (data.get("reason") or "")[:80]
            p(f"  k{data['kernel_id']:<4} {data['status']:<13} {what}", markup=False, highlight=False)
        elif kind == "not_started":
            p(f"  k{data['kernel_id']:<4} not started ({data['reason']}): stored, queued", style="dim", markup=False)
        elif kind == "harness_retry":
            p(f"  k{data['kernel_id']:<4} not judged (the judge's own failure): evaluating it once more: "
              f"{(data.get('reason') or '')[:100]}", style="dim", markup=False)
        elif kind == "unjudged":
            p(f"  {data['n']} kernels the judge could not evaluate before (harness_error): evaluating them again",
              style="dim", markup=False)
        elif kind == "retiming":
            p(f"  re-timing the finalists {', '.join(f'k{k}' for k in data['kernels'])} ({data['when']}, "
              f"{data['n']} re-timing{'s' if data['n'] != 1 else ''}): a kernel's time is the median of its timings",
              style="dim", markup=False)
        elif kind == "retimed":
            ok = data["status"] == Status.ok and data.get("time_ms") is not None
            what = f"{data['time_ms']:.4g} ms" if ok else (data.get("reason") or "")[:80]
            if ok and (data.get("group") or 1) > 1:
                what += f" (side by side with {data['group'] - 1} other{'s' if data['group'] > 2 else ''})"
            p(f"  k{data['kernel_id']:<4} re-timed: {data['status']:<13} {what}", style="dim", markup=False,
              highlight=False)
        elif kind == "queued":
            p(f"  {data['n']} kernels queued from before: evaluating them first", style="dim", markup=False)
        elif kind == "llm_error":
            p(f"  [yellow]{data['role']} reply unusable:[/] {str(data['error'])[:200]}", highlight=False)
        elif kind == "first_kernels":
            p(f"[bold]round {data['round']}[/]: the coder writes {data['n']} first kernels from the reference "
              "(no starter; the reference is the baseline, never a candidate)")
        elif kind == "no_correct":
            p(f"[yellow]no first kernel is correct yet[/]: round {data['round']} writes first kernels again, "
              "shown the failures")
        elif kind == "none_correct":
            p(f"[yellow]no correct kernel found[/] before the run stopped ({data['reason']})")
        elif kind == "finished":
            p(f"[bold]finished[/]: {data['reason']}  ({self.status_line()})", highlight=False)

    # -- what is drawn --------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self._elapsed_base + self.clock() - self._t0

    def remaining(self) -> list[str]:
        """What is left of each budget the run has, as short phrases."""
        b, s = self.budgets, self.snap
        if b is None:
            return []
        left = []
        if getattr(b, "evaluations", None):
            left.append(f"{max(b.evaluations - s.done - s.running - s.queued, 0)} of {b.evaluations} evals")
        if getattr(b, "tokens", None):
            left.append(f"{max(b.tokens - s.tokens, 0)} of {b.tokens} tokens")
        if getattr(b, "dollars", None):
            left.append(f"${max(b.dollars - s.cost, 0):.4f} of ${b.dollars:g}")
        if getattr(b, "wall_time_s", None):
            left.append(f"{_duration(b.wall_time_s - self.elapsed())} of {_duration(b.wall_time_s)}")
        return left

    def _best(self) -> str:
        s = self.snap
        if s.best_speedup is None:
            return "none correct yet"
        return f"{s.best_speedup:.3g}x (k{s.best_kernel})"

    def status_line(self) -> str:
        s = self.snap
        left = self.remaining()
        return (f"round {s.round} | evals {s.done} done, {s.running} running, {s.queued} queued | best {self._best()}"
                f" | {s.tokens} tokens ${s.cost:.4f} | {_duration(self.elapsed())} elapsed"
                + (f" | left: {', '.join(left)}" if left else ""))

    def render(self) -> Group:
        s = self.snap
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("round", str(s.round) + (f"  (stopped: {s.stopped})" if s.stopped else ""))
        grid.add_row("evaluations", f"{s.done} done, {s.running} running, {s.queued} queued")
        grid.add_row("best", self._best())
        grid.add_row("tokens / cost", f"{s.tokens} tokens, ${s.cost:.4f}")
        grid.add_row("elapsed", _duration(self.elapsed()))
        left = self.remaining()
        grid.add_row("budget left", ", ".join(left) if left else "no budget set")
        return Group(Text("kernelsearch: live", style="dim"), grid)
