"""A re-timing group: several kernels judged correct before, timed again side by side in one evaluation.

The finalists of a round (search/finalists.py) are re-timed in one timing stage: one `timing` lease, one exclusive
loop, every batch the same fresh inputs on every side, the sides' batches interleaved (candidate A, candidate B, ...,
the eager reference; reversed the next batch), every candidate's outputs checked against the same reference batch,
and each candidate charged exactly as one timed alone is (judge/clock.py). A drift of the device's speed during the
stage then moves every finalist's reading alike, and the reference's figure is one for all of them.

Each candidate has a runner (and, where the pool isolates candidates, a user) of its own, loads and is checked on
the timed case as a solo re-timing is (`Judge.compile`, `Judge.correctness` in re-timing mode). On a GPU every
side's batch waits for a quiet device, so one candidate's work left running cannot slow another's batch.
A group's reading is all or nothing: where any stage fails for any candidate (or the judge fails), every result is
`harness_error` naming the group, and the pool re-times each of them alone (sandbox/pool.py `retime_group`), so no
candidate is ever charged with another's failure.
"""
from __future__ import annotations

import contextlib
import os
from typing import Callable, ContextManager

from kernelsearch.judge.client import RunnerClient
from kernelsearch.judge.clock import time_sides
from kernelsearch.judge.harness import Judge, apply_timing
from kernelsearch.judge.memory import is_out_of_memory
from kernelsearch.judge.problem import Problem
from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.seeds import derive_seed
from kernelsearch.judge.settings import GROUP_MAX, EvalSettings
from kernelsearch.judge.status import CandidateFailure, HarnessFailure, Status


def evaluate_group(problem: Problem, sources: list[str], settings: EvalSettings, *, mode: str = "cpu",
                   seed: int | None = None, spawn: Callable[[str], RunnerClient],
                   candidate_paths: list[str], lease: Callable[[str], ContextManager] = contextlib.nullcontext,
                   device_name: str | None = None, candidate_users: list[dict | None] | None = None
                   ) -> list[EvalResult]:
    """One result per source, in order: all `ok` with their times, or all `harness_error` (the group's reading
    failed: re-time them alone). `settings.retime` must be set: these kernels passed every check before."""
    if not settings.retime:
        raise ValueError("a re-timing group times kernels judged correct before: settings.retime must be set")
    if not 1 <= len(sources) <= GROUP_MAX or len(candidate_paths) != len(sources):
        raise ValueError(f"a re-timing group has 1 to {GROUP_MAX} candidates, each with its file: "
                         f"{len(sources)} sources, {len(candidate_paths)} files")
    if seed is None:
        seed = int.from_bytes(os.urandom(6), "little")
    users = candidate_users or [None] * len(sources)
    judges = [Judge(problem, src, settings, mode=mode, seed=derive_seed(seed, "group", i), spawn=spawn, lease=lease,
                    candidate_path=path, candidate_user=user)
              for i, (src, path, user) in enumerate(zip(sources, candidate_paths, users))]
    lead = judges[0]
    stage = "compile"
    try:
        for i, judge in enumerate(judges):
            stage = f"candidate {i + 1}'s compile"
            judge.compile()
            stage = f"candidate {i + 1}'s check of the timed case"
            judge.correctness()

        def tolerance(case):   # the loosest of the group's: each passed its own check of this case already
            return tuple(max(t) for t in zip(*(j.timed_tolerance(case) for j in judges)))
        stage = "the group's timing"
        timed = time_sides(lead.talk, secret=lead.secret, tolerance=tolerance, lease=lead.lease,
                           detail=lead.detail, others=tuple(j.cand for j in judges[1:]))
        results = []
        for i, (judge, reading) in enumerate(zip(judges, (timed, *timed.group))):
            stage = f"candidate {i + 1}'s roofline check"
            result = judge.new_result(device_name)
            result.stage = "timing"
            judge.detail["retime_group"] = len(judges)   # timed side by side with the others
            apply_timing(result, judge, reading, problem, mode)
            results.append(judge.record(result))
        return results
    except (CandidateFailure, HarnessFailure, MemoryError, RuntimeError) as err:
        if isinstance(err, (MemoryError, RuntimeError)) and not is_out_of_memory(err):
            raise
        why = getattr(err, "reason", None) or f"{type(err).__name__}: {err}"
        reason = f"re-timing group of {len(judges)}: {stage} failed ({str(why)[:300]}); each is re-timed alone"
        return [EvalResult.failure(Status.harness_error, reason, stage="timing") for _ in judges]
    finally:
        for judge in judges:
            judge.close()
