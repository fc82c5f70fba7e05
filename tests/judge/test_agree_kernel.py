"""The timed outputs' one-pass check on a GPU (judge/agree.py) against the torch form it replaces
(correctness.agreement on the CPU): the same count of failing values, NaN and Inf included, for every dtype pair a
timed check meets. Run here through Triton's interpreter (the conftest sets it), and compiled for sm_90 in a process
without the interpreter, as the judge's process on an H100 compiles it."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from kernelsearch.judge.agree import BLOCK, count_over
from kernelsearch.judge.correctness import agreement

ATOL, RTOL = 1e-5, 1e-4
# the interpreter on CPU tensors here; on a GPU machine (no interpreter) the compiled kernel on the GPU's
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _torch_count(g, h, atol, rtol) -> int:
    """The torch form's test, value by value: a value fails where |g - h| - rtol*|h| <= atol is not true."""
    g32, h32 = g.reshape(-1).float(), h.reshape(-1).float()
    return int((~((g32 - h32).abs() - rtol * h32.abs() <= atol)).sum())


def _cases(dtype, hdtype, n):
    gen = torch.Generator().manual_seed(n)
    h = (torch.randn(n, generator=gen, dtype=torch.float64) * 3).to(hdtype)
    good = h.to(dtype)
    yield "same", good, h
    off = good.clone()
    off[[0, n // 2, n - 1]] += 1.0    # first, middle and last: the last sits in a partly masked block
    yield "three off", off, h
    nan = good.clone()
    nan[n // 3] = float("nan")
    yield "nan in g", nan, h
    h_nan = h.clone()
    h_nan[1] = float("nan")
    yield "nan in h", good, h_nan
    inf = good.clone()
    inf[2] = float("inf")
    yield "inf in g", inf, h
    h_inf, g_inf, g_minus = h.clone(), good.clone(), good.clone()
    h_inf[4], g_inf[4], g_minus[4] = float("inf"), float("inf"), float("-inf")
    yield "inf in h alone", good, h_inf
    yield "inf in both", g_inf, h_inf            # no quick yes: `compare` passes it (same Inf)
    yield "opposite infs", g_minus, h_inf
    edge = h.to(torch.float32) + (ATOL * 0.5)
    yield "within atol", edge.to(dtype), h


@pytest.mark.parametrize("dtype, hdtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                           (torch.float16, torch.float32), (torch.bfloat16, torch.float64)])
@pytest.mark.parametrize("n", [5, 1000, 2 * BLOCK + 7])
def test_the_kernel_counts_what_the_torch_form_counts(dtype, hdtype, n):
    tol = (ATOL, RTOL) if dtype == torch.float32 else (1e-2, 1e-2)
    seen = set()
    for name, g, h in _cases(dtype, hdtype, n):
        g, h = g.to(DEVICE), h.to(DEVICE)
        got = int(count_over(g, h, *tol)[0])
        assert got == _torch_count(g, h, *tol), (name, dtype, hdtype, n)
        # and the quick yes the judge reads is the torch form's
        assert (got == 0) is bool(agreement(g, g, h, *tol)), (name, dtype, hdtype, n)
        seen.add(got == 0)
    assert seen == {True, False}   # the cases include both answers


def test_an_empty_output_agrees_and_a_reference_of_another_shape_goes_to_compare():
    assert int(count_over(torch.zeros(0, device=DEVICE), torch.zeros(0, device=DEVICE), ATOL, RTOL)[0]) == 0
    h = torch.randn(8, 8, device=DEVICE)
    assert agreement(h, h, h.reshape(64), ATOL, RTOL) is None   # never a read past the reference's end


SM90 = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernelsearch.judge.agree import _count_over
for g, h in (("*bf16", "*bf16"), ("*fp32", "*fp32"), ("*fp16", "*fp32"), ("*bf16", "*fp64")):
    sig = {"g_ptr": g, "h_ptr": h, "bad_ptr": "*i64", "n": "i64", "atol": "fp32", "rtol": "fp32", "BLOCK": "constexpr"}
    k = triton.compile(ASTSource(fn=_count_over, signature=sig, constexprs={"BLOCK": 4096}),
                       target=GPUTarget("cuda", 90, 32))
    ptx = k.asm["ptx"]
    print(g, h, "atom.global" in ptx and "ld.global" in ptx)
"""


def test_the_kernel_compiles_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", SM90], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:4] == [f"{g} {h} True" for g, h in (("*bf16", "*bf16"), ("*fp32", "*fp32"),
                                                                        ("*fp16", "*fp32"), ("*bf16", "*fp64"))]


def test_agreement_runs_the_kernel_where_told_and_falls_back_to_torch_if_it_fails(monkeypatch):
    from kernelsearch.judge import agree, correctness

    h = torch.randn(3000, device=DEVICE)   # on a GPU machine the compiled kernel on CUDA tensors (no interpreter)
    bad = h.clone()
    bad[-1] += 1.0
    monkeypatch.setattr(correctness, "ONE_PASS_DEVICES", {"cpu", "cuda"})
    monkeypatch.setattr(correctness, "_ONE_PASS", [True])
    monkeypatch.setattr(correctness, "_ONE_PASS_ERRORS", [])
    launched = []
    real = agree.count_over
    monkeypatch.setattr(agree, "count_over", lambda *a: launched.append(1) or real(*a))
    assert bool(agreement(h, h, h, ATOL, RTOL)) and not bool(agreement(bad, h, h, ATOL, RTOL))
    assert len(launched) == 2   # the kernel answered both (under the interpreter on the CPU)

    def broken(*a):
        raise RuntimeError("no launcher here")

    monkeypatch.setattr(agree, "count_over", broken)
    assert bool(agreement(h, h, h, ATOL, RTOL)) and not bool(agreement(bad, h, h, ATOL, RTOL))   # the torch form
    assert correctness._ONE_PASS == [] and correctness._ONE_PASS_ERRORS == ["RuntimeError: no launcher here"]


def test_the_first_check_waits_for_the_warm_up_behind_it(monkeypatch):
    """The judge compiles the kernel in a thread while the runner compiles (agree.warm_behind); the first check
    waits for that thread instead of compiling the same kernel beside it."""
    from kernelsearch.judge import agree

    done = []
    monkeypatch.setattr(agree, "_warm", lambda dtypes: (time.sleep(0.3), done.append(dtypes)))
    t0 = time.monotonic()
    agree.warm_behind((torch.float32,))
    h = torch.randn(100, device=DEVICE)
    assert int(count_over(h, h, ATOL, RTOL)[0]) == 0
    assert done == [(torch.float32,)] and time.monotonic() - t0 >= 0.3   # after the warm-up ended, not beside it
    assert agree._WARMING == []


def test_a_warm_up_that_cannot_compile_stops_quietly(monkeypatch):
    """Best effort: where the kernel cannot be compiled ahead (no GPU driver, a dtype Triton cannot load), the warm-up
    stops at the first failure and raises nothing; the first real call compiles it or agreement falls back."""
    from kernelsearch.judge import agree

    tried = []

    class Broken:
        def warmup(self, *args, **kwargs):
            tried.append(args[0])
            raise RuntimeError("0 active drivers")

    monkeypatch.setattr(agree, "_count_over", Broken())
    assert agree._warm((torch.float32, torch.bfloat16)) is None
    assert tried == [torch.float32]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU only: the compile ahead needs Triton's CUDA driver")
def test_the_warm_up_compiles_what_the_first_checks_launch():
    """The kernels warmed (dtype pairs of one dtype, element counts a multiple of 16 and not) are the ones a real
    check looks up: no new compile at the first call of each."""
    from kernelsearch.judge import agree

    cache = agree._count_over.device_caches[torch.cuda.current_device()][0]
    cache.clear()   # what earlier tests compiled in this process: looked up again from the disk cache
    agree.warm_behind()
    agree._WARMING[-1].join()
    warmed = len(cache)
    assert warmed == 2 * len(agree.WARM_DTYPES)
    for dtype in agree.WARM_DTYPES:
        for n in (4096 * 5, 4099 * 3):
            h = torch.randn(n, device="cuda").to(dtype)
            assert int(count_over(h, h, ATOL, RTOL)[0]) == 0
    assert len(cache) == warmed
