"""The judge: the evaluation stages, cheapest first: static -> compile -> correctness -> timing -> roofline.

The judge never imports candidate code. It reads the candidate's source as text (static checks), draws every
seed, builds the inputs, runs the reference, holds the expected outputs, compares, keeps the clock and decides the
status. The candidate runs in a runner process (judge/runner.py) that receives inputs and returns outputs;
on a GPU the judge reads those outputs (and writes the inputs) in place in the runner's memory through CUDA IPC,
with the runner frozen (SIGSTOP) while it reads. The reference is timed in a second runner that never loaded the
candidate, by the same clock: the judge's wall clock around batches of calls (see `Judge.timing`).

`evaluate` returns an `EvalResult`; a failing stage stops the rest and its status is the result. The stages share
one object's state (runners, seed, memory plans, detail); the talk with the runners, the clock, the numerics and the
memory plan are modules of their own (conversation.py, clock.py, numerics.py, memory.py): the clock is handed the
judge's `Conversation` and returns a `TimingResult`, whose fields `evaluate` copies onto the result.
"""
from __future__ import annotations

import contextlib
import gc
import os
import time
from typing import Callable, ContextManager

import torch

from kernelsearch.judge.client import RunnerClient, spawn_local
from kernelsearch.judge.clock import TimingResult, time_sides
from kernelsearch.judge.conversation import Conversation
from kernelsearch.judge.correctness import compare, unchanged
from kernelsearch.judge.memory import JudgeMemory, prime
from kernelsearch.judge.numerics import (
    EAGER_SLACK_CHECK,
    NATIVE,
    _no_worse_than_eager,
    _overflows,
    abs_reference,
    eager_error,
    pin_precision,
    reduction_terms,
    references,
    stability_inputs,
    within_eager,
)
from kernelsearch.judge.offrange import OffRangeChecks
from kernelsearch.judge.problem import Case, Problem
from kernelsearch.judge.reading import apply_timing, fail
from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.roofline import io_floor_ms  # noqa: F401 - read from here too
from kernelsearch.judge.scan import scan_source
from kernelsearch.judge.seeds import derive_seed
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.static import check_source
from kernelsearch.judge.status import CandidateFailure, Status
from kernelsearch.judge.waits import counted

STABILITY_SHARED_BYTES = 1 << 30   # a case's inputs up to this size are checked for stability beside other checks
# Consecutive correctness trials share one shared hold while their cases' bytes together stay under this (a family's
# byte count of a case, judge/problem.py bytes_moved; a case of unknown size holds alone). A shared hold waits while
# any evaluation's timing stage runs (sandbox/admission.py: its drain), so each hold taken is a wait: a trial a hold,
# a family's 8-9 cases x 2 trials were 16-18 of them an evaluation. "0": a hold a trial, as before 2026-12-07.
HOLD_BYTES = int(float(os.environ.get("KS_CLOCK_HOLD_MB", "64")) * 2**20)


class Judge(OffRangeChecks):
    def __init__(self, problem: Problem, source: str, settings: EvalSettings, *, mode: str, seed: int,
                 spawn: Callable[[str], RunnerClient],
                 lease: Callable[[str], ContextManager] = contextlib.nullcontext, candidate_path: str | None = None,
                 candidate_user: dict | None = None):
        self.problem, self.source, self.s = problem, source, settings
        self.mode, self.secret = mode, seed
        self.device = "cuda" if mode == "cuda" else "cpu"
        self.lease = counted(lease, self)   # each kind's waits and longest hold in detail (judge/waits.py)
        self.candidate_path = candidate_path
        self.candidate_user = candidate_user   # {"uid", "home"} of the candidate's runner, where it has its own user
        self._case_bytes: dict[str, int] = {}   # a case's input bytes, as drawn by the correctness stage
        self._eager_abs: dict[str, float] = {}   # a case's eager max abs error from the high-precision reference
        self._eager_decided: set[str] = set()     # cases where eager's own error decided correctness
        self.detail: dict = {"cases": []}
        self.launched: set[str] = set()   # the candidate's Triton kernels its runner launched (correctness)
        self.mem = JudgeMemory(self.detail, self.device, settings.judge_memory_mb)   # each case's memory plan
        self.talk = Conversation(problem, settings, mode=mode, spawn=spawn, mem=self.mem)   # with its runners
        self.peak_mb: float | None = None
        self.language: str | None = None

    @property
    def cand(self) -> RunnerClient | None:
        """The candidate's runner, once the compile stage started it."""
        return self.talk.cand

    # -- stages ---------------------------------------------------------------------------------------------
    def compile(self) -> None:
        self.language = check_source(self.source)
        self.detail["language"] = self.language
        self.detail.update(scan_source(self.source, self.language, allow=self.s.allow_torch))
        if self.language == "cuda" and self.mode != "cuda":   # no GPU: compiled for sm_90a, then `unverified`
            from kernelsearch.judge.cuda_check import judge_without_gpu

            judge_without_gpu(self.source, self.detail, compile=self.s.aot_compile)
        ext_cache = None
        if self.language == "cuda" and self.mode == "cuda":   # its extensions built once per content (cuda_build.py)
            from kernelsearch.judge.cuda_build import build_ahead

            uid = (self.candidate_user or {}).get("uid")
            ext_cache = build_ahead(self.source, self.detail, shared=uid is not None and uid != os.getuid())
        pin_precision()
        self.talk.cand = self.talk.runner("candidate")
        self.cand.watch_strays = True   # its processes outside its group are looked for at every freeze
        self.cand.uid = (self.candidate_user or {}).get("uid")
        reply, _ = self.talk.ask(self.cand, {"op": "load", "role": "candidate", "path": self.candidate_path,
                                         "language": self.language, "ext_cache": ext_cache},
                                 "loading the candidate", "compile")
        self.talk.advisories(reply, "after loading", "compile")

    def _call(self, slot: int, inputs: list, views: list | None, what: str, stage: str = "correctness"):
        reply, bufs = self.talk.ask(self.cand, {"op": "call", "slot": slot}, what, stage)
        self.talk.advisories(reply, what, stage)
        if self.language in ("triton", "cuda") and reply.get("launches") == 0:
            own = "Triton kernels" if self.language == "triton" else "CUDA extensions' functions"
            raise CandidateFailure(Status.rejected, f"kernel-launch check: {what} launched none of the candidate's "
                                   f"own {own} (the work was done some other way)", stage=stage)
        if isinstance(reply.get("kernels"), list):   # the sm_90 check compiles at least these (aot)
            self.launched.update(str(k) for k in reply["kernels"][:256])
        if reply.get("alias"):
            raise CandidateFailure(Status.rejected, f"aliasing check: output {reply['alias'][0]} of {what} shares "
                                   "storage with an input (a view of the input, not a result of its own)",
                                   stage=stage)
        if reply.get("untouched") or reply.get("unwritten"):
            raise CandidateFailure(Status.rejected, f"kernel-launch check: {what}'s output "
                                   + ("was never an argument of the candidate's own kernels nor made from one"
                                      if reply.get("untouched") else "held its final value before the first of the "
                                      "candidate's kernels that took it ran, and that kernel did not write it")
                                   + " (the work was done some other way)", stage=stage)
        if reply.get("not_plain"):
            raise CandidateFailure(Status.incorrect, f"{what} returned {str(reply['not_plain'][0])[:60]}, expected a "
                                   "plain torch.Tensor", stage=stage)
        if isinstance(reply.get("peak_mb"), (int, float)):
            self.peak_mb = max(self.peak_mb or 0.0, float(reply["peak_mb"]))
        self.cand.freeze()   # nothing runs in the candidate's process while the judge reads its memory
        try:
            got = self.talk.decode(self.cand, reply.get("out"), bufs, what, stage, self.mem.out_limit())
            after = views if views is not None else self.talk.decode(self.cand, reply.get("inputs"), bufs, what, stage)
            if after is not None and not unchanged(inputs, list(after)):
                raise CandidateFailure(Status.rejected, f"input check: {what}: the candidate modified its inputs in "
                                       "place", stage=stage)
        finally:
            self.cand.thaw()
        return got

    def correctness(self) -> None:
        # the meta device's first import, before the first lease (a no-op where the fork server primed); here, not at
        # the start, so a candidate the scan or its load rejects never pays it (1 s on the CPU)
        t0 = time.perf_counter()
        prime()
        self._add_s("prime", t0)
        cases = self.problem.cases_for(self.mode)
        if self.s.retime:   # judged correct before: the timed case once, its kernels compiled for the clock
            cases = [self.problem.timed_case if self.mode == "cuda" else self.problem.cpu_timed_case()]
        if self.mode == "cuda":   # the timed outputs' check kernel, compiled beside the warm-up (judge/agree.py)
            from kernelsearch.judge.agree import warm_behind
            warm_behind()
        if self.mode == "cuda" and self.language == "triton":
            self._warm(cases)
        self._check_cases(cases)
        if self.s.retime:
            return
        if not self.problem.builtin:   # a family draws signed inputs of its own; a problem file draws torch.rand
            with self.lease("shared"):
                self._signed_check(cases[0])
            with self.lease("shared"):
                self._range_checks(cases[0])   # a family's stability inputs (large, tiny, mixed, equal) do this
        with self.lease("shared"):
            self._repeat_check(cases[-1])
        self._free_cached_memory()
        case = self.mem.stability_case(cases, self.problem.stability)
        if case is None:
            return
        t0 = time.perf_counter()
        with self.lease(self._stability_lease(case)):
            self._stability(case)
        self._add_s("stability", t0)

    def _stability_lease(self, case: Case) -> str:
        """The stability checks' float64 references take several times a case's bytes: alone on the device when the
        case is large (STABILITY_SHARED_BYTES), beside other evaluations' checks otherwise (an exclusive hold is
        time no other evaluation's check or timing runs: 1.7 s an evaluation of the H200's 2.7 at concurrency 6)."""
        if self.device != "cuda":
            return "shared"
        size = self._case_bytes.get(case.name)
        return "shared" if size is not None and size <= STABILITY_SHARED_BYTES else "exclusive"

    def _warm(self, cases: list[Case]) -> None:
        """The candidate's Triton kernels compiled for every case's shapes outside any lease (runner `warm`:
        compiled, not launched). Compiled inside the correctness calls, under a shared lease, the compiles (seconds)
        held up every timing waiting for the device and, behind it, every other evaluation's checks. The candidate's
        Triton kernels are not launched here; its host code runs, as it did when it was loaded (the torch operations
        its forward makes, an output's allocation or fill, run on the device outside a lease: anticheat.md's gaps).
        Best effort: the reply is advisory and only its time is kept. The models and inputs it needs are the
        judge's own GPU work (weights moved, inputs drawn and written): under a shared lease, milliseconds, never
        beside another evaluation's timing loop."""
        t0 = time.perf_counter()
        notes, counts = [], {"kernels": 0, "failed": 0, "wait_s": 0.0}
        # small cases' models and inputs made in one hold (case i's in slot i, its model kept for that slot), then
        # their compiles outside it: a hold a case was 8-9 holds, each a wait behind any timing stage running
        for group in self._grouped(list(enumerate(cases)), lambda u: self._case_size(u[1])):
            with self.lease("shared", "_warm"):
                for i, case in group:
                    seed = derive_seed(self.secret, case.name, "warm")
                    self.mem.doing = f"the warm-up's model and inputs of {case.describe()}"
                    self.talk.build(case, seed, "correctness", [(self.cand, "eager")], warm_slot=i)
                    self.talk.put(self.cand, i, self.problem.build_inputs(case, seed, self.device), "correctness")
            for i, case in group:
                reply, _ = self.talk.ask(self.cand, {"op": "warm", "slot": i, "last": i == len(cases) - 1},
                                         "compiling its kernels", "correctness")
                # advisory figures of the runner's warm-up compiles (the last case's reply has them)
                counts.update({k: v for k in counts if type(v := reply.get(k)) in (int, float)})
                if not reply.get("warm"):
                    notes.append(f"{case.name}: {str(reply.get('why'))[:80]}")
                    break   # an autotuned kernel or a forward that needs its outputs: the calls compile the rest
            if notes:
                break
        self.detail["warm"] = {"s": round(time.perf_counter() - t0, 3), "stopped": notes or None, **counts}
        self._add_s("warm", t0)

    def _check_cases(self, cases: list[Case]) -> None:
        """Every case's trials, small ones together under one shared hold (`_grouped`), a large case a hold a trial:
        a timing waiting for the device waits for one trial of a large case, or for a few small cases."""
        units = [(case, trial) for case in cases for trial in range(self.s.trials)]
        for group in self._grouped(units, lambda u: self._case_size(u[0])):
            with self.lease("shared", "_check_cases"):
                for case, trial in group:
                    self._check_trial(case, trial, *self.problem.tolerance(case))

    def _case_size(self, case: Case) -> int | None:
        """A case's bytes moved, as its family counts them (None where it cannot say: a problem file's)."""
        return None if self.problem.bytes_moved is None else int(self.problem.bytes_moved(case))

    @staticmethod
    def _grouped(items: list, size_of: Callable[[object], int | None]) -> list[list]:
        """`items` in order, cut into the groups that share one shared hold: consecutive items while their sizes
        together stay within HOLD_BYTES; one whose size is unknown or over it is a group of its own."""
        groups: list[list] = []
        total = None   # the last group's bytes, or None where it takes no more
        for item in items:
            size = size_of(item)
            fits = size is not None and size <= HOLD_BYTES
            if fits and total is not None and total + size <= HOLD_BYTES:
                groups[-1].append(item)
                total += size
            else:
                groups.append([item])
                total = size if fits else None
        return groups

    def _check_trial(self, case: Case, trial: int, atol: float, rtol: float) -> None:
        """One trial of a case: fresh inputs from the trial's seed, the candidate's call, the reference, the compare."""
        seed = derive_seed(self.secret, case.name, trial)
        t_build = time.perf_counter()   # in_build: the models, the inputs, their plan and delivery (a shared hold)
        ref = self.talk.build(case, seed, "correctness", [(self.cand, "eager")])
        self.mem.doing = f"building the inputs of {case.describe()}"
        inputs = self.problem.build_inputs(case, seed, self.device)
        plan = self.mem.plan(self.problem, case, ref, inputs)
        views = self.talk.put(self.cand, 0, inputs, "correctness")
        self._add_s("build", t_build)
        # the candidate runs before any reference output exists, in a process that cannot see them anyway
        t_call = time.perf_counter()
        got = self._call(0, inputs, views, "ModelNew.forward")
        self._add_s("candidate_calls", t_call)
        t_ref = time.perf_counter()
        self.mem.doing = f"computing the {plan.reference} reference of {case.describe()}"
        want, want_hi = references(ref, inputs, plan.hi or NATIVE)
        self._add_s("references", t_ref)
        self.mem.doing = f"comparing the outputs of {case.describe()} (chunks of {plan.chunk:,} elements)"
        t_cmp = time.perf_counter()
        cmp = self._judge_values(case, got, want, want_hi, atol, rtol, plan.chunk,
                                 sums=(ref, inputs, plan.hi or torch.float64))
        self._add_s("compare", t_cmp)
        self.detail["cases"].append({"case": case.describe(), "trial": trial, "ok": cmp.ok,
                                     "max_abs": cmp.max_abs, "max_rel": cmp.max_rel,
                                     **({"judged_by": "eager's own error"} if case.name in self._eager_decided
                                        else {})})
        if not cmp.ok:
            raise CandidateFailure(Status.incorrect, f"case {case.describe()} trial {trial}: {cmp.reason}"
                                   f"{self._precision_note(case)}", cmp.detail or None, stage="correctness")
        del got, want, want_hi

    def _judge_values(self, case: Case, got, want, want_hi, atol: float, rtol: float, chunk: int,
                      sums: tuple | None = None):
        """`compare`, and where its values fail a tolerance that eager misses as well, eager's own error decides
        (numerics.within_eager); eager's max abs error is kept for the timed-output check (`timed_tolerance`).
        `sums` (reference, inputs, high dtype): a failing output is also measured against the error an honest fp32
        sum of the problem's K terms makes (numerics.within_sum_bound: K from the shapes, the scale from the
        reference run on |inputs|), computed only on a failure."""
        cmp = compare(got, want, want_hi, atol, rtol, chunk)
        if want_hi is not want and case.name not in self._eager_abs:
            self._eager_abs[case.name] = eager_error(want, want_hi, chunk)
        if not cmp.ok:
            scale = terms = None
            if sums is not None and "values off by more than" in cmp.reason and case.dtype == "float32":
                ref, inputs, hi = sums
                scale, terms = abs_reference(ref, inputs, hi), reduction_terms(inputs, want)
            cmp, decided = within_eager(got, want, want_hi, atol, rtol, cmp, chunk, scale=scale, terms=terms)
            if decided is not None:
                self._eager_decided.add(case.name)
        return cmp

    def timed_tolerance(self, case: Case) -> tuple[float, float]:
        """The timed outputs' (atol, rtol). They are checked against eager's answer in float32 (clock.py), which is
        itself up to eager's max abs error E from the high-precision reference the correctness stage used: atol + E,
        or (EAGER_SLACK_CHECK + 1) x E where eager's own error decided correctness."""
        atol, rtol = self.problem.tolerance(case)
        e = self._eager_abs.get(case.name, 0.0)
        if case.name in self._eager_decided:
            return max(atol + e, (EAGER_SLACK_CHECK + 1.0) * e), rtol
        return atol + e, rtol

    def _repeat_check(self, case: Case) -> None:
        """Two calls on different inputs of the same shape, both before the reference runs; both must be right (a
        cache keyed on shape, data_ptr, version or a global returns the first answer twice)."""
        seed = derive_seed(self.secret, case.name, "repeat")
        ref = self.talk.build(case, seed, "correctness", [(self.cand, "eager")])
        self.mem.doing = f"building two input sets of {case.describe()} (the cache check)"
        sets = [self.problem.build_inputs(case, derive_seed(seed, i), self.device) for i in range(2)]
        plan = self.mem.plan(self.problem, case, ref, sets[0])
        self._case_bytes[case.name] = sum(t.numel() * t.element_size() for t in sets[0] if isinstance(t, torch.Tensor))
        outs = []
        for i, inputs in enumerate(sets):
            views = self.talk.put(self.cand, 0, inputs, "correctness")
            outs.append(self._call(0, inputs, views, f"ModelNew.forward (repeat call {i})"))
        atol, rtol = self.problem.tolerance(case)
        self.mem.doing = f"the references and comparisons of the cache check on {case.describe()}"
        for i, inputs in enumerate(sets):
            cmp = self._judge_values(case, outs[i], *references(ref, inputs, plan.hi or NATIVE), atol, rtol, plan.chunk)
            if not cmp.ok:
                raise CandidateFailure(Status.incorrect, f"cache check: call {i} of two on different inputs of shape "
                                       f"{case.describe()} is wrong ({cmp.reason}): results are reused across "
                                       "calls", cmp.detail or None, stage="correctness")

    def _stability(self, case: Case) -> None:
        for name in self.problem.stability:
            failure = self._stability_one(case, name)
            self._free_cached_memory()
            if failure is not None:
                raise failure

    def _stability_one(self, case: Case, name: str) -> CandidateFailure | None:
        atol, rtol = self.problem.stability_tolerance(case)
        seed = derive_seed(self.secret, case.name, "stability", name)
        ref = self.talk.build(case, seed, "correctness", [(self.cand, "eager")])
        self.mem.doing = f"building the {name} stability inputs of {case.describe()}"
        inputs = stability_inputs(name, self.problem.build_inputs(case, seed, self.device), case.dtype, seed)
        plan = self.mem.plan(self.problem, case, ref, inputs)
        views = self.talk.put(self.cand, 0, inputs, "correctness")
        got = self._call(0, inputs, views, f"ModelNew.forward ({name} inputs)")
        self.mem.doing = f"the float64 reference and comparison of the {name} stability inputs of {case.describe()}"
        want, want_hi = references(ref, inputs, torch.float64)
        if _overflows(want, want_hi):
            self.detail["cases"].append({"case": f"{case.describe()} {name}", "skipped": "out of range"})
            return None
        cmp = compare(got, want, want_hi, atol, rtol, plan.chunk)
        judged = "tolerance"
        if not cmp.ok and not compare(want, want, want_hi, atol, rtol, plan.chunk).ok:
            cmp = _no_worse_than_eager(got, want, want_hi, cmp)
            judged = "eager's own error"
        self.detail["cases"].append({"case": f"{case.describe()} {name}", "trial": 0, "ok": cmp.ok,
                                     "max_abs": cmp.max_abs, "max_rel": cmp.max_rel, "judged_by": judged})
        if cmp.ok:
            return None
        return CandidateFailure(Status.incorrect, f"stability check ({name} inputs) on {case.describe()}: "
                                f"{cmp.reason}", cmp.detail or None, stage="correctness")

    def aot(self) -> None:
        """No GPU here: the candidate's kernels compiled for the H200 (sm_90), in a child process of the candidate's
        own user (it runs candidate code: never in the judge). A compile error is the candidate's; a clean report
        is information, not a verdict."""
        from kernelsearch.judge.aot import aot_report

        # a family's timed case is sized for the compile (its specialisations are the GPU's); a problem file's own
        # size can be gigabytes of inputs on this CPU, so its largest interpreter-sized case stands in
        case = None if self.problem.builtin else self.problem.cpu_timed_case()
        report = aot_report(self.source, self.problem, case, as_user=self.candidate_user, isolate=True,
                            required=self.launched)
        report = {k: report.get(k) for k in ("status", "kernels", "error", "wall_s")}
        self.detail["sm90"] = report
        if report.get("status") == "strays":   # its orphans, re-parented to the judge and killed (judge/aot.py)
            raise CandidateFailure(Status.rejected, f"process check: {report.get('error')}", stage="compile_sm90")
        if report.get("status") == "died":     # no report is no pass: the child ran the candidate's code
            raise CandidateFailure(Status.crash, f"sm_90 compile: {str(report.get('error'))[:300]}",
                                   str(report.get("error"))[:6000], stage="compile_sm90")
        if report.get("status") == "compile_error":
            lines = [ln for ln in str(report.get("error", "")).strip().splitlines() if ln.strip()] or [""]
            first = lines[0].split(" at ")[0].rstrip(":")
            raise CandidateFailure(Status.compile_error, f"sm_90 compile failed: {first}: {lines[-1][:300]}",
                                   str(report.get("error"))[:6000], stage="compile_sm90")

    # -- timing ---------------------------------------------------------------------------------------------
    def timing(self) -> TimingResult:
        """The clock's reading of the candidate against the reference(s) (clock.py)."""
        return time_sides(self.talk, secret=self.secret, tolerance=self.timed_tolerance, lease=self.lease,
                          detail=self.detail)

    # -- helpers --------------------------------------------------------------------------------------------
    def _add_s(self, key: str, since: float) -> None:
        st = self.detail.setdefault("stage_s", {})
        st[f"in_{key}"] = round(st.get(f"in_{key}", 0.0) + time.perf_counter() - since, 3)

    def _free_cached_memory(self) -> None:
        if self.device == "cuda":
            gc.collect()
            torch.cuda.empty_cache()

    def _precision_note(self, case: Case) -> str:
        casts = self.detail.get("low_precision_casts")
        if case.dtype == "float32" and casts:
            return f" [precision check: fp32 problem, but the candidate casts to lower precision: {'; '.join(casts)}]"
        return ""

    def new_result(self, device_name: str | None) -> EvalResult:
        """An `ok` result of this judge's mode and device, for the stages to fill."""
        kind = "judge-wall-clock" if self.mode == "cuda" else "cpu-interpreter"
        return EvalResult(status=Status.ok, timing_kind=kind,
                          device=device_name or ("cpu-interpreter" if self.mode == "cpu" else "cuda"))

    def record(self, result: EvalResult) -> EvalResult:
        """What the judge learned onto the result: peak memory, the allowed torch ops its host code calls, detail."""
        result.peak_vram_mb = self.peak_mb
        if "torch_ops" in self.detail:
            result.torch_ops = ",".join(self.detail["torch_ops"])
            self.detail["allow_torch"] = list(self.s.allow_torch)
        result.detail = self.detail
        return result

    def close(self) -> None:
        self.talk.close()


def evaluate(problem: Problem, source: str, settings: EvalSettings, *, mode: str = "cpu", seed: int | None = None,
             spawn: Callable[[str], RunnerClient] | None = None, candidate_path: str | None = None,
             lease: Callable[[str], ContextManager] = contextlib.nullcontext, device_name: str | None = None,
             candidate_user: dict | None = None) -> EvalResult:
    """Run the stages as the judge; return the result (status always set).

    `spawn(role)` starts a runner and returns its client; by default a plain local subprocess
    (judge/runner.py `spawn_local`); the pool passes runners it started sandboxed."""
    if seed is None:
        seed = int.from_bytes(os.urandom(6), "little")
    tmp = None
    if candidate_path is None:   # the runner loads the candidate from a file (Triton reads kernel source back)
        import tempfile

        tmp = tempfile.mkdtemp(prefix="ks-judge-")
        candidate_path = os.path.join(tmp, "candidate.py")
        with open(candidate_path, "w") as f:
            f.write(source)
    judge = Judge(problem, source, settings, mode=mode, seed=seed, spawn=spawn or spawn_local, lease=lease,
                  candidate_path=candidate_path, candidate_user=candidate_user)
    result = judge.new_result(device_name)
    stage = "static"
    stage_s = judge.detail.setdefault("stage_s", {})
    t0 = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t0
        now = time.perf_counter()
        stage_s[name] = round(now - t0, 3)
        t0 = now
    try:
        stage = "compile"
        judge.compile()
        lap("compile")
        stage = "correctness"
        judge.correctness()
        lap("correctness")
        if mode == "cpu" and settings.aot_compile and not settings.retime:
            stage = "compile_sm90"
            judge.aot()
            lap("compile_sm90")
        stage = "timing"
        timed = judge.timing()
        lap("timing")
        apply_timing(result, judge, timed, problem, mode)
        result.status, result.stage, result.reason = Status.ok, "timing", None
    except (CandidateFailure, MemoryError, RuntimeError) as f:
        fail(result, judge, f, stage)
    finally:
        judge.close()
        if tmp:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return judge.record(result)
