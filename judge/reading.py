"""A stage's outcome onto an evaluation's result: the clock's reading (with the roofline's checks of it on a GPU),
or the failure that stopped the stages. Shared by a lone evaluation (judge/harness.py) and a group (judge/group.py);
`judge` is the evaluation's harness.Judge (its `detail` and memory plan `mem`), not imported here: harness imports this.
"""
from __future__ import annotations

import traceback

from kernelsearch.judge.clock import TimingResult
from kernelsearch.judge.memory import is_out_of_memory
from kernelsearch.judge.problem import Problem
from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.roofline import ceilings, io_floor_ms, roofline
from kernelsearch.judge.status import CandidateFailure, Status

FLOOR_SLACK = 0.95             # a time below 95 % of the I/O floor is impossible
TIMED_FIELDS = ("time_ms", "ref_time_ms", "speedup", "compile_ref_time_ms", "speedup_compile", "gbps", "tflops",
                "roofline_fraction", "bottleneck")


def apply_timing(result: EvalResult, judge, timed: TimingResult, problem: Problem, mode: str) -> None:
    """The clock's reading onto the result, and on a GPU the roofline's checks of it (CandidateFailure)."""
    case, in_bytes, out_bytes = timed.case, timed.in_bytes, timed.out_bytes
    judge.detail.update(timings=timed.timings, timing_case=timed.case.describe())
    result.time_ms, result.ref_time_ms, result.speedup = timed.time_ms, timed.ref_time_ms, timed.speedup
    result.compile_ref_time_ms, result.speedup_compile = timed.compile_ref_time_ms, timed.speedup_compile
    if mode == "cuda":
        ceil = timed.ceilings or ceilings("cuda")
        judge.detail["ceilings"] = ceil
        floor = io_floor_ms(in_bytes, out_bytes, ceil)
        judge.detail["io_floor_ms"] = floor
        if floor is not None and result.time_ms < FLOOR_SLACK * floor:
            raise CandidateFailure(Status.rejected, f"floor check: {result.time_ms:.4g} ms per call is below the "
                                   f"{floor:.4g} ms its inputs and outputs ({(in_bytes + out_bytes) / 1e6:.1f} MB) "
                                   "take to move once at the measured copy bandwidth", stage="roofline")
        flops = problem.flops(case) if problem.flops else None
        nbytes = problem.bytes_moved(case) if problem.bytes_moved else None
        r = roofline(flops, nbytes, result.time_ms, case.dtype, ceil)
        result.gbps, result.tflops = r.get("gbps"), r.get("tflops")
        frac = r.get("roofline_fraction")
        result.roofline_fraction, result.bottleneck = frac, r.get("bottleneck")
        if frac is not None and frac > 1.05:
            raise CandidateFailure(Status.rejected, f"impossible speed: {frac:.2f}x the roofline of the measured "
                                   "ceilings (faster than the bytes or FLOPs allow)", stage="roofline")


def fail(result: EvalResult, judge, err: Exception, stage: str) -> None:
    """The failure that stopped the stages onto the result: a CandidateFailure as it is; the judge's own running out
    of memory as its memory plan names it (harness_error); any other error is not a verdict and is raised again."""
    if not isinstance(err, CandidateFailure):
        if not (isinstance(err, (MemoryError, RuntimeError)) and is_out_of_memory(err)):
            raise err
        text = traceback.format_exc(limit=-6)
        err = judge.mem.failure(err, stage)
        err.text = text
    result.status, result.reason, result.error_text = err.status, err.reason, err.text
    result.stage = err.stage or stage
    for k in TIMED_FIELDS:
        setattr(result, k, None)
