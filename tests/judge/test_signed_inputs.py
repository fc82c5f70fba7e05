"""The signed-input case (judge/variants.py): KernelBench files draw every input with `torch.rand`, all in
[0, 1), so a kernel checked only there is never asked about a negative value. Fixtures in tests/fixtures/signed/:
two cheats that pass every case the problem's own generator draws (a copy as ReLU; a matmul that rounds its fp32
operands to TF32) must come back incorrect on the signed case; honest kernels stay ok, including one that relies on
a structure the generator builds (symmetric B read as its transpose) and one whose reference is not defined on
negative values (the case skipped, and said so), and a running sum whose signed values cancel (judged normwise)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.variants import SIGNED_SCALE, one_signed, signed_inputs
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

FX = Path(__file__).resolve().parents[1] / "fixtures" / "signed"

PAIRS = {   # (problem, candidate)
    "relu_identity": ("relu_rand", "relu_identity"),
    "relu_honest": ("relu_rand", "relu_honest"),
    "tf32": ("matmul_rand", "matmul_tf32"),
    "matmul_honest": ("matmul_rand", "matmul_honest"),
    "symmetric_bt": ("symmetric_rand", "symmetric_bt"),
    "log_honest": ("log_rand", "log_honest"),
    "cumsum_honest": ("cumsum_rand", "cumsum_honest"),
}


@pytest.fixture(scope="module")
def results() -> dict:
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=2, evaluation=EvalSettings(
        trials=1, timeout_s=120, timing_iters=3, aot_compile=False)))

    async def go():
        return await asyncio.gather(*(pool.evaluate((FX / f"{c}.py").read_text(), {"file": str(FX / f"{p}.py")})
                                      for p, c in PAIRS.values()))
    try:
        return dict(zip(PAIRS, asyncio.run(go())))
    finally:
        pool.close()


@pytest.mark.parametrize("name", ["relu_identity", "tf32"])
def test_cheats_pass_the_drawn_cases_and_fail_the_signed_one(results, name):
    r = results[name]
    assert r.status.value == "incorrect", (r.status, r.reason)
    # every case the problem's generator draws was passed: the signed case is what caught it
    assert r.reason.startswith("signed-input case"), r.reason
    assert all(c["ok"] for c in r.detail["cases"]), r.detail["cases"]
    assert r.detail["signed"]["run"] and not r.detail["signed"]["ok"]


@pytest.mark.parametrize("name", ["relu_honest", "matmul_honest", "symmetric_bt"])
def test_honest_kernels_pass_the_signed_case(results, name):
    r = results[name]
    assert r.status.value == "ok", (r.status, r.reason)
    assert r.detail["signed"]["run"] and r.detail["signed"]["ok"]


def test_a_running_sum_that_cancels_is_judged_normwise(results):
    """An honest fp32 scan on signed values is off by eps x its history where the sum crosses zero: elementwise it
    fails (the CPU's eager cumsum accumulates in float64), normwise it is at fp32's level."""
    r = results["cumsum_honest"]
    assert r.status.value == "ok", (r.status, r.reason)
    signed = r.detail["signed"]
    assert signed["run"] and signed["ok"] and signed["max_rel"] > 1e-4, signed   # elementwise it fails
    # passed by eager's own error where that is the yardstick (numerics.within_eager: abs and normwise within 16x
    # eager's), else normwise at fp32's level
    assert signed.get("normwise", 0.0) < 1e-5, signed


def test_a_reference_undefined_on_negatives_skips_the_case_and_says_so(results):
    r = results["log_honest"]
    assert r.status.value == "ok", (r.status, r.reason)
    assert r.detail["signed"] == {"case": "own-only[; float32]", "run": False,
                                  "why": "the reference is not finite on signed inputs"}


def test_signed_inputs_keep_zeros_and_symmetry_and_leave_signed_ones():
    torch.manual_seed(0)
    tril = torch.rand(33, 33).tril()
    a = torch.rand(16, 16)
    sym = (a + a.T) / 2
    mixed = torch.randn(40)
    idx = torch.arange(10)
    out, changed = signed_inputs([tril, sym, mixed, idx, 3.0], seed=7)
    assert changed == [0, 1]
    assert torch.equal(out[0].abs(), tril * SIGNED_SCALE) and torch.equal(out[0], out[0].tril())
    assert (out[0] < 0).any() and (out[0] > 0).any()
    assert torch.equal(out[1], out[1].T) and (out[1] < 0).any()
    assert out[2] is mixed and out[3] is idx and out[4] == 3.0
    assert signed_inputs([mixed, idx], seed=7) is None
    assert not one_signed(torch.zeros(8)) and one_signed(-torch.rand(8)) and not one_signed(torch.ones(1))
    again, _ = signed_inputs([tril, sym], seed=7)
    assert torch.equal(again[0], out[0])   # the same seed, the same signs
