"""`kernelsearch runs`: every run in the store, one row each."""
from __future__ import annotations

import typer
from rich.table import Table

from kernelsearch.store import DEFAULT_DB
from kernelsearch.store import queries as q
from kernelsearch.store.model_queries import children
from kernelsearch.views import fmt
from kernelsearch.views.paint import stdout_console
from kernelsearch.views.session import DbOpt, read_only_session, warn_damaged


def runs_cmd(db: DbOpt = DEFAULT_DB) -> None:
    """Every run in the store: status, rounds, evaluations, best speedup, tokens, cost, wall time."""
    with read_only_session(db) as s:
        runs = q.list_runs(s)
        if not runs:
            typer.echo(f"no runs in {db}")
            return
        table = Table(title=f"runs in {db}", title_justify="left", header_style="bold")
        for col in ("name", "problem", "status", "stop reason", "rounds", "evaluations", "best",
                    "tokens", "cost", "wall", "started"):
            table.add_column(col, justify="right" if col in ("rounds", "tokens", "cost", "wall") else "left")
        kids = children(s)   # a model run's child runs are listed under it, indented
        child_ids = {c for cs in kids.values() for c in cs}
        by_id = {r.id: r for r in runs}
        ordered = []
        for run in runs:
            if run.id not in child_ids:
                ordered.append((run, ""))
                ordered += [(by_id[c], "  └ ") for c in kids.get(run.id, []) if c in by_id]
        for run, indent in ordered:
            warn_damaged(s, run)
            st = q.run_stats(s, run.id)
            best = "—" if st.best_speedup is None else f"{fmt.x(st.best_speedup)} k{st.best_kernel_id}"
            if st.best_speedup is not None and st.timing_kinds == [fmt.CPU_KIND]:
                best += " [cpu]"
            if st.best_speedup is not None:   # the best's own time: the run's reference figure over it is its speedup
                best += f" ({fmt.timed(st.best_time_ms, st.best_timings)})"
            evals = fmt.by_status(st.by_status, st.queued) + (f" · {st.retimes} re-timings" if st.retimes else "")
            table.add_row(indent + run.name, run.problem, run.status, run.stop_reason or "—", str(st.rounds),
                          evals, best, fmt.tokens(st.tokens), fmt.cost_of(st), fmt.dur(st.wall_s),
                          fmt.when(run.started_at))
        stdout_console().print(table)
        _batches(s)


def _batches(s) -> None:
    """Each batch of `kernelsearch bench` in the store, with its fast_p over all its problems (as bench, report and
    compare count it: refused and pending problems included)."""
    from kernelsearch.bench import batch_names
    from kernelsearch.views.batch import batch_rows, fast_p_lines

    out = stdout_console()
    for name in batch_names(s):
        rows = batch_rows(s, name)
        if rows:
            out.print(f"batch {name}: " + fast_p_lines(rows)[0], markup=False, soft_wrap=True)
