"""The refusal before an evaluation: a kernel its family's search space can read back (a rendered point, header
and all) and knows cannot run on an H200 at some shape case of the problem is answered here, in the controller's
process, with a `compile_error` of stage `feasibility` and the reason, without a worker, a compile or a GPU.

The model is the space's (families/space.py `limits`: registers a thread holds, shared memory of tiles and
stages, a launcher's own refusal), calibrated against sm_90 compiles by bench/feasibility.py. Code the space
cannot read back (an LLM's own, or a rendered kernel edited since) is never refused here: its compile says.
"""
from __future__ import annotations

from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.status import Status

STAGE = "feasibility"


def refuse_infeasible(problem, code: str) -> EvalResult | None:
    """The result that stands for an evaluation of `code` the space knows would fail, or None (evaluate it)."""
    space = getattr(problem.family, "SPACE", None) if problem.family is not None else None
    if space is None:
        return None
    why = space.refusal(code, problem.cases)
    if why is None:
        return None
    reason = f"infeasible on an H200 (sm_90), not evaluated: {why}"
    return EvalResult.failure(Status.compile_error, reason, stage=STAGE, error_text=reason,
                              detail={"feasibility": why})
