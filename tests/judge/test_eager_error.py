"""Where a problem's tolerance is out of eager's own reach (an fp32 matmul with a long K against the float64
reference), the judge measures the candidate against eager's error instead (numerics.within_eager): an honest
fp32 summation order passes, TF32-rounded inputs and dropped work still fail, and where eager meets the tolerance a
failure stands. Then the same through the judge on a KernelBench-format problem file (CPU, interpreter)."""
from __future__ import annotations

import dataclasses
import textwrap

import pytest
import torch

from kernelsearch.judge.correctness import compare
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.numerics import within_eager
from kernelsearch.judge.problem import load_file
from kernelsearch.judge.settings import EvalSettings

ATOL, RTOL = 1e-5, 1e-4   # the default fp32 tolerance of a problem file


def _tf32(x: torch.Tensor) -> torch.Tensor:
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)   # 10 mantissa bits, as TF32 keeps


def _judge(got, want, hi):
    cmp = compare(got, want, hi, ATOL, RTOL)
    return cmp if cmp.ok else within_eager(got, want, hi, ATOL, RTOL, cmp)[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_long_k_matmul_is_judged_by_eager_error(seed):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(96, 2048, generator=g), torch.randn(2048, 80, generator=g)
    hi = a.double() @ b.double()
    want = a @ b
    assert not compare(want, want, hi, ATOL, RTOL).ok   # eager itself misses the tolerance here
    blocked = torch.zeros(96, 80)
    for k in range(0, 2048, 32):   # a tiled kernel's order: fp32 partial products accumulated per K step
        blocked += a[:, k:k + 32] @ b[k:k + 32]
    sequential = torch.zeros(96, 80)
    for k in range(2048):
        sequential += a[:, k:k + 1] * b[k]
    assert _judge(blocked, want, hi).ok
    assert _judge(sequential, want, hi).ok
    tf32 = _judge(_tf32(a) @ _tf32(b), want, hi)
    assert not tf32.ok and "eager misses this tolerance too" in tf32.reason
    assert not _judge(a[:, :-32] @ b[:-32], want, hi).ok   # the last K step skipped
    assert not _judge(a.bfloat16().float() @ b.bfloat16().float(), want, hi).ok


def test_a_failure_stands_where_eager_meets_the_tolerance():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 8, generator=g), torch.randn(8, 64, generator=g)
    hi = a.double() @ b.double()
    want = a @ b
    assert compare(want, want, hi, ATOL, RTOL).ok
    off = want.clone()
    off[0, 0] += 1e-3
    cmp = compare(off, want, hi, ATOL, RTOL)
    verdict, decided = within_eager(off, want, hi, ATOL, RTOL, cmp)
    assert not verdict.ok and decided is None


M, N, K = 64, 64, 4096

PROBLEM = textwrap.dedent(f"""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, A, B):
            return torch.matmul(A, B)


    M = {M}
    N = {N}
    K = {K}


    def get_inputs():
        return [torch.randn(M, K), torch.randn(K, N)]


    def get_init_inputs():
        return []
""")

KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            rk = k + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(PREP(a), PREP(b), input_precision="ieee")
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


    class ModelNew(torch.nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, A, B):
            A, B = A.contiguous(), B.contiguous()
            M, K = A.shape
            N = B.shape[1]
            C = torch.empty((M, N), device=A.device, dtype=torch.float32)
            _mm[(triton.cdiv(M, 32), triton.cdiv(N, 32))](A, B, C, M, N, K, BM=32, BN=32, BK=32)
            return C
""")
HONEST = KERNEL.replace("PREP(a)", "a").replace("PREP(b)", "b")
# TF32 by hand: the operands' low 13 mantissa bits cleared, the precision a TF32 tensor-core dot keeps
TF32 = KERNEL.replace("PREP(a)", "(a.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)") \
             .replace("PREP(b)", "(b.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)")


@pytest.fixture(scope="module")
def long_k(tmp_path_factory):
    path = tmp_path_factory.mktemp("problems") / "matmul_long_k.py"
    path.write_text(PROBLEM)
    problem = load_file(path)
    # its own size only, on the CPU too (the derived interpreter cases have K of 513 at most, where eager meets
    # the tolerance): 524K input elements, under the interpreter's bound
    own = [c for c in problem.cases if c.timed][0]
    return dataclasses.replace(problem, cases=[dataclasses.replace(own, cpu=True)])


@pytest.mark.slow   # about 20 s on 2 cores: two long-K matmul evaluations on the interpreter
def test_problem_file_honest_fp32_matmul_is_ok_and_tf32_is_not(long_k):
    s = EvalSettings(trials=1, aot_compile=False)
    r = evaluate(long_k, HONEST, s, mode="cpu", seed=5)
    assert r.status == "ok", r.reason
    judged = [c for c in r.detail["cases"] if c.get("judged_by") == "eager's own error"]
    assert judged, r.detail["cases"]   # the own-size case needed eager's error: the plain tolerance failed it
    bad = evaluate(long_k, TF32, s, mode="cpu", seed=5)
    assert bad.status == "incorrect", (bad.status, bad.reason)
    assert "eager misses this tolerance too" in bad.reason
