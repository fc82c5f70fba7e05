"""generators/matched_triplet.py: the triplet margin loss (KernelBench 99 in kind), matched from KernelBench-format
problems written here: it agrees with the reference on the interpreter at several points, with the mean and the
sum and another margin, through the judge too; a wrong distance, a missing square root or a missing hinge fails;
a p = 1 loss or a swapped one is not matched as it."""
from __future__ import annotations

import pytest

from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.settings import EvalSettings
from tests.generators.test_match import _agrees, _problem

INPUTS = "[torch.rand(batch_size, dim) * 0.5, torch.rand(batch_size, dim), torch.rand(batch_size, dim)]"


def _triplet(tmp_path, name: str, args: str = "margin=margin", init: str = "[1.0]", dim: int = 300):
    body = ("    def __init__(self, margin=1.0):\n        super().__init__()\n"
            f"        self.loss_fn = torch.nn.TripletMarginLoss({args})\n"
            "    def forward(self, anchor, positive, negative):\n"
            "        return self.loss_fn(anchor, positive, negative)")
    return _problem(tmp_path, name, body, INPUTS, init=init, sizes=f"batch_size = 40\ndim = {dim}")


def test_the_triplet_loss_agrees_at_several_points_with_mean_and_sum(tmp_path):
    p = _triplet(tmp_path, "triplet")
    m = match_problem(p)
    assert (m.kind, m.summary) == ("triplet_loss", "triplet margin loss (margin 1, eps 1e-06, mean) of 40x300 float32 "
                                   "rows")
    for point in (m.space.default, {"BLOCK": 256, "num_warps": 1}, {"BLOCK": 8192, "num_warps": 16}):
        _agrees(p, m.space.render(point), atol=1e-5, rtol=1e-5)
    for name, args in (("triplet_sum", "margin=margin, reduction='sum'"), ("triplet_margin", "margin=0.3")):
        q = _triplet(tmp_path, name, args)
        mq = match_problem(q)
        assert mq.kind == "triplet_loss" and (("sum" in mq.summary) == (name == "triplet_sum"))
        _agrees(q, mq.space.render(mq.space.default), atol=1e-4, rtol=1e-5)


def test_a_wrong_distance_or_a_missing_hinge_fails(tmp_path):
    # a small margin: about half the rows' d+ - d- + margin is below zero, so the hinge decides (at margin 1 it never
    # does with these inputs; torch refuses a margin of 0)
    p = _triplet(tmp_path, "triplet_wrong", "margin=0.01")
    code = match_problem(p).space.render(match_problem(p).space.default)
    wrong = [code.replace("dp = tl.where(mask, a - p + eps, 0.0)", "dp = tl.where(mask, a - n + eps, 0.0)"),
             code.replace("tl.store(loss_ptr + row, tl.maximum(loss, 0.0))", "tl.store(loss_ptr + row, loss)"),
             code.replace("tl.sqrt(tl.sum(s_pos, axis=0))", "tl.sum(s_pos, axis=0)")]
    for w in wrong:
        assert w != code
        with pytest.raises(AssertionError):
            _agrees(p, w, atol=1e-5, rtol=1e-5)


def test_other_losses_are_not_matched_as_it(tmp_path):
    for name, args in (("triplet_p1", "margin=margin, p=1"), ("triplet_swap", "margin=margin, swap=True")):
        try:
            m = match_problem(_triplet(tmp_path, name, args))
        except Unmatched:
            continue
        assert m.kind != "triplet_loss", (name, m.summary)


@pytest.mark.slow   # 7-10 s a call on a 2-core machine: CI runs it (make test-slow)
def test_the_offline_first_kernel_is_ok_through_the_judge(tmp_path):
    p = _triplet(tmp_path, "triplet_judged", dim=1000)
    m = match_problem(p)
    r = evaluate(p, m.space.render(m.space.default), EvalSettings(trials=1, timing_iters=2, aot_compile=False),
                 mode="cpu", seed=6)
    assert r.status.value == "ok", (r.status, r.reason)
