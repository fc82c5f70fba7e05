"""A group: several kernels of one problem in one evaluation, timed side by side in one timing stage.

Two kinds. A **re-timing group**: the finalists of a round (search/finalists.py), judged correct before, timed again.
A **first-evaluation group**: kernels queued for their first evaluation (sandbox/pool.py groups them when more wait
than slots are free), each checked in full, one after another, with its own verdict, and those that passed every
check timed together. Either way the timing is one `timing` lease, one exclusive loop, every batch the same fresh
inputs on every side, the sides' batches interleaved (candidate A, candidate B, ..., the eager reference; reversed
the next batch), every candidate's outputs checked against the same reference batch, and each candidate charged
exactly as one timed alone is (judge/clock.py). A drift of the device's speed during the stage then moves every
candidate's reading alike, the reference's figure is one for all of them, and the stage's fixed costs (its prep,
drain and the reference's batches) are paid once for the group.

Each candidate has a runner (and, where the pool isolates candidates, a user) of its own. On a GPU every side's
batch waits for a quiet device, so one candidate's work left running cannot slow another's batch. In a
first-evaluation group each candidate's runner has a deadline of its own (the evaluation's timeout, from the start
of its checks), so a candidate that hangs is `timeout` alone; one that fails a check is killed at once, before the
next candidate's checks start. A group's timing is all or nothing: where it fails (or, in a re-timing group, any
candidate's check does), every candidate it would have timed is `harness_error` naming the group, and the pool
evaluates each of them alone (sandbox/pool.py), so no candidate is ever charged with another's failure.
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Callable, ContextManager

from kernelsearch.judge.client import RunnerClient
from kernelsearch.judge.clock import time_sides
from kernelsearch.judge.harness import Judge
from kernelsearch.judge.memory import is_out_of_memory
from kernelsearch.judge.problem import Problem
from kernelsearch.judge.reading import apply_timing, fail
from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.seeds import derive_seed
from kernelsearch.judge.settings import GROUP_MAX, EvalSettings
from kernelsearch.judge.status import CandidateFailure, HarnessFailure, Status


def evaluate_group(problem: Problem, sources: list[str], settings: EvalSettings, *, mode: str = "cpu",
                   seed: int | None = None, spawn: Callable[[str], RunnerClient],
                   candidate_paths: list[str], lease: Callable[[str], ContextManager] = contextlib.nullcontext,
                   device_name: str | None = None, candidate_users: list[dict | None] | None = None
                   ) -> list[EvalResult]:
    """One result per source, in order. A re-timing group (`settings.retime`): all `ok` with their times, or all
    `harness_error` (re-time them alone). A first-evaluation group: each its own verdict from its checks; those that
    passed all `ok` with their times from one stage, or all `harness_error` (evaluate them alone)."""
    if not 1 <= len(sources) <= GROUP_MAX or len(candidate_paths) != len(sources):
        raise ValueError(f"a group has 1 to {GROUP_MAX} candidates, each with its file: "
                         f"{len(sources)} sources, {len(candidate_paths)} files")
    if seed is None:
        seed = int.from_bytes(os.urandom(6), "little")
    users = candidate_users or [None] * len(sources)
    first = not settings.retime
    deadlines: list[float | None] = [None] * len(sources)
    runners: list[RunnerClient | None] = [None] * len(sources)   # the candidate's runner each judge started

    def spawn_for(i: int) -> Callable[[str], RunnerClient]:
        def spawn_i(role: str) -> RunnerClient:
            runner = spawn(role)
            if role == "candidate":
                runners[i] = runner
                if first:
                    runner.deadline = deadlines[i]   # its own: a hang ends it alone
            return runner
        return spawn_i

    judges = [Judge(problem, src, settings, mode=mode, seed=derive_seed(seed, "group", i), spawn=spawn_for(i),
                    lease=lease, candidate_path=path, candidate_user=user)
              for i, (src, path, user) in enumerate(zip(sources, candidate_paths, users))]
    results: list[EvalResult | None] = [None] * len(judges)
    kind = "re-timing group" if settings.retime else "timing group"
    stage = "compile"
    try:
        for i, judge in enumerate(judges):
            if first:
                deadlines[i] = time.monotonic() + settings.timeout_s
                results[i] = _checked(judge, device_name, mode)
                if results[i] is not None:   # nothing of it runs beside the next one's checks or the group's timing;
                    # a candidate stopped before it started its runner (a static check) leaves the one started for
                    # it, which goes too, so the next candidate gets its own (the pool's runners come in order)
                    runner = runners[i] or spawn("candidate")
                    runner.kill()
                    runner.close()
                continue
            stage = f"candidate {i + 1}'s compile"
            judge.compile()
            stage = f"candidate {i + 1}'s check of the timed case"
            judge.correctness()
        timed_judges = [j for j, r in zip(judges, results) if r is None]
        if not timed_judges:
            return results
        for judge in timed_judges:   # the timing stage's length is the group's: the pool's timeout bounds it
            judge.cand.deadline = None
            if first:
                judge.cand.thaw()

        def tolerance(case):   # the loosest of the group's: each passed its own check of this case already
            return tuple(max(t) for t in zip(*(j.timed_tolerance(case) for j in timed_judges)))
        lead = timed_judges[0]
        stage = "the group's timing"
        t0 = time.perf_counter()
        timed = time_sides(lead.talk, secret=lead.secret, tolerance=tolerance, lease=lead.lease,
                           detail=lead.detail, others=tuple(j.cand for j in timed_judges[1:]))
        readings = iter((timed, *timed.group))
        done = []
        for i, judge in enumerate(judges):
            if results[i] is not None:
                continue
            stage = f"candidate {i + 1}'s roofline check"
            result = judge.new_result(device_name)
            result.stage = "timing"
            judge.detail["retime_group" if settings.retime else "timing_group"] = len(timed_judges)
            judge.detail.setdefault("stage_s", {})["timing"] = round(time.perf_counter() - t0, 3)
            apply_timing(result, judge, next(readings), problem, mode)
            done.append((i, judge.record(result)))
        for i, result in done:
            results[i] = result
        return results
    except (CandidateFailure, HarnessFailure, MemoryError, RuntimeError) as err:
        if isinstance(err, (MemoryError, RuntimeError)) and not is_out_of_memory(err):
            raise
        why = getattr(err, "reason", None) or f"{type(err).__name__}: {err}"
        again = "re-timed" if settings.retime else "evaluated"
        reason = f"{kind} of {len(judges)}: {stage} failed ({str(why)[:300]}); each is {again} alone"
        return [r if r is not None else EvalResult.failure(Status.harness_error, reason, stage="timing")
                for r in results]
    finally:
        for judge in judges:
            judge.close()


def _checked(judge: Judge, device_name: str | None, mode: str) -> EvalResult | None:
    """A first-evaluation group's candidate through every check a lone evaluation makes (judge/harness.py
    `evaluate`): None where it passed them (it is timed with the group), else its verdict."""
    stage = "compile"
    stage_s = judge.detail.setdefault("stage_s", {})
    t0 = time.perf_counter()
    try:
        for stage, step in (("compile", judge.compile), ("correctness", judge.correctness),
                            ("compile_sm90", judge.aot if mode == "cpu" and judge.s.aot_compile else None)):
            if step is not None:
                step()
                stage_s[stage] = round(time.perf_counter() - t0, 3)
                t0 = time.perf_counter()
        stage = "correctness"
        judge.cand.freeze()   # nothing of it runs while the next candidates are checked (thawed for the timing)
        return None
    except (CandidateFailure, MemoryError, RuntimeError) as err:
        result = judge.new_result(device_name)
        fail(result, judge, err, stage)
        return judge.record(result)
