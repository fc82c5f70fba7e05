"""The judge's memory plan: what its own work on a case may allocate, from the case's input and output bytes and the
memory free on its device, decided before the work runs.

A KernelBench level-1 problem at its own size has inputs of 6-8 GB (ReLU: 4096 x 393216 fp32, 6.4 GB). Its float64
reference alone is twice the output's bytes, its float64 inputs twice theirs, and an unchunked comparison made eight
float64 temporaries of the output's size: on an H200 the judge asked for 12 GiB more with 33 GiB free and the kernel
was charged a crash. So, per case (`plan_case`):
- the high-precision reference is float64 where its inputs, weights, output and one intermediate of the output's
  size in float64 fit in MARGIN of the free memory (and the inputs are at most numerics.F64_MAX_ELEMENTS elements,
  a bound on its time); else float32; else the problem's own dtype (the reference's answer itself). The tolerance is
  the dtype's either way (docs/anticheat.md says why a wrong kernel is still caught);
- the comparison runs in chunks of at most COMPARE_CHUNK elements, fewer where the room left is small
  (TEMP_BYTES_PER_ELEMENT: what `compare` holds per element of a chunk);
- the stability checks (float64 by nature) run on the largest case whose plan allows them, or are skipped with a
  note;
- a timed batch's calls are as many as fit (`timing_calls`), down to one, with a note.
The free memory is measured (`torch.cuda.mem_get_info`; /proc/meminfo's MemAvailable on the CPU) unless the
evaluation's `judge_memory_mb` sets it (tests simulate a small device that way). What the plan decided is kept in the
evaluation's detail (`memory_plan`). An out-of-memory error in the judge's own work is still possible (other
evaluations share the device; a reference's intermediates are estimated, not known): it is the harness's failure
(`Status.harness_error`), never the candidate's crash.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

import torch

from kernelsearch.judge.correctness import COMPARE_CHUNK, flatten

MARGIN = 0.5                    # the share of the free memory the judge's plan may use
# A batch long enough that its host overhead (0.3-0.6 ms, H100) is a sliver, even for a candidate 100x faster than its
# reference, and short enough that a slow reference (a KernelBench convolution at 20 ms a call, 128 calls a side: 2.6 s
# a batch, 12 batches) does not hold the device's one timing stage for a minute: about BATCH_MS of the reference's
# calls, and at least WIDE_BYTES of inputs
BATCH_MS, WIDE_BYTES = float(os.environ.get("KS_CLOCK_BATCH_MS", "500")), 256 * 2**20
TIMING_MARGIN = 0.8             # the share a timed batch's slots may use (counted exactly: n input sets and outputs)
HARD_MARGIN = 0.95              # a case whose plain reference and outputs need more than this cannot be judged
MIN_CHUNK = 1 << 12
# on the CPU, chunks that stay in cache: 50M fp32 values compared in 1.1-1.2 s by chunks of 2^20, 2.6-3.5 s by 2^25,
# 2.5-4.3 s whole (the unchunked comparison; a loaded 2-core development machine, two runs each)
CPU_COMPARE_CHUNK = 1 << 20
TEMP_BYTES_PER_ELEMENT = 64     # `compare`'s float64 and bool temporaries for one element of a chunk, at peak


def free_memory(device: str, setting_mb: float | None) -> tuple[int, str]:
    """(bytes the judge may plan with, where the figure comes from)."""
    if setting_mb is not None:
        return int(setting_mb * 2**20), "setting"
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return int(free), "measured"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "measured"
    except OSError:
        pass
    return 8 << 30, "assumed"


def tensor_bytes(values) -> int:
    return sum(t.numel() * t.element_size() for t in flatten(list(values)) if isinstance(t, torch.Tensor))


def _hi_bytes(values, hi: torch.dtype) -> int:
    """What casting the floating tensors of `values` to `hi` allocates (none where they are `hi` already)."""
    size = torch.empty((), dtype=hi).element_size()
    return sum(t.numel() * size for t in flatten(list(values))
               if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != hi)


@dataclass
class CasePlan:
    case: str
    in_bytes: int
    out_bytes: int
    weight_bytes: int
    free_bytes: int
    free_from: str            # measured | setting | assumed
    reference: str            # float64 | float32 | native: the dtype the values are measured against
    chunk: int                # elements a comparison chunk
    stability: bool           # the float64 stability checks fit
    out_estimated: bool = False   # the output's bytes could not be learned on the meta device: assumed the input's
    note: str | None = None

    @property
    def hi(self) -> torch.dtype | None:
        """The dtype `numerics.references` computes the high-precision reference in; None: the problem's own."""
        return {"float64": torch.float64, "float32": torch.float32}.get(self.reference)

    def as_dict(self) -> dict:
        d = asdict(self)
        for k in ("in_bytes", "out_bytes", "weight_bytes", "free_bytes"):
            d[k.replace("_bytes", "_mb")] = round(d.pop(k) / 2**20, 2)
        return {k: v for k, v in d.items() if v is not None and (v is not False or k == "stability")}


def plan_case(name: str, inputs: list, outputs: list, weights: list, free: int, free_from: str, *,
              f64_max_elements: int | None = None, chunk_cap: int = COMPARE_CHUNK) -> CasePlan:
    """The plan of one case. `inputs` and `weights` as they are (on the device), `outputs` the reference's (meta
    tensors will do: only shapes and dtypes are read); `free` is measured after the inputs and weights exist, so
    they are not counted again. What is counted: the candidate's output and the reference's (2 x O), then for the
    high-precision reference its inputs, weights and output cast to it and one intermediate of the output's size,
    then the comparison's chunk."""
    from kernelsearch.judge.numerics import F64_MAX_ELEMENTS

    f64_max_elements = F64_MAX_ELEMENTS if f64_max_elements is None else f64_max_elements
    in_b, out_b, w_b = tensor_bytes(inputs), tensor_bytes(outputs), tensor_bytes(weights)
    base = 2 * out_b
    room = int(MARGIN * free)
    n_in = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))

    def need(hi: torch.dtype | None) -> int:   # the high-precision reference's own allocations
        if hi is None:
            return 0
        return _hi_bytes(inputs, hi) + _hi_bytes(weights, hi) + 2 * _hi_bytes(outputs, hi)

    largest = max([t.numel() for t in outputs if isinstance(t, torch.Tensor)] or [1])
    floor = min(MIN_CHUNK, largest) * TEMP_BYTES_PER_ELEMENT   # the comparison's smallest chunk
    note = None
    if n_in <= f64_max_elements and base + need(torch.float64) + floor <= room:
        reference = "float64"
    elif not need(torch.float32) or base + need(torch.float32) + floor <= room:   # float32 problems: their own
        reference = "float32"
        note = (f"float32 reference: {n_in:,} input elements is over the float64 bound ({f64_max_elements:,})"
                if n_in > f64_max_elements else
                f"float32 reference: a float64 one needs {(base + need(torch.float64) + floor) / 2**20:,.1f} MiB, over "
                f"{MARGIN:g} of the {free / 2**20:,.1f} MiB free")
    else:
        reference = "native"
        note = (f"reference in the problem's own dtype: a float32 one needs "
                f"{(base + need(torch.float32) + floor) / 2**20:,.1f}"
                f" MiB, over {MARGIN:g} of the {free / 2**20:,.1f} MiB free")
    hi = {"float64": torch.float64, "float32": torch.float32}.get(reference)
    chunk = max(min(MIN_CHUNK, largest), min(chunk_cap, (room - base - need(hi)) // TEMP_BYTES_PER_ELEMENT))
    # the stability inputs (numerics.stability_inputs) hold up to three float64 copies of the inputs at once, beside
    # its float64 reference's own allocations
    stab = base + 3 * _hi_bytes(inputs, torch.float64) + need(torch.float64) + floor <= room
    return CasePlan(name, in_b, out_b, w_b, free, free_from, reference, int(chunk), bool(stab), note=note)


def refuse_line(name: str, in_b: int, out_b: int, free: int) -> str | None:
    """The judge cannot hold a case's outputs (the candidate's and the reference's): one line, or None."""
    if 2 * out_b <= HARD_MARGIN * free:
        return None
    return (f"case {name}: the judge needs {_mib(2 * out_b)} for the candidate's and the reference's outputs "
            f"(inputs {_mib(in_b)}), {_mib(free)} free")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 10 * 2**20 else f"{n / 2**20:.3g} MiB"


def calls_that_fit(in_b: int, out_b: int, sides: int, free: int) -> int:
    """Timed calls a side whose input sets and outputs fit beside the judge's check (see timing_calls)."""
    return (int(TIMING_MARGIN * free) - (in_b + 3 * out_b)) // (sides * max(in_b + out_b, 1))


def timing_calls(in_b: int, out_b: int, sides: int, free: int, want: int, batch_bytes: int,
                 min_calls: int, call_ms: float | None = None) -> tuple[int, str | None]:
    """Calls per timed batch: at most `want` and `batch_bytes` of inputs and outputs a side, and what fits beside the
    judge's check (an input set, the reference's output and its float32 one, the first call's) in TIMING_MARGIN of
    the free memory across every side's slots (these are counted exactly, hence the larger share). At least one;
    under `min_calls` with a note. `call_ms`, a reference call's device time: at most the calls of BATCH_MS, unless
    their inputs would come under WIDE_BYTES (the L2 must not hold a batch's inputs)."""
    per_call = max(in_b + out_b, 1)
    if call_ms and call_ms > 0:
        want = min(want, max(math.ceil(BATCH_MS / call_ms), math.ceil(WIDE_BYTES / max(in_b, 1))))
    wanted = max(min_calls, min(want, batch_bytes // per_call))
    fit = calls_that_fit(in_b, out_b, sides, free)
    n = max(1, min(wanted, fit))
    if n >= min(wanted, min_calls):
        return n, None
    return n, (f"{n} call(s) a timed batch: {min_calls} calls' inputs and outputs on {sides} sides "
               f"({min_calls * sides * per_call / 2**20:,.0f} MiB) do not fit in {TIMING_MARGIN:g} of the "
               f"{free / 2**20:,.0f} MiB free")


_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "outofmemoryerror")


def is_out_of_memory(err: BaseException | str) -> bool:
    """An allocation failure: torch.OutOfMemoryError (CUDA), MemoryError, or the CPU allocator's RuntimeError
    ("DefaultCPUAllocator: can't allocate memory"); a string is an error's `Type: text` as a runner reports it."""
    if isinstance(err, (torch.OutOfMemoryError, MemoryError)):
        return True
    if isinstance(err, BaseException) and not isinstance(err, RuntimeError):
        return False
    text = str(err)[:2000].lower()
    return any(k in text for k in _OOM_TEXT)




def prime(freeze: bool = False) -> None:
    """The judge's one-time host work, done before it takes any lease. The meta device's first operation imports
    torch's decompositions (torch._dynamo: about 1 s on a CPU), which the first case's plan (`meta_outputs`) paid
    inside a shared hold, the hold every timing waiting for the device drains. `freeze` (the judge's own process,
    one evaluation then exit): what exists now is moved out of the collector's reach, so the full collections of
    each plan and stability check (`JudgeMemory.free`, harness `_free_cached_memory`: 0.1 s each with torch and
    Triton imported) walk only what the evaluation made."""
    import gc

    with torch.no_grad():
        (torch.empty(2, 3, device="meta") * 2).sum(-1)
    if freeze:
        gc.collect()
        gc.freeze()


def meta_outputs(problem, case, inputs: list) -> tuple[list, bool]:
    """The reference's outputs for `inputs` on the meta device (shapes and dtypes, no memory), and whether they are
    only estimated (the meta device cannot run the reference: the inputs stand in for them)."""
    from kernelsearch.judge.problem import DTYPES

    try:
        init = problem.build_init_inputs(case)   # outside the meta device: a sized module is made (and kept) here
        with torch.device("meta"):
            model = problem.module.Model(*init)
        dtype = case.dtype if problem.builtin and case.dtype in DTYPES else None
        if dtype and isinstance(model, torch.nn.Module):
            model = model.to(DTYPES[dtype])
        with torch.no_grad():
            out = model(*[v.to("meta") if isinstance(v, torch.Tensor) else v for v in inputs])
        return [t for t in flatten(out) if isinstance(t, torch.Tensor)], False
    except Exception:   # noqa: BLE001 - an op without a meta kernel: the plan assumes outputs as large as the inputs
        return [t for t in inputs if isinstance(t, torch.Tensor)], True


class JudgeMemory:
    """The judge's memory bookkeeping: each case's plan (kept in `detail["memory_plan"]`), its notes, and what the
    judge's own work is doing (`doing`), for the line of an out-of-memory error."""

    def __init__(self, detail: dict, device: str, setting_mb: float | None):
        self.detail, self.device, self.setting_mb = detail, device, setting_mb
        self.plans: dict[str, CasePlan] = {}
        self.doing: str | None = None
        self.out_bytes: int | None = None   # the current case's reference outputs (its plan)

    def free(self) -> tuple[int, str]:
        """Free memory for the plan, after handing the judge's cached blocks back (GPU)."""
        if self.device == "cuda":
            import gc

            gc.collect()
            torch.cuda.empty_cache()
        return free_memory(self.device, self.setting_mb)

    def record(self) -> dict:
        return self.detail.setdefault("memory_plan", {"cases": []})

    def note(self, text: str) -> None:
        self.record().setdefault("notes", []).append(text)

    def plan(self, problem, case, ref, inputs: list) -> CasePlan:
        """The case's plan, made once, when its first inputs exist: from the bytes of its inputs, the reference's
        weights and outputs (on the meta device) and the memory free now. A case whose outputs the judge cannot hold
        twice is the harness's failure, before the candidate runs."""
        from kernelsearch.judge.status import HarnessFailure

        plan = self.plans.get(case.name)
        if plan is None:
            free, source = self.free()
            outs, estimated = meta_outputs(problem, case, inputs)
            weights = list(ref.parameters()) + list(ref.buffers()) if isinstance(ref, torch.nn.Module) else []
            plan = plan_case(case.describe(), inputs, outs, weights, free, source,
                             chunk_cap=COMPARE_CHUNK if self.device == "cuda" else CPU_COMPARE_CHUNK)
            plan.out_estimated = estimated
            self.plans[case.name] = plan
            self.record()["cases"].append(plan.as_dict())
            line = refuse_line(case.describe(), plan.in_bytes, plan.out_bytes, free)
            if line:
                raise HarnessFailure(f"harness out of memory (planned): {line}", stage="correctness")
        self.out_bytes = plan.out_bytes
        return plan

    def out_limit(self) -> int | None:
        """The most output bytes the judge copies from the candidate: twice the reference's and a MiB (a larger
        output is wrong anyway, and copying it could exhaust the judge's memory on the candidate's account)."""
        return None if self.out_bytes is None else 2 * self.out_bytes + (1 << 20)

    def stability_case(self, cases: list, checks) -> object | None:
        """The largest case whose plan holds the stability checks' float64 references; None (and a note) where no
        case's does, or there are no checks."""
        if not checks:
            return None
        fit = [c for c in cases if c.name in self.plans and self.plans[c.name].stability]
        if not fit:
            self.note("stability checks skipped: no case's float64 references fit (see the cases' plans)")
            return None
        if fit[-1] is not cases[-1]:
            self.note(f"stability checks on {fit[-1].describe()}: their float64 references of "
                      f"{cases[-1].describe()} do not fit")
        return fit[-1]

    def failure(self, err: BaseException, stage: str):
        """An out-of-memory error in the judge's own work as the harness's failure (HarnessFailure): what the judge
        was doing, what it asked for, what is free now, the case's sizes."""
        from kernelsearch.judge.status import HarnessFailure

        first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")[:300]
        try:
            free, _ = self.free() if self.setting_mb is None else free_memory(self.device, None)
            free_line = f"{free / 2**30:,.1f} GiB free on the {'GPU' if self.device == 'cuda' else 'host'} now"
        except Exception:   # noqa: BLE001 - the line is said without it
            free_line = "free memory unknown"
        sizes = ""
        if self.plans:
            p = list(self.plans.values())[-1]
            sizes = (f"; case {p.case}: inputs {p.in_bytes / 2**20:,.0f} MiB, outputs {p.out_bytes / 2**20:,.0f} MiB, "
                     f"{p.reference} reference")
        return HarnessFailure(f"harness out of memory (the judge's own work, not the candidate's) while "
                              f"{self.doing or stage}: {type(err).__name__}: {first}; {free_line}{sizes}",
                              stage=stage)

    def raise_if_out_of_memory(self, err, what: str, stage: str) -> None:
        """A runner's error reply (`{"type", "text", "tb"}`) to an allocation the judge sized is, when it is an
        out-of-memory error, the harness's failure."""
        from kernelsearch.judge.status import HarnessFailure

        if isinstance(err, dict) and is_out_of_memory(f"{err.get('type')}: {err.get('text')}"):
            raise HarnessFailure(f"harness out of memory: {what}: {str(err.get('text')).strip()[:200]}",
                                 str(err.get("tb") or "")[:4000] or None, stage=stage)


# -- what an evaluation holds on its GPU, for the pool's admission (sandbox/admission.py MemoryGate) -----------------
EVAL_FIXED_BYTES = 1 << 30      # three processes' CUDA contexts and allocator slack, per evaluation
TIMING_MIN_CALLS = 2           # the timing stage's fewest calls a batch where they fit (judge/clock.py MIN_CALLS)
IN_COPIES, OUT_COPIES = 3, 6    # inputs: judge, candidate, eager runner; outputs: those three, float64 reference (x2),
#                                 and the compared chunk's temporaries


def footprint_bytes(problem_ref: dict, sides: int = 2, reserve: int = 0) -> int:
    """An evaluation's peak GPU bytes, estimated from its timed case's inputs and outputs on the meta device (no
    memory drawn): IN_COPIES x inputs + OUT_COPIES x outputs + EVAL_FIXED_BYTES. A problem whose inputs cannot be
    drawn on the meta device (a family's generator) is counted from its byte count (spec.bytes_moved at the timed
    case: inputs and outputs, each counted OUT_COPIES times), or the fixed part only where it has none. Seen on an
    H100 (2026-12-05): eight evaluations of KernelBench's level-1 files at their own sizes (inputs of 6-7 GiB)
    admitted at once ran each other out of memory: 34 of 58 evaluations were harness errors and two problems ended
    with no kernel judged. `reserve`: the bytes the memory gate keeps aside for the one timing stage a device runs at
    a time (sandbox/admission.py `gate_capacity`); a timing stage whose TIMING_MIN_CALLS calls on every side need
    more adds what they need beyond it (KernelBench's 6 GiB inputs: 2 calls x 2 sides x 12 GiB, 48 GiB)."""
    from kernelsearch.judge.problem import load_problem

    try:
        problem = load_problem(problem_ref)
        if "file" not in problem_ref:   # a family: its generator cannot draw on the meta device, its byte count can say
            moved = problem.bytes_moved(problem.timed_case) if problem.bytes_moved else 0
            # inputs and outputs counted as outputs: an upper bound
            return (OUT_COPIES + sides - 2) * int(moved) + EVAL_FIXED_BYTES + _beyond(int(moved), sides, reserve)
        module = problem.module   # the file's own sizes: its timed case
        with torch.device("meta"):
            torch.manual_seed(0)
            init, inputs = list(module.get_init_inputs()), list(module.get_inputs())
            in_b = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
            try:
                out = module.Model(*init)(*inputs)
                out_b = sum(t.numel() * t.element_size() for t in flatten(out) if isinstance(t, torch.Tensor))
            except Exception:   # noqa: BLE001 - an op the meta device cannot run: the output as large as the inputs
                out_b = in_b
        # a third timed side (torch.compile's reference, `compare_compile`) holds its own inputs and outputs
        return ((IN_COPIES + sides - 2) * in_b + (OUT_COPIES + sides - 2) * out_b + EVAL_FIXED_BYTES
                + _beyond(in_b + out_b, sides, reserve))
    except Exception:   # noqa: BLE001 - a problem that does not load is the evaluation's to report, not the gate's
        return EVAL_FIXED_BYTES


def _beyond(per_call: int, sides: int, reserve: int) -> int:
    """What a timing stage's TIMING_MIN_CALLS calls a side (inputs and outputs) need beyond the gate's reserve."""
    return max(0, TIMING_MIN_CALLS * sides * per_call - reserve) if reserve else 0
