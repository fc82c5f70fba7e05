"""Stability inputs: large, tiny, mixed-scale and equal-valued rows, at the problem's looser tolerance."""
from __future__ import annotations

import torch

from kernelsearch.families import load_problem
from kernelsearch.families.rmsnorm import STARTER as RMS_STARTER
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.numerics import stability_inputs
from kernelsearch.judge.settings import EvalSettings


def test_transforms():
    x = torch.randn(4, 7)
    t = torch.tensor([1, 2])
    large, tiny, mixed, equal = (stability_inputs(n, [x, t], "float32", 0) for n in ("large", "tiny", "mixed", "equal"))
    assert torch.allclose(large[0], x * 1e3) and torch.allclose(tiny[0], x * 1e-4)
    assert torch.equal(large[1], t)                       # integer inputs are left alone
    ratio = (mixed[0] / x).abs().log10()
    assert ratio.min() >= -3 - 1e-5 and ratio.max() <= 3 + 1e-5 and ratio.std() > 0.5
    assert torch.equal(equal[0], x[:, :1].expand(4, 7))
    assert torch.allclose(stability_inputs("large", [x.half()], "float16", 0)[0].float(), (x.half() * 10).float())


def test_dropping_eps_passes_plain_inputs_but_fails_tiny_ones():
    """rsqrt(mean(x^2)) without eps is right for unit-scale inputs and wrong when mean(x^2) is near eps."""
    problem = load_problem("rmsnorm")
    no_eps = RMS_STARTER.replace("tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)",
                                 "tl.rsqrt(tl.sum(x * x, axis=1) / n_cols)")
    assert no_eps != RMS_STARTER
    honest = evaluate(problem, RMS_STARTER, EvalSettings(trials=1, aot_compile=False), mode="cpu", seed=1)
    assert honest.status == "ok", honest.reason
    r = evaluate(problem, no_eps, EvalSettings(trials=1, aot_compile=False), mode="cpu", seed=1)
    assert r.status == "incorrect"
    assert r.reason.startswith("stability check (tiny inputs)")
    plain = [c for c in r.detail["cases"] if "tiny" not in c["case"]]
    assert plain and all(c["ok"] for c in plain)      # every plain case passed first


def test_inputs_past_the_dtype_are_judged_against_eagers_own_error():
    """Where eager itself misses the tolerance (bf16 matmul on inputs x 1e3 on an H200), a candidate passes
    when its normwise error is within EAGER_SLACK of eager's, and fails when it is well beyond; NaN and shape
    failures are never excused."""
    from kernelsearch.judge.correctness import compare
    from kernelsearch.judge.numerics import EAGER_SLACK, _no_worse_than_eager

    gen = torch.Generator().manual_seed(0)
    exact = torch.randn(64, 96, generator=gen, dtype=torch.float64) * 1e3
    noise = torch.randn(64, 96, generator=gen, dtype=torch.float64)
    eager = (exact + 30 * noise).float()
    atol, rtol = 0.1, 0.16
    assert not compare(eager, eager, exact, atol, rtol).ok          # eager misses the tolerance here
    near = (exact + 30 * noise.roll(1, 0)).float()                  # as wrong as eager, elsewhere
    far = (exact + 30 * (EAGER_SLACK + 2) * noise.roll(1, 0)).float()
    nan = near.clone()
    nan[3, 5] = float("nan")
    for got, ok in ((near, True), (far, False), (nan, False), (near[:, :-1], False)):
        first = compare(got, eager, exact, atol, rtol)
        assert not first.ok
        assert _no_worse_than_eager(got, eager, exact, first).ok is ok
