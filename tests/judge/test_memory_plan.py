"""The judge's memory plan (judge/memory.py) on a simulated small device, the chunked comparison, and an
out-of-memory error in the judge's own work reported as the harness's failure, not the candidate's crash (issue 19:
KernelBench's own sizes on one H200)."""
from __future__ import annotations

import math
import textwrap

import pytest
import torch

from kernelsearch.judge import harness
from kernelsearch.judge.correctness import agreement, compare
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.memory import MIN_CHUNK, is_out_of_memory, plan_case, refuse_line, timing_calls
from kernelsearch.judge.problem import load_file
from kernelsearch.judge.settings import EvalSettings

MB = 2**20
ROWS, COLS = 1280, 4096   # 20 MiB of fp32 input and 20 of output: a 40 MiB case

PROBLEM = textwrap.dedent(f"""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.relu(x)


    def get_inputs():
        return [torch.randn({ROWS}, {COLS})]


    def get_init_inputs():
        return []
""")

KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, RESULT, mask=mask)


    def relu(x):
        y = torch.empty_like(x)
        n = x.numel()
        _relu_kernel[(triton.cdiv(n, 1 << 16),)](x, y, n, BLOCK=1 << 16)
        return y


    class ModelNew(torch.nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return relu(x)
""")
HONEST = KERNEL.replace("RESULT", "tl.maximum(x, 0.0)")
# right everywhere but the very last element, which lies in the comparison's last chunk
WRONG = KERNEL.replace("RESULT", "tl.where(offs == n - 1, tl.abs(x) + 1.0, tl.maximum(x, 0.0))")
OOM = ("CUDA out of memory. Tried to allocate 12.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 33.19 GiB "
       "is free.")


@pytest.fixture(scope="module")
def relu_40mb(tmp_path_factory):
    path = tmp_path_factory.mktemp("problems") / "relu_40mb.py"
    path.write_text(PROBLEM)
    return load_file(path)


SMALL = EvalSettings(trials=1, aot_compile=False, judge_memory_mb=64)


def test_plan_on_a_small_device_chooses_float32_and_chunks():
    x = torch.empty(ROWS, COLS, device="meta")
    plan = plan_case("relu", [x], [torch.empty_like(x)], [], 64 * MB, "setting")
    assert plan.reference == "float32" and plan.hi is torch.float32
    assert MIN_CHUNK <= plan.chunk < ROWS * COLS
    assert not plan.stability
    assert "float64 one needs" in plan.note
    roomy = plan_case("relu", [x], [torch.empty_like(x)], [], 64 * 2**30, "setting")
    assert roomy.reference == "float64" and roomy.stability and roomy.chunk >= ROWS * COLS
    bf16 = torch.empty(ROWS, COLS, device="meta", dtype=torch.bfloat16)   # 10 MiB in, 10 out
    assert plan_case("b", [bf16], [bf16], [], 64 * MB, "setting").reference == "native"
    assert plan_case("b", [bf16], [bf16], [], 200 * MB, "setting").reference == "float32"
    # outputs the judge cannot hold twice: refused before the candidate runs
    assert refuse_line("relu", 20 * MB, 20 * MB, 64 * MB) is None
    assert "40 MiB" in refuse_line("relu", 20 * MB, 20 * MB, 32 * MB)


def test_timed_batches_are_sized_to_the_device():
    n, note = timing_calls(20 * MB, 20 * MB, 2, 64 * 2**30, 50, 8 * 2**30, 2)
    assert n == 50 and note is None
    n, note = timing_calls(20 * MB, 20 * MB, 2, 64 * MB, 50, 8 * 2**30, 2)
    assert n == 1 and "do not fit" in note
    # the 8 GiB batch bound keeps two calls where the device holds them (level-1 ReLU at its own size on an H200)
    relu = 4096 * 393216 * 4
    n, note = timing_calls(relu, relu, 2, 130 * 2**30, 50, 8 * 2**30, 2)
    assert n == 2 and note is None
    n, note = timing_calls(relu, relu, 2, 33 * 2**30, 50, 8 * 2**30, 2)
    assert n == 1 and note


def test_a_slow_reference_gets_batches_of_about_batch_ms():
    """A reference call's device time caps a batch at about BATCH_MS of its calls, never below WIDE_BYTES of inputs
    (the L2 must not hold them); a fast one is capped by memory and `timing_iters` as before."""
    from kernelsearch.judge.memory import BATCH_MS, WIDE_BYTES

    big = 64 * 2**30
    assert timing_calls(100 * MB, 100 * MB, 2, big, 128, 8 * 2**30, 2, 20.0)[0] == math.ceil(BATCH_MS / 20.0)
    small = 4 * MB   # slow calls on small inputs: as many as make WIDE_BYTES of inputs
    assert timing_calls(small, small, 2, big, 128, 8 * 2**30, 2, 20.0)[0] == math.ceil(WIDE_BYTES / small)
    rms = 64 * MB   # rmsnorm's timed case, its eager reference at 0.535 ms a call: 8 GiB of slots decide
    assert timing_calls(rms, rms, 2, big, 128, 8 * 2**30, 2, 0.535)[0] == 8 * 2**30 // (2 * rms)
    assert timing_calls(200 * MB, 200 * MB, 2, big, 128, 8 * 2**30, 2, None)[0] == 8 * 2**30 // (400 * MB)
    assert timing_calls(200 * MB, 200 * MB, 2, big, 128, 8 * 2**30, 2, 1e4)[0] == 2   # at least min_calls


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 25])
def test_chunked_comparison_says_what_the_whole_one_says(chunk):
    torch.manual_seed(0)
    h = torch.randn(33, 257, dtype=torch.float64)
    good = h.float()
    assert compare(good, good, h, 1e-5, 1e-4, chunk).ok
    bad = good.clone()
    bad[32, 256] += 1.0
    bad[3, 5] += 0.5
    c = compare(bad, good, h, 1e-5, 1e-4, chunk)
    assert not c.ok and c.mismatches == 2 and "2 of 8481 values off" in c.reason
    assert "at (3, 5)" in c.detail and "at (32, 256)" in c.detail
    assert abs(c.max_abs - 1.0) < 1e-6
    nan = good.clone()
    nan[20, 100] = float("nan")
    c = compare(nan, good, h, 1e-5, 1e-4, chunk)
    assert not c.ok and "1 non-finite values where the reference is finite (first at (20, 100)" in c.reason
    assert bool(agreement(good, good, h, 1e-5, 1e-4, chunk)) and not bool(agreement(bad, good, h, 1e-5, 1e-4, chunk))


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_honest_kernel_passes_under_the_small_plan(relu_40mb):
    r = evaluate(relu_40mb, HONEST, SMALL, mode="cpu", seed=3)
    assert r.status == "ok", r.reason
    plan = r.detail["memory_plan"]
    case = plan["cases"][0]
    assert case["reference"] == "float32" and case["free_from"] == "setting"
    assert case["chunk"] < ROWS * COLS   # compared in chunks
    assert plan["timing"]["calls_per_batch"] == 1 and any("do not fit" in n for n in plan["notes"])


def test_wrong_kernel_is_caught_under_the_small_plan(relu_40mb):
    r = evaluate(relu_40mb, WRONG, SMALL, mode="cpu", seed=3)
    assert r.status == "incorrect", r.reason
    assert f"1 of {ROWS * COLS} values off" in r.reason and r.stage == "correctness"
    assert f"at ({ROWS - 1}, {COLS - 1})" in r.error_text


def test_an_oversized_output_is_refused_before_the_judge_copies_it(relu_40mb):
    source = HONEST.replace("y = torch.empty_like(x)", "y = torch.empty(3 * x.numel(), dtype=x.dtype)")
    r = evaluate(relu_40mb, source, SMALL, mode="cpu", seed=3)
    assert r.status == "incorrect" and "returned 60.0 MiB of outputs; the reference returns 20.0 MiB" in r.reason


def test_out_of_memory_in_the_judge_is_the_harness_failure(relu_40mb, monkeypatch):
    def references(*args, **kwargs):
        raise torch.OutOfMemoryError(OOM)

    monkeypatch.setattr(harness, "references", references)
    r = evaluate(relu_40mb, HONEST, SMALL, mode="cpu", seed=3)
    assert r.status == "harness_error" and r.stage == "correctness", r.reason
    assert r.reason.startswith("harness out of memory (the judge's own work, not the candidate's) while computing "
                               "the float32 reference of own-only")
    assert "Tried to allocate 12.00 GiB" in r.reason and "GiB free on the host now" in r.reason
    assert "inputs 20 MiB, outputs 20 MiB" in r.reason


def test_host_allocation_failure_in_the_judge_is_the_harness_failure(relu_40mb, monkeypatch):
    def build_inputs(*args, **kwargs):
        torch.empty(1 << 58, dtype=torch.uint8)   # the CPU allocator's RuntimeError

    monkeypatch.setattr(relu_40mb, "build_inputs", build_inputs)
    r = evaluate(relu_40mb, HONEST, SMALL, mode="cpu", seed=3)
    assert r.status == "harness_error", r.reason
    assert "while building the inputs of own-only" in r.reason and "can't allocate memory" in r.reason


def test_out_of_memory_in_the_candidates_call_stays_its_crash(relu_40mb):
    source = HONEST.replace("return relu(x)", f"raise RuntimeError({OOM!r})")
    r = evaluate(relu_40mb, source, SMALL, mode="cpu", seed=3)
    assert r.status == "crash" and "out of memory" in r.reason, r.reason


def test_oom_recognised():
    assert is_out_of_memory(torch.OutOfMemoryError(OOM)) and is_out_of_memory(MemoryError())
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 9 bytes"))
    assert is_out_of_memory("OutOfMemoryError: CUDA out of memory.")
    assert not is_out_of_memory(RuntimeError("shape mismatch")) and not is_out_of_memory(ValueError("out of memory"))


def test_a_runner_out_of_memory_on_the_inputs_the_judge_sized_is_the_harness_failure():
    from kernelsearch.judge.memory import JudgeMemory
    from kernelsearch.judge.status import HarnessFailure

    mem = JudgeMemory({}, "cuda", 64)
    with pytest.raises(HarnessFailure) as err:
        mem.raise_if_out_of_memory({"type": "OutOfMemoryError", "text": OOM, "tb": ""},
                                   "the candidate's process receiving inputs", "timing")
    assert err.value.status == "harness_error" and "Tried to allocate 12.00 GiB" in err.value.reason
    mem.raise_if_out_of_memory({"type": "RuntimeError", "text": "an illegal memory access"}, "x", "timing")   # not


def test_a_family_under_a_tight_plan_keeps_its_verdicts():
    from kernelsearch.families import load_problem
    from tests.helpers import ONLINE

    softmax = load_problem("softmax")
    tight = EvalSettings(trials=1, aot_compile=False, judge_memory_mb=3)
    r = evaluate(softmax, ONLINE, tight, mode="cpu", seed=7)
    assert r.status == "ok", r.reason
    plans = {c["case"].split("[")[0]: c for c in r.detail["memory_plan"]["cases"]}
    assert plans["mid"]["reference"] == "float32" and not plans["mid"]["stability"]
    assert plans["large"]["reference"] == "float64" and plans["large"]["stability"]   # the stability checks' case
    from kernelsearch.judge.problem import FAMILIES_DIR

    wrong = FAMILIES_DIR / "softmax" / "wrong" / "no_max_subtraction.py"
    r = evaluate(softmax, open(wrong).read(), tight, mode="cpu", seed=7)
    assert r.status == "incorrect" and "scale=50" in r.reason, r.reason


def test_stability_checks_move_to_a_case_that_fits_or_are_skipped_with_a_note():
    from kernelsearch.judge.memory import JudgeMemory
    from kernelsearch.judge.problem import Case

    cases = [Case("small", {}), Case("big", {})]
    x = torch.empty(1000, device="meta")
    mem = JudgeMemory({}, "cpu", None)
    mem.plans = {"small": plan_case("small", [x], [x], [], 1 << 30, "setting"),
                 "big": plan_case("big", [x], [x], [], 1 << 16, "setting")}
    assert mem.stability_case(cases, ("large",)).name == "small"
    assert "stability checks on small" in mem.detail["memory_plan"]["notes"][0]
    mem.plans["small"] = mem.plans["big"]
    assert mem.stability_case(cases, ("large",)) is None
    assert "stability checks skipped" in mem.detail["memory_plan"]["notes"][1]
    assert mem.stability_case(cases, ()) is None   # a problem without stability checks: nothing to note
    assert len(mem.detail["memory_plan"]["notes"]) == 2


def test_out_of_memory_in_the_candidates_reply_is_its_crash_and_in_a_reference_runners_the_harness_failure():
    """The judge's `Conversation.ask`: whatever the candidate's runner replies is the candidate's word, so its
    out-of-memory text (receiving inputs, in a timed batch, in a graph capture or a call) is its crash, never the
    judge's uncharged failure (fixtures round3/forged_oom, forged_oom_count forged it); a reference runner, which
    never loads candidate code, out of memory is harness_error."""
    from kernelsearch.judge.conversation import Conversation
    from kernelsearch.judge.memory import JudgeMemory
    from kernelsearch.judge.settings import EvalSettings
    from kernelsearch.judge.status import CandidateFailure, HarnessFailure

    class Runner:
        def __init__(self, name):
            self.name = name

        def request(self, header, buffers=None):
            return {"error": {"type": "OutOfMemoryError", "text": OOM, "tb": ""}}, []

    cand, ref = Runner("candidate"), Runner("reference")
    talk = Conversation(None, EvalSettings(), mode="cuda", spawn=lambda role: cand, mem=JudgeMemory({}, "cuda", 64))
    talk.cand = cand
    for op in ("inputs", "batch", "graph", "call"):
        with pytest.raises(CandidateFailure) as err:
            talk.ask(cand, {"op": op, "slot": 0}, f"op {op}", "timing")
        assert err.value.status == "crash" and not isinstance(err.value, HarnessFailure), op
    for op in ("inputs", "batch", "call"):
        with pytest.raises(HarnessFailure):
            talk.ask(ref, {"op": op, "slot": 0}, f"op {op}", "timing")


def test_a_third_timed_side_is_counted_by_the_gate_and_by_the_fit(tmp_path):
    """torch.compile's reference (compare_compile, on by default for `bench`) is a third timed side: the pool's gate
    counts its inputs and outputs, and one call on three sides that does not fit where two do drops it (clock.py),
    seen on an H100 with KernelBench's 6 GiB elementwise inputs."""
    from kernelsearch.judge.memory import TIMING_MARGIN, calls_that_fit, footprint_bytes

    path = tmp_path / "big.py"
    path.write_text("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return torch.sigmoid(x)\n\ndef get_inputs():\n    return [torch.rand(1024, 1024)]\n\n"
                    "def get_init_inputs():\n    return []\n")
    ref = {"file": str(path)}
    two, three = footprint_bytes(ref), footprint_bytes(ref, 3)
    assert three - two == 2 * 1024 * 1024 * 4   # one more copy of the inputs and of the outputs
    gib = 2**30
    free = int((6 + 18 + 2 * 12 + 6) / TIMING_MARGIN * gib)   # the check, two sides of one call, and 6 GiB spare
    assert calls_that_fit(6 * gib, 6 * gib, 2, free) == 1 and calls_that_fit(6 * gib, 6 * gib, 3, free) == 0
