"""generators/matched_batchnorm.py: batch norm in training mode (KernelBench 33 in kind), matched from
KernelBench-format problems written here: it agrees with the reference on the interpreter at several points, for
2-D, 3-D and 4-D inputs, with and without the affine parameters, through the judge too; the unbiased variance or the
wrong channel's weight fails; evaluation mode (running statistics) is not matched as it."""
from __future__ import annotations

import pytest

from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.settings import EvalSettings
from tests.generators.test_match import _agrees, _problem


def _bn(tmp_path, name: str, module: str, shape: str, sizes: str, extra: str = ""):
    body = ("    def __init__(self, features):\n        super().__init__()\n"
            f"        self.bn = nn.{module}(features{extra})\n"
            "    def forward(self, x):\n        return self.bn(x)")
    return _problem(tmp_path, name, body, f"[torch.rand({shape})]", init="[features]", sizes=sizes)


def test_batch_norm_2d_1d_3d_and_without_affine_agree_at_several_points(tmp_path):
    bn2 = _bn(tmp_path, "bn2d", "BatchNorm2d", "batch_size, features, h, w",
              "batch_size = 8\nfeatures = 12\nh = 10\nw = 14")
    m = match_problem(bn2)
    assert (m.kind, m.summary) == ("batch_norm", "batch norm (training mode) of 8x12x10x14 float32")
    for p in (m.space.default, {"CHUNK": 1024, "num_warps": 1}, {"CHUNK": 16384, "num_warps": 16}):
        _agrees(bn2, m.space.render(p), perturb=True)   # weight and bias moved off 1 and 0
    for name, module, shape, sizes, extra in (
            ("bn1d", "BatchNorm1d", "batch_size, features", "batch_size = 64\nfeatures = 24", ""),
            ("bn3d", "BatchNorm3d", "batch_size, features, d, d, d", "batch_size = 8\nfeatures = 10\nd = 9", ""),
            ("bn_plain", "BatchNorm2d", "batch_size, features, d, d", "batch_size = 8\nfeatures = 10\nd = 12",
             ", affine=False")):
        p = _bn(tmp_path, name, module, shape, sizes, extra)
        m = match_problem(p)
        assert m.kind == "batch_norm", name
        assert ("no affine" in m.summary) == (name == "bn_plain")
        _agrees(p, m.space.render(m.space.default), perturb=True)


def test_chunks_that_divide_an_image_take_the_aligned_path_and_agree(tmp_path):
    """32 x 32 images and chunks of 1024: each chunk one contiguous run of one image (ALIGNED), 4 images a channel."""
    p = _bn(tmp_path, "bn_aligned", "BatchNorm2d", "batch_size, features, h, h", "batch_size = 4\nfeatures = 3\nh = 32")
    m = match_problem(p)
    code = m.space.render({"CHUNK": 1024, "num_warps": 4})
    assert "aligned = hw % 1024 == 0" in code
    _agrees(p, code, case=p.timed_case, perturb=True)
    # the aligned offsets with the image index taken per chunk wrongly (the first image always) fail
    with pytest.raises(AssertionError):
        _agrees(p, code.replace("n = (k * CHUNK) // HW", "n = 0 * k"), case=p.timed_case, perturb=True)


def test_a_wrong_variance_or_channel_fails(tmp_path):
    p = _bn(tmp_path, "bn_wrong", "BatchNorm2d", "batch_size, features, h, h", "batch_size = 8\nfeatures = 12\nh = 10")
    code = match_problem(p).space.render(match_problem(p).space.default)
    unbiased = code.replace("var = (tl.sum(m2s, axis=0) + tl.sum(ns * dm * dm, axis=0)) / L",
                            "var = (tl.sum(m2s, axis=0) + tl.sum(ns * dm * dm, axis=0)) / (L - 1)")
    other_channel = code.replace("y * tl.load(w_ptr + ch)", "y * tl.load(w_ptr + (ch + 1) % C)")
    for wrong in (unbiased, other_channel):
        assert wrong != code
        with pytest.raises(AssertionError):
            _agrees(p, wrong, perturb=True)


def test_evaluation_mode_is_not_matched_as_training(tmp_path):
    body = ("    def __init__(self, features):\n        super().__init__()\n"
            "        self.bn = nn.BatchNorm2d(features)\n        self.bn.eval()\n"
            "    def forward(self, x):\n        return self.bn(x)")
    p = _problem(tmp_path, "bn_eval", body, "[torch.rand(batch_size, features, h, h)]", init="[features]",
                 sizes="batch_size = 8\nfeatures = 12\nh = 10")
    try:
        m = match_problem(p)
    except Unmatched:
        return
    assert m.kind != "batch_norm", m.summary


@pytest.mark.slow   # 7-10 s a call on a 2-core machine: CI runs it (make test-slow)
def test_the_offline_first_kernel_is_ok_through_the_judge(tmp_path):
    p = _bn(tmp_path, "bn_judged", "BatchNorm2d", "batch_size, features, h, h", "batch_size = 16\nfeatures = 8\nh = 16")
    m = match_problem(p)
    r = evaluate(p, m.space.render(m.space.default), EvalSettings(trials=1, timing_iters=2, aot_compile=False),
                 mode="cpu", seed=2)
    assert r.status.value == "ok", (r.status, r.reason)
