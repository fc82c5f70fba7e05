"""The evaluation stages, cheapest first: static -> compile -> correctness -> timing -> roofline.

Runs inside a worker subprocess (sandbox/worker.py), never in the controller. `evaluate` returns a dict with
the columns of store.models.Evaluation; a failing stage stops the rest and its status is the result.
"""
from __future__ import annotations

import contextlib
import copy
import gc
import hashlib
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, ContextManager

import torch

from kernelsearch.evaluators import anticheat
from kernelsearch.evaluators.correctness import Comparison, compare, flatten
from kernelsearch.evaluators.problem import DTYPES, Case, Problem, load_source_module
from kernelsearch.evaluators.static import check_source
from kernelsearch.evaluators.status import CandidateFailure, Status
from kernelsearch.evaluators.timing import time_interleaved

F64_MAX_ELEMENTS = 1 << 26   # above this many input elements the high-precision reference is float32


@dataclass
class Settings:
    mode: str = "cpu"               # cpu (Triton interpreter) | cuda
    seed: int = 0                   # secret: drawn by the parent per evaluation
    trials: int = 2
    timing_iters: int = 50
    compare_compile: bool = False
    input_sets: int = 3             # rotated in timing so nothing can be cached across calls
    aot: bool = True                # CPU mode: also compile for sm_90 ahead of time (registers, spills)


def _seed(base: int, *parts) -> int:
    h = hashlib.sha256(repr((base, *parts)).encode()).digest()
    return int.from_bytes(h[:6], "little")


def _pin_precision() -> None:
    """TF32 is pinned off for reference and candidate alike."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def _precision_flags() -> tuple:
    return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision())


def _to_hi(values: list, dtype: torch.dtype) -> list:
    return [v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def _clone(values: list) -> list:
    return [v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in values]


def _same(a: list, b: list) -> bool:
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not torch.equal(x, y) and not (x.is_floating_point() and torch.equal(x.nan_to_num(), y.nan_to_num())):
                return False
    return True


def stability_inputs(name: str, values: list, dtype: str, seed: int) -> list:
    """Transform the floating inputs of a case: `large` (x 1e3; x 10 in fp16, whose range is small), `tiny`
    (x 1e-4), `mixed` (each element scaled by 10^U(-3, 3)), `equal` (every row the same value along the last
    dimension). Integer inputs (targets, indices) are left as they are."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            x = v.double()
            if name == "large":
                x = x * (10.0 if dtype == "float16" else 1e3)
            elif name == "tiny":
                x = x * 1e-4
            elif name == "mixed":
                gen = torch.Generator(device=x.device).manual_seed(seed)   # drawn where x is (fast on a GPU)
                x = x * torch.pow(10.0, torch.empty(x.shape, dtype=torch.float64, device=x.device)
                                  .uniform_(-3, 3, generator=gen))
            elif name == "equal" and x.dim() >= 1:
                x = x[..., :1].expand_as(x).contiguous()
            else:
                raise ValueError(f"unknown stability input {name!r}")
            v = x.to(v.dtype)
        out.append(v)
    return out


def references(ref, inputs: list, hi: torch.dtype | None = None) -> tuple:
    """The reference's answer at the problem's dtype (it fixes dtype, shape and device) and the same computed in
    `hi`: by default float64 (float32 above F64_MAX_ELEMENTS input elements), which values are measured against.
    Every check (correctness, cache, timed outputs) uses both: measured against the low-precision reference
    instead, a correct kernel that rounds once where eager rounds twice fails on a few values near zero (seen on
    an H200: rotary bf16 (4,32,4096,128), 8 of 67M values)."""
    with torch.no_grad():
        want = ref(*inputs)
        if hi is None:
            n_el = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
            hi = torch.float64 if n_el <= F64_MAX_ELEMENTS else torch.float32
        want_hi = copy.deepcopy(ref).to(hi)(*_to_hi(inputs, hi))
    return want, want_hi


EAGER_SLACK = 2.0   # on inputs the dtype cannot resolve, a candidate may be up to this many times eager's error


def normwise_error(got, want_hi) -> float:
    """max over outputs of ||got - ref||_2 / ||ref||_2, in float64; NaN/Inf anywhere is infinite error."""
    worst = 0.0
    for g, h in zip(flatten(got), flatten(want_hi)):
        if not isinstance(g, torch.Tensor) or not g.is_floating_point():
            continue
        g64, h64 = g.detach().double(), h.detach().to(device=g.device, dtype=torch.float64)
        if not bool(torch.isfinite(g64).all()):
            return float("inf")
        h64 = torch.nan_to_num(h64)
        worst = max(worst, float((g64 - h64).norm() / h64.norm().clamp_min(1e-300)))
    return worst


def _no_worse_than_eager(got, want, want_hi, failed: Comparison) -> Comparison:
    """Pass when the candidate's normwise error is within EAGER_SLACK times eager's own (dtype, shape and
    non-finite values were already checked by `compare` and are kept as failures)."""
    if "values off by more than" not in failed.reason:
        return failed   # shape, dtype, device, type or NaN/Inf: not a question of precision
    mine, eager = normwise_error(got, want_hi), normwise_error(want, want_hi)
    if mine <= EAGER_SLACK * eager + 1e-12:
        return Comparison(True, "", failed.max_abs, failed.max_rel, 0)
    failed.reason += (f"; normwise error {mine:.3g} against float64 is over {EAGER_SLACK:g}x eager's own "
                      f"({eager:.3g}) on inputs this dtype cannot resolve")
    return failed


def _overflows(want, want_hi) -> bool:
    """The reference at the problem's dtype is non-finite where the float64 one is finite."""
    for w, h in zip(flatten(want), flatten(want_hi)):
        if isinstance(w, torch.Tensor) and w.is_floating_point():
            if bool((~torch.isfinite(w) & torch.isfinite(h.to(w.device))).any()):
                return True
    return False


class Evaluator:
    def __init__(self, problem: Problem, source: str, settings: Settings,
                 lease: Callable[[str], ContextManager] = contextlib.nullcontext):
        self.problem = problem
        # lease("shared") while checking a case; lease("exclusive") while timing and, on a GPU, while the stability
        # check computes its float64 references
        self.lease = lease
        self.source = source
        self.s = settings
        self.device = "cuda" if settings.mode == "cuda" else "cpu"
        self.detail: dict = {"cases": []}
        self.module = None
        self.module_name = ""
        self.launches = anticheat.LaunchCounter()
        self.guard: anticheat.Guard | None = None
        self.ceilings: dict | None = None

    # -- models ---------------------------------------------------------------------------------------------
    def _models(self, case: Case, seed: int):
        init = self.problem.build_init_inputs(case)
        torch.manual_seed(seed)
        ref = self.problem.module.Model(*init)
        torch.manual_seed(seed)
        try:
            cand = self.module.ModelNew(*copy.deepcopy(init))
        except Exception as err:  # noqa: BLE001
            raise CandidateFailure(Status.crash, f"ModelNew(...) raised {type(err).__name__}: {err}",
                                   traceback.format_exc(limit=-4), stage="compile") from None
        if isinstance(cand, torch.nn.Module) and isinstance(ref, torch.nn.Module):
            # identical weights for both: copy the reference's state where the names match
            ref_state = ref.state_dict()
            if ref_state:
                cand.load_state_dict(ref_state, strict=False)
        ref = ref.to(self.device)
        cand = cand.to(self.device) if isinstance(cand, torch.nn.Module) else cand
        if self.problem.family is not None and case.dtype in DTYPES:
            dt = DTYPES[case.dtype]
            ref = ref.to(dt)
            if isinstance(cand, torch.nn.Module):
                cand = cand.to(dt)
        return ref, cand

    def _add_s(self, key: str, since: float) -> None:
        """Seconds inside a stage, summed under detail.stage_s.in_<key> (for the harness bench's breakdown)."""
        st = self.detail.setdefault("stage_s", {})
        st[f"in_{key}"] = round(st.get(f"in_{key}", 0.0) + time.perf_counter() - since, 3)

    def _poison_allocator(self, nbytes: int) -> None:
        """Fill memory the candidate will be handed by the caching allocator with NaN (stale answers fail)."""
        if self.device == "cuda" and nbytes > 0:
            junk = torch.full((nbytes // 4 + 1024,), float("nan"), device=self.device)
            del junk

    def _call(self, model, inputs: list, what: str):
        threads = threading.active_count()
        launched = self.launches.launches(self.module_name)
        try:
            out = model(*inputs)
            if self.device == "cuda":
                torch.cuda.synchronize()
        except CandidateFailure:
            raise
        except Exception as err:  # noqa: BLE001
            name = type(err).__name__
            status = Status.compile_error if "Compil" in name or "compil" in str(err)[:200] else Status.crash
            first = str(err).strip().splitlines()[0][:300] if str(err).strip() else ""
            raise CandidateFailure(status, f"{what} raised {name}: {first}",
                                   traceback.format_exc(limit=-6), stage="correctness") from None
        anticheat.thread_check(threads, what, "correctness")
        if self.guard is not None:
            self.guard.verify(f"during {what}", "correctness")
        self._launch_check(launched, what)
        return out

    def _launch_check(self, before: int, what: str) -> None:
        """Check 1/2 at run time: the candidate's own Triton kernels ran during this call."""
        if self.detail.get("language") == "triton" and self.launches.launches(self.module_name) <= before:
            raise CandidateFailure(Status.rejected, f"kernel-launch check: {what} launched none of the candidate's "
                                   "own Triton kernels (the work was done some other way)", stage="correctness")

    # -- stages ---------------------------------------------------------------------------------------------
    def compile(self) -> None:
        self.detail["language"] = check_source(self.source)
        self.detail.update(anticheat.scan_source(self.source, self.detail["language"]))
        _pin_precision()
        self.launches.install()
        self.guard = anticheat.Guard()
        self.module_name = f"ks_candidate_{abs(hash(self.source)) % 10**8}"
        try:
            self.module = load_source_module(self.source, self.module_name, filename="candidate.py")
        except Exception as err:  # noqa: BLE001
            raise CandidateFailure(Status.compile_error, f"loading the candidate raised {type(err).__name__}: {err}",
                                   traceback.format_exc(limit=-4), stage="compile") from None
        if not hasattr(self.module, "ModelNew"):
            raise CandidateFailure(Status.compile_error, "the candidate defines no ModelNew", stage="compile")
        self.guard.verify("after loading", "compile")
        if _precision_flags() != (False, False, "highest"):
            raise CandidateFailure(Status.rejected, "the candidate changed the TF32/matmul precision settings",
                                   stage="compile")

    def correctness(self) -> None:
        cases = self.problem.cases_for(self.s.mode)
        for case in cases:
            with self.lease("shared"):   # no timing runs on the device while a case is checked
                self._check_case(case)
        with self.lease("shared"):
            self._repeat_check(cases[-1])
        # float64 references of the largest case at every size: tens of GB for attention's timed case (scores of
        # 4 x 32 x 4096 x 4096 in float64), and three workers at once ran an H200 out of memory, which the
        # candidates were charged for as crashes; so on a GPU one stability check at a time, alone on the device
        self._free_cached_memory()   # a worker waiting for the lease must not hold what its checks cached
        with self.lease("exclusive" if self.device == "cuda" else "shared"):
            self._stability(cases)

    def _check_case(self, case: Case) -> None:
        atol, rtol = self.problem.tolerance(case.dtype)
        for trial in range(self.s.trials):
            seed = _seed(self.s.seed, case.name, trial)
            ref, cand = self._models(case, seed)
            inputs = self.problem.build_inputs(case, seed, self.device)
            cand_inputs = _clone(inputs)
            self._poison_allocator(sum(t.numel() * t.element_size() for t in inputs
                                       if isinstance(t, torch.Tensor)) * 2)
            # the candidate runs first, on clones, before any reference output exists
            if self.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            t_call = time.perf_counter()
            got = self._call(cand, cand_inputs, "ModelNew.forward")
            self._add_s("candidate_calls", t_call)   # the first call of a shape includes Triton's JIT
            if self.device == "cuda":   # read by export-tsv's peak_vram_mb
                peak = torch.cuda.max_memory_allocated() / 2**20
                self.detail["peak_vram_mb"] = max(self.detail.get("peak_vram_mb", 0.0), peak)
            anticheat.alias_check(got, cand_inputs, "ModelNew.forward", "correctness")
            if _precision_flags() != (False, False, "highest"):
                raise CandidateFailure(Status.rejected, "the candidate changed the TF32/matmul precision "
                                       "settings while running", stage="correctness")
            if not _same(cand_inputs, inputs):
                raise CandidateFailure(Status.rejected, f"input check: case {case.describe()}: the candidate "
                                       "modified its inputs in place", stage="correctness")
            t_ref = time.perf_counter()
            want, want_hi = references(ref, inputs)
            self._add_s("references", t_ref)
            cmp = compare(got, want, want_hi, atol, rtol)
            self.detail["cases"].append({"case": case.describe(), "trial": trial, "ok": cmp.ok,
                                         "max_abs": cmp.max_abs, "max_rel": cmp.max_rel})
            if not cmp.ok:
                raise CandidateFailure(Status.incorrect, f"case {case.describe()} trial {trial}: {cmp.reason}"
                                       f"{self._precision_note(case)}", cmp.detail or None, stage="correctness")
            del got, want, want_hi

    def _stability(self, cases: list[Case]) -> None:
        """Inputs that break naive kernels: large magnitudes, near-zero, mixed scales, rows of equal values; at
        the problem's looser stability tolerance. Candidate first on clones, as in every check."""
        case = cases[-1]
        for name in self.problem.stability:
            # one input set per call: its float64 tensors (tens of GB for attention's timed case) are gone when
            # the call returns, a failure included (a raised exception's traceback would keep them alive), and
            # the cache is handed back before the next set or the lease's release
            failure = self._stability_one(case, name)
            self._free_cached_memory()
            if failure is not None:
                raise failure

    def _stability_one(self, case: Case, name: str) -> CandidateFailure | None:
        atol, rtol = self.problem.stability_tolerance(case.dtype)
        seed = _seed(self.s.seed, case.name, "stability", name)
        ref, cand = self._models(case, seed)
        inputs = stability_inputs(name, self.problem.build_inputs(case, seed, self.device), case.dtype, seed)
        got = self._call(cand, _clone(inputs), f"ModelNew.forward ({name} inputs)")
        want, want_hi = references(ref, inputs, torch.float64)   # float64 at every size: these inputs are hard
        if _overflows(want, want_hi):   # the true answer is outside the dtype's range: nothing to check
            self.detail["cases"].append({"case": f"{case.describe()} {name}", "skipped": "out of range"})
            return None
        cmp = compare(got, want, want_hi, atol, rtol)
        judged = "tolerance"
        if not cmp.ok and not compare(want, want, want_hi, atol, rtol).ok:
            # PyTorch's own answer at this dtype misses the tolerance too: the inputs are past what the dtype
            # can resolve (bf16 matmul or attention on inputs x 1e3: cancellation of 1e6-sized terms, seen
            # on an H200). The candidate must then be no worse than eager, normwise, against float64.
            cmp = _no_worse_than_eager(got, want, want_hi, cmp)
            judged = "eager's own error"
        self.detail["cases"].append({"case": f"{case.describe()} {name}", "trial": 0, "ok": cmp.ok,
                                     "max_abs": cmp.max_abs, "max_rel": cmp.max_rel, "judged_by": judged})
        if cmp.ok:
            return None
        return CandidateFailure(Status.incorrect, f"stability check ({name} inputs) on {case.describe()}: "
                                f"{cmp.reason}", cmp.detail or None, stage="correctness")

    def _free_cached_memory(self) -> None:
        """Hand this worker's cached device memory back to the driver. PyTorch's allocator keeps what a check
        used: on an H200 two workers past their stability checks held 44 and 45 GB of it, and another worker's
        float64 references, run alone under the exclusive lease, still ran out of memory."""
        if self.device == "cuda":
            gc.collect()
            torch.cuda.empty_cache()

    def _precision_note(self, case: Case) -> str:
        casts = self.detail.get("low_precision_casts")
        if case.dtype == "float32" and casts:
            return f" [precision check: fp32 problem, but the candidate casts to lower precision: {'; '.join(casts)}]"
        return ""

    def _repeat_check(self, case: Case) -> None:
        """Check 3: two calls on different inputs of the same shape, both before the reference runs; both must be
        right (a cache keyed on shape, data_ptr, version or a global returns the first answer twice)."""
        seed = _seed(self.s.seed, case.name, "repeat")
        ref, cand = self._models(case, seed)
        sets = [self.problem.build_inputs(case, _seed(seed, i), self.device) for i in range(2)]
        outs = []
        launched = self.launches.launches(self.module_name)
        for i, inputs in enumerate(sets):
            outs.append(model_out := self._call_raw(cand, _clone(inputs), f"ModelNew.forward (repeat call {i})"))
            del model_out
        atol, rtol = self.problem.tolerance(case.dtype)
        for i, inputs in enumerate(sets):
            cmp = compare(outs[i], *references(ref, inputs), atol, rtol)
            if not cmp.ok:
                raise CandidateFailure(Status.incorrect, f"cache check: call {i} of two on different inputs of shape "
                                       f"{case.describe()} is wrong ({cmp.reason}): results are reused across "
                                       "calls", cmp.detail or None, stage="correctness")
        if self.launches.launches(self.module_name) < launched + 2:
            raise CandidateFailure(Status.rejected, "kernel-launch check: a repeat call launched none of the "
                                   "candidate's own Triton kernels", stage="correctness")

    def _call_raw(self, model, inputs: list, what: str):
        """_call without the launch check (the repeat check compares results first, then counts launches)."""
        saved, self.detail["language"] = self.detail.get("language"), None
        try:
            return self._call(model, inputs, what)
        finally:
            self.detail["language"] = saved

    def timing(self) -> dict:
        case = self.problem.timed_case if self.s.mode == "cuda" else self.problem.cpu_timed_case()
        seed = _seed(self.s.seed, "timing")
        ref, cand = self._models(case, seed)
        n_sets = self.s.input_sets if self.s.mode == "cuda" else 1
        sets = [self.problem.build_inputs(case, _seed(seed, i), self.device) for i in range(n_sets)]
        fns: dict[str, Callable] = {"candidate": lambda x: cand(*x)}
        ref_nograd = torch.no_grad()(lambda x: ref(*x))
        fns["eager"] = ref_nograd
        if self.s.compare_compile and self.s.mode == "cuda":
            compiled = torch.compile(ref)
            fns["compile"] = torch.no_grad()(lambda x: compiled(*x))
        kept: dict[int, object] = {}
        calls = {"n": 0}

        def after(name, out):
            if name == "candidate":
                kept[calls["n"] % len(sets)] = out   # rechecked after timing (no caching across inputs)
                calls["n"] += 1
            else:
                for t in flatten(out):   # the reference's answer never lingers in freed memory
                    if isinstance(t, torch.Tensor) and t.is_floating_point():
                        t.fill_(float("nan"))

        iters = self.s.timing_iters if self.s.mode == "cuda" else max(3, min(self.s.timing_iters, 5))
        # Prime every side once per input set before the exclusive lease: Triton's JIT and torch.compile's
        # compile of the reference (seconds) then happen beside other candidates' checks (a shared lease), not
        # while this one holds the GPU alone.
        t0 = time.perf_counter()
        with self.lease("shared"):
            for fn_name, fn in fns.items():
                for inputs in sets:
                    after(fn_name, fn(inputs))
            if self.device == "cuda":
                torch.cuda.synchronize()
        self.detail.setdefault("stage_s", {})["timing_prime"] = round(time.perf_counter() - t0, 3)
        with self.lease("exclusive"):
            t0 = time.perf_counter()
            if self.s.mode == "cuda":
                # measured (once per device, cached) only while holding the lease: nothing else times then
                from kernelsearch.evaluators.roofline import ceilings

                self.ceilings = ceilings("cuda")
            t = time_interleaved(fns, sets, device=self.device, iters=iters, after_call=after,
                                 warmup=1, max_batches=4 if self.s.mode == "cuda" else 1)
            self.detail["stage_s"]["timing_leased"] = round(time.perf_counter() - t0, 3)
        if self.guard is not None:
            self.guard.verify("during timing", "timing")
        # recheck what the timed calls returned, one output per input set
        atol, rtol = self.problem.tolerance(case.dtype)
        for i, inputs in enumerate(sets):
            if i in kept:
                with self.lease("shared"):
                    cmp = compare(kept[i], *references(ref, inputs), atol, rtol)
                if not cmp.ok:
                    raise CandidateFailure(Status.incorrect, f"a timed call's output on input set {i} is wrong: "
                                           f"{cmp.reason}", cmp.detail or None, stage="timing")
        out = {"time_ms": t["candidate"].median, "ref_time_ms": t["eager"].median,
               "timing_case": case.describe(), "timings": {k: v.summary() for k, v in t.items()}}
        out["speedup"] = out["ref_time_ms"] / out["time_ms"] if out["time_ms"] > 0 else None
        if "compile" in t:
            out["compile_ref_time_ms"] = t["compile"].median
            out["speedup_compile"] = t["compile"].median / out["time_ms"]
        out["case"] = case
        return out


def evaluate(problem: Problem, source: str, settings: Settings,
             lease: Callable[[str], ContextManager] = contextlib.nullcontext, device_name: str | None = None) -> dict:
    """Run the stages; return the Evaluation columns as a dict (status is always set)."""
    ev = Evaluator(problem, source, settings, lease)
    result: dict = {"timing_kind": "cuda-events" if settings.mode == "cuda" else "cpu-interpreter",
                    "device": device_name or ("cpu-interpreter" if settings.mode == "cpu" else "cuda")}
    stage = "static"
    stage_s = ev.detail.setdefault("stage_s", {})   # seconds spent in each stage (where the time goes)
    t0 = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t0
        now = time.perf_counter()
        stage_s[name] = round(now - t0, 3)
        t0 = now
    try:
        stage = "compile"
        ev.compile()
        lap("compile")
        stage = "correctness"
        ev.correctness()
        lap("correctness")
        if settings.mode == "cpu" and settings.aot:
            # No GPU here: compile the kernels for the H200 ahead of time (sm_90), after correctness so that
            # wrong candidates fail cheaply first; a kernel that only the interpreter accepts fails here.
            stage = "compile_sm90"
            from kernelsearch.evaluators.aot import aot_report

            report = aot_report(source, problem, None)
            ev.detail["sm90"] = {k: report.get(k) for k in ("status", "kernels", "error", "wall_s")}
            if report["status"] == "compile_error":
                lines = [ln for ln in str(report.get("error", "")).strip().splitlines() if ln.strip()] or [""]
                first = lines[0].split(" at ")[0].rstrip(":")
                raise CandidateFailure(Status.compile_error, f"sm_90 compile failed: {first}: {lines[-1][:300]}",
                                       str(report.get("error")), stage="compile_sm90")
            lap("compile_sm90")
        stage = "timing"
        timed = ev.timing()
        lap("timing")
        case: Case = timed.pop("case")
        ev.detail["timings"] = timed.pop("timings")
        ev.detail["timing_case"] = timed.pop("timing_case")
        result.update(timed)
        if settings.mode == "cuda":
            stage = "roofline"
            from kernelsearch.evaluators.roofline import ceilings, roofline

            ceil = ev.ceilings or ceilings("cuda")
            flops = problem.flops(case) if problem.flops else None
            nbytes = problem.bytes_moved(case) if problem.bytes_moved else None
            r = roofline(flops, nbytes, result["time_ms"], case.dtype, ceil)
            ev.detail["ceilings"] = ceil
            result.update({k: r.get(k) for k in ("gbps", "tflops", "roofline_fraction", "bottleneck")})
            frac = r.get("roofline_fraction")
            if frac is not None and frac > 1.05:
                raise CandidateFailure(Status.rejected, f"impossible speed: {frac:.2f}x the roofline of the "
                                       "measured ceilings (faster than the bytes or FLOPs allow)", stage="roofline")
        result.update(status=Status.ok.value, stage="timing", reason=None)
    except CandidateFailure as f:
        result.update(status=f.status.value, reason=f.reason, error_text=f.text, stage=f.stage or stage)
        for k in ("time_ms", "ref_time_ms", "speedup", "compile_ref_time_ms", "speedup_compile"):
            result.pop(k, None)
    result["detail"] = ev.detail
    return result
