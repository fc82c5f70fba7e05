"""What an export is read from: the kernel, its run and its evaluation in the store (export/__init__.py for a
single kernel, model_layout.py for each of a model run's kernels). The evaluation's times and speedups are the
run's clock's (store/clock.py): the kernel's own time (the median of its timings), the run's reference figure and
their ratio; what the evaluation measured side by side is kept as `eval_*`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from kernelsearch.export.layout import ExportError, Source
from kernelsearch.store import queries as q
from kernelsearch.store.database import StoreError, open_store, session_scope
from kernelsearch.store.models import Run

_EVAL_COLUMNS = ("id", "status", "reason", "stage", "time_ms", "ref_time_ms", "compile_ref_time_ms", "speedup",
                 "speedup_compile", "roofline_fraction", "bottleneck", "timing_kind", "device")


def parse_kernel_id(text: str) -> int:
    """A kernel id as given on the command line, 12 or k12."""
    t = text.strip()
    t = t[1:] if t[:1] in ("k", "K") else t
    if not t.isdigit():
        raise ExportError(f"not a kernel id: {text!r} (expected a number such as 12 or k12)")
    return int(t)


def read_source(session, db: Path, kernel: Optional[str], run_name: Optional[str], force: bool) -> Source:
    """The kernel to export (the best of `run_name` when no id is given), with its run and evaluation; refuses
    an unknown kernel or run, a kernel of another run, and one that did not pass its evaluation unless forced."""
    run = None
    if run_name is not None:
        run = q.get_run(session, run_name)
        if run is None:
            raise ExportError(f"no run named {run_name!r} in {db}")
    if kernel is None:
        if run is None:
            raise ExportError("give a kernel id, or --run RUN to export that run's best kernel")
        best = q.best_kernels(session, run.id, 1)
        if not best:
            raise ExportError(f"run {run.name!r} has no correct kernel with a speedup to export")
        kid = best[0].id
    else:
        kid = parse_kernel_id(kernel)
    k = q.get_kernel(session, kid)
    if k is None:
        raise ExportError(f"no kernel {kid} in {db}")
    if run is not None and k.run_id != run.id:
        raise ExportError(f"kernel {kid} is not of run {run.name!r}")
    run = run or session.get(Run, k.run_id)
    if not isinstance(k.code, str) or not k.code.strip():
        raise ExportError(f"kernel {kid}'s stored code is damaged (not text, or empty)")
    ev = q.get_evaluation(session, kid)
    evaluation = {c: getattr(ev, c) for c in _EVAL_COLUMNS} if ev is not None else None
    row = q.kernel_row(session, kid)
    if evaluation is not None and row is not None:
        evaluation.update(_clocked(row))
    try:
        detail = json.loads(ev.detail_json) if ev is not None else {}
    except (TypeError, ValueError):
        detail = {}
    ok = ev is not None and ev.status == "ok"
    if not ok and not force:
        what = "was never evaluated" if ev is None else \
            f"did not pass its evaluation (status {ev.status}{': ' + ev.reason if ev.reason else ''})"
        raise ExportError(f"kernel {kid} {what}; --force exports it anyway, and its README says so")
    return Source(db=str(db), run_name=run.name, problem=run.problem, kernel_id=kid, code=k.code,
                  language=k.language, evaluation=evaluation, detail=detail if isinstance(detail, dict) else {},
                  forced=not ok)


def _clocked(row: q.KernelRow) -> dict:
    """A kernel's times and speedups as the run's clock has them, with its evaluation's own measurement."""
    return {"time_ms": row.time_ms, "timings": row.timings, "ref_time_ms": row.ref_time_ms,
            "ref_timings": row.ref_timings, "compile_ref_time_ms": row.compile_ref_time_ms, "speedup": row.speedup,
            "speedup_compile": row.speedup_compile, "eval_time_ms": row.eval_time_ms,
            "eval_ref_time_ms": row.eval_ref_time_ms, "eval_speedup": row.eval_speedup}


def with_store(db: Path, readonly: bool, work):
    """`work(session)` on the store, in one unit of work; a file that is not a store is an ExportError."""
    try:
        engine = open_store(db, readonly=readonly)
    except StoreError as err:
        raise ExportError(str(err)) from None
    try:
        with session_scope(engine) as s:
            return work(s)
    finally:
        engine.dispose()
