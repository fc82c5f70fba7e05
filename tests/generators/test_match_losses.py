"""The generated loss family (generators/losses.py): elementwise ops, one sum or mean of every element, scalar ops,
on KernelBench-format problems written here (level 1's MSE, Huber, KL-divergence and hinge losses and the Frobenius
normalisation, at interpreter sizes): what each is matched to, that the kernels agree with the reference at several
points of the space, that a wrong kernel does not, and what is not matched."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.generators.losses import match_loss_graph
from kernelsearch.generators.match import match_problem
from kernelsearch.generators.trace import trace_problem
from tests.generators.test_match import _agrees, _problem

_FWD = "    def forward(self, predictions, targets):\n        return {}"
_TWO = "[torch.rand(batch_size, *input_shape) * 0.5, torch.rand(batch_size, *input_shape)]"
_SIZES = "batch_size = 37\ninput_shape = (301,)"


def _points(space):
    return [space.default, {"BLOCK": 1024, "num_warps": 4, "programs_per_sm": 1},
            {"BLOCK": 2048, "num_warps": 2, "programs_per_sm": 16}]


def _every_case(problem, code, **kw):
    # (every case: the problems here are interpreter-sized at their own sizes too, and the smallest derived case
    # can be shorter than BLOCK, leaving a sweep untried)
    for case in problem.cases:
        _agrees(problem, code, case=case, **kw)


def test_mse_and_huber_losses_are_one_two_pass_reduction_and_agree(tmp_path):
    mse = _problem(tmp_path, "mse", _FWD.format("torch.mean((predictions - targets) ** 2)"), _TWO, sizes=_SIZES)
    m = match_problem(mse)
    assert (m.kind, m.summary) == ("loss", "mean of elementwise sub -> pow over 37x301 float32")
    for p in _points(m.space):
        _agrees(mse, m.space.render(p))
    huber = _problem(tmp_path, "huber", _FWD.format("torch.nn.functional.smooth_l1_loss(predictions, targets)"),
                     "[torch.randn(batch_size, *input_shape), torch.randn(batch_size, *input_shape)]", sizes=_SIZES)
    m = match_problem(huber)
    assert m.kind == "loss" and m.summary.startswith("mean of elementwise sub -> abs -> lt")
    code = m.space.render(m.space.default)
    _every_case(huber, code)
    _agrees(huber, m.space.render(_points(m.space)[1]))
    # the mean divides by every element, not by the last block's: dropping the division fails
    assert "x0 = total / n" in code
    with pytest.raises(AssertionError):
        _agrees(huber, code.replace("x0 = total / n", "x0 = total"))


def test_kl_div_batchmean_divides_by_the_batch_read_at_run_time(tmp_path):
    # the trace bakes size(0) into the division at the problem's shape; the cases here have other batch sizes
    kl = _problem(tmp_path, "kl", _FWD.format(
        "torch.nn.functional.kl_div(torch.log(predictions), targets, reduction='batchmean')"),
        "[torch.rand(batch_size, *input_shape).softmax(dim=-1), torch.rand(batch_size, *input_shape).softmax(dim=-1)]",
        sizes="batch_size = 301\ninput_shape = (301,)")
    m = match_problem(kl)
    assert m.kind == "loss" and m.summary.endswith("over 301x301 float32, then div")
    code = m.space.render(m.space.default)
    assert "(x0 / d0)" in code and "x0.shape[0]" in code
    assert {c.params["batch_size"] for c in kl.cases_for("cpu")} != {301}
    _every_case(kl, code)
    _agrees(kl, m.space.render(_points(m.space)[2]))
    # xlogy's zero: a target of 0 contributes 0, not 0 * log(0) = NaN
    x = torch.rand(5, 301).softmax(-1)
    t = torch.rand(5, 301).softmax(-1)
    t[:, :7] = 0
    from kernelsearch.judge.problem import load_source_module

    got = load_source_module(code, "ks_test_loss_kl").ModelNew()(x, t)
    want = kl.module.Model()(x, t)
    torch.testing.assert_close(got, want)


def test_hinge_loss_reads_its_broadcast_target_by_column(tmp_path):
    hinge = _problem(tmp_path, "hinge", _FWD.format("torch.mean(torch.clamp(1 - predictions * targets, min=0))"),
                     "[torch.randn(batch_size, *input_shape), torch.randint(0, 2, (input_shape[0],)).float() * 2 - 1]",
                     sizes="batch_size = 29\ninput_shape = (1500,)")
    m = match_problem(hinge)
    assert (m.kind, m.summary) == ("loss", "mean of elementwise mul -> rsub -> clamp over 29x1500 float32")
    code = m.space.render(m.space.default)
    assert "start % n_cols + lanes" in code
    # 1500 columns: one wrap a block at 1024, several at 4096 (the remainder a lane)
    for p in _points(m.space):
        _every_case(hinge, m.space.render(p))
    # masked lanes compute clamp(1 - 0 * 0, 0) = 1: without the mask on the sum the mean is off
    with pytest.raises(AssertionError):
        _agrees(hinge, code.replace("acc += tl.where(mask, v2, 0.0)", "acc += v2"))


def test_frobenius_normalisation_reduces_then_broadcasts_the_norm(tmp_path):
    fro = _problem(tmp_path, "fro", "    def forward(self, x):\n        norm = torch.norm(x, p='fro')\n"
                   "        return x / norm", "[torch.rand(batch_size, features, dim1, dim2)]",
                   sizes="batch_size = 3\nfeatures = 4\ndim1 = 17\ndim2 = 19")
    m = match_problem(fro)
    assert m.kind == "global_norm" and m.summary == \
        "sum of elementwise pow over 3x4x17x19 float32, then pow -> div broadcast over 3x4x17x19"
    code = m.space.render(m.space.default)
    assert "r = reduce_all(x)" in code and "return pointwise(x, r)" in code
    for p in _points(m.space):
        _every_case(fro, m.space.render(p))


def test_space_limits_and_what_is_not_matched(tmp_path):
    mse = _problem(tmp_path, "mse2", _FWD.format("((predictions - targets) ** 2).sum() * 0.5"), _TWO, sizes=_SIZES)
    m = match_problem(mse)
    assert m.summary == "sum of elementwise sub -> pow over 37x301 float32, then mul"
    _agrees(mse, m.space.render(m.space.default))
    # (sm_90 compiles: 128 values a thread of two inputs spill, 64 do not)
    assert m.space.infeasible({**m.space.default, "BLOCK": 8192, "num_warps": 2})
    assert m.space.infeasible({**m.space.default, "BLOCK": 8192, "num_warps": 4}) is None
    assert m.space.infeasible({**m.space.default, "BLOCK": 1024, "num_warps": 16}) is None
    for move, new in m.space.applicable(m.space.default):
        assert m.space.feasible(new), move.title
    # a mean along one dim is not a full reduction
    rows = _problem(tmp_path, "rowmean", _FWD.format("torch.mean((predictions - targets) ** 2, dim=1)"), _TWO,
                    sizes=_SIZES)
    assert match_loss_graph(trace_problem(rows)) is None
    # a reduction whose result meets an elementwise result of before it (x * 2 is not recomputed after the sum)
    mixed = _problem(tmp_path, "centered", "    def forward(self, x):\n        y = x * 2\n"
                     "        return y - y.mean()", "[torch.rand(batch_size, *input_shape)]", sizes=_SIZES)
    assert match_loss_graph(trace_problem(mixed)) is None
    # two reductions
    two = _problem(tmp_path, "two", _FWD.format("predictions.sum() + targets.mean()"), _TWO, sizes=_SIZES)
    assert match_loss_graph(trace_problem(two)) is None


def test_row_norms_reduce_the_last_dim_then_scale_the_row(tmp_path):
    """x / mean(|x|, 1, keepdim) and x / ||x||_2 along dim 1: one program a row, the row whole in registers where
    it fits BLOCK, else two sweeps (the reduction, then the output)."""
    l1 = _problem(tmp_path, "l1", "    def forward(self, x):\n"
                  "        return x / torch.mean(torch.abs(x), dim=1, keepdim=True)",
                  "[torch.randn(batch_size, dim)]", sizes="batch_size = 7\ndim = 1501")
    m = match_problem(l1)
    assert (m.kind, m.summary) == \
        ("row_reduce_norm", "elementwise abs, mean along the last dim, then div: rows of 7x1501 float32")
    assert m.space.default == {"BLOCK": 2048, "num_warps": 2}       # the row whole in registers
    code = m.space.render(m.space.default)
    assert "return row_norm(x)" in code
    for p in ({"BLOCK": 2048, "num_warps": 2}, {"BLOCK": 512, "num_warps": 4}, {"BLOCK": 1024, "num_warps": 8}):
        _every_case(l1, m.space.render(p))
    # the mean divides by the row's length: a sum over the chunks of the last sweep only fails
    sweep = m.space.render({"BLOCK": 512, "num_warps": 4})
    with pytest.raises(AssertionError):
        _every_case(l1, sweep.replace("acc += tl.where(mask, av0, 0.0)", "acc = tl.where(mask, av0, 0.0)"))
    l2 = _problem(tmp_path, "l2", "    def forward(self, x):\n"
                  "        return x / torch.norm(x, p=2, dim=1, keepdim=True)",
                  "[torch.randn(batch_size, dim)]", sizes="batch_size = 5\ndim = 3000")
    m = match_problem(l2)
    assert m.kind == "row_reduce_norm" and "pow, sum along the last dim, then pow -> div" in m.summary
    for p in (m.space.default, {"BLOCK": 1024, "num_warps": 4}):
        _every_case(l2, m.space.render(p))
    assert m.space.infeasible({"BLOCK": 32768, "num_warps": 2})
    # along a middle dim: not this kernel's
    mid = _problem(tmp_path, "l1mid", "    def forward(self, x):\n"
                   "        return x / torch.mean(torch.abs(x), dim=1, keepdim=True)",
                   "[torch.randn(3, 40, 5)]")
    assert not any(m.kind == "row_reduce_norm" for m in _matches(mid))


def _matches(problem):
    try:
        return [match_problem(problem)]
    except Exception:   # noqa: BLE001 - unmatched is what is asserted
        return []
