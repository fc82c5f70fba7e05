"""Stability inputs: large, tiny, mixed-scale and equal-valued rows, at the problem's looser tolerance."""
from __future__ import annotations

import torch

from kernelsearch.evaluators.families.rmsnorm import STARTER as RMS_STARTER
from kernelsearch.evaluators.harness import Settings, evaluate, stability_inputs
from kernelsearch.evaluators.problem import load_problem


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
    honest = evaluate(problem, RMS_STARTER, Settings(mode="cpu", seed=1, trials=1, aot=False))
    assert honest["status"] == "ok", honest["reason"]
    r = evaluate(problem, no_eps, Settings(mode="cpu", seed=1, trials=1, aot=False))
    assert r["status"] == "incorrect"
    assert r["reason"].startswith("stability check (tiny inputs)")
    plain = [c for c in r["detail"]["cases"] if "tiny" not in c["case"]]
    assert plain and all(c["ok"] for c in plain)      # every plain case passed first
