"""The generated convolution family (generators/conv.py, matched_conv.py): 1-D, 2-D and 3-D convolutions, strided,
padded, dilated, grouped, depthwise and transposed, matched from the traced reference; both kernels (implicit GEMM
and direct) agree with torch on the interpreter with the reference's weights moved off their initial values; the
arguments are the candidate's own module's; the judge passes the first kernel and fails wrong ones; graphs just
outside the pattern are not matched."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.generators.matched_conv import match_conv
from kernelsearch.generators.trace import trace_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.problem import load_source_module
from kernelsearch.judge.settings import EvalSettings
from tests.generators.test_match import FIXTURES, _agrees, _load, _n, _problem

_INIT = ("    def __init__(self, {sig}):\n        super(Model, self).__init__()\n"
         "        self.conv = nn.{cls}({call})\n    def forward(self, x):\n        return self.conv(x)")


def _conv(tmp_path, name, cls, sig, call, init, shape, sizes="batch = 2"):
    return _problem(tmp_path, name, _INIT.format(sig=sig, cls=cls, call=call), f"[torch.randn({shape})]",
                    init=init, sizes=sizes)


CASES = [   # name, class, constructor signature and call, init inputs, input shape, summary
    ("conv2d", "Conv2d", "c, o, k", "c, o, k, stride=2, padding=1, dilation=2, bias=True", "[4, 8, 3]",
     "batch, 4, 11, 13", "convolution 2-D of 2x4x11x13 float32 (kernel 3, stride 2, padding 1, dilation 2, bias) "
     "-> 2x8x5x6"),
    ("conv2d_groups", "Conv2d", "c, o", "c, o, (3, 2), stride=(1, 2), padding=(2, 1), groups=2, bias=False",
     "[4, 6]", "batch, 4, 9, 10", "convolution 2-D of 2x4x9x10 float32 (kernel 3x2, stride 1x2, padding 2x1, "
     "groups 2) -> 2x6x11x6"),
    ("depthwise", "Conv2d", "c, k", "c, c, k, padding=1, groups=c", "[5, 3]", "batch, 5, 9, 10",
     "convolution 2-D of 2x5x9x10 float32 (kernel 3, stride 1, padding 1, depthwise, bias) -> 2x5x9x10"),
    ("conv1d", "Conv1d", "c, o, k", "c, o, k, stride=3, dilation=2, bias=False", "[3, 20, 3]", "batch, 3, 31",
     "convolution 1-D of 2x3x31 float32 (kernel 3, stride 3, padding 0, dilation 2) -> 2x20x9"),
    ("conv3d", "Conv3d", "c, o, k", "c, o, k, padding=1", "[2, 9, 3]", "1, 2, 3, 4, 5",
     "convolution 3-D of 1x2x3x4x5 float32 (kernel 3, stride 1, padding 1, bias) -> 1x9x3x4x5"),
    ("transposed2d", "ConvTranspose2d", "c, o, k", "c, o, k, stride=2, padding=1, output_padding=1, dilation=2, "
     "groups=2", "[4, 6, 3]", "batch, 4, 5, 7", "transposed convolution 2-D of 2x4x5x7 float32 (kernel 3, stride 2, "
     "padding 1, dilation 2, groups 2, output_padding 1, bias) -> 2x6x12x16"),
    ("transposed1d", "ConvTranspose1d", "c, o, k", "c, o, k, stride=3, padding=2, bias=False", "[3, 20, 5]",
     "batch, 3, 11", "transposed convolution 1-D of 2x3x11 float32 (kernel 5, stride 3, padding 2) -> 2x20x31"),
    ("transposed3d", "ConvTranspose3d", "c, o, k", "c, o, k, stride=2, padding=1", "[2, 17, 3]", "1, 2, 2, 3, 3",
     "transposed convolution 3-D of 1x2x2x3x3 float32 (kernel 3, stride 2, padding 1, bias) -> 1x17x3x5x5"),
]


@pytest.mark.parametrize("name,cls,sig,call,init,shape,summary", CASES, ids=[c[0] for c in CASES])
def test_convolutions_are_matched_and_both_kernels_agree(tmp_path, name, cls, sig, call, init, shape, summary):
    problem = _conv(tmp_path, name, cls, sig, call, init, shape)
    m = match_problem(problem)
    assert (m.kind, m.summary) == ("conv", summary)
    case = next(c for c in problem.cases if c.timed)
    s = m.space
    other = {**s.default, "variant": "direct"} if s.default["variant"] == "igemm" else \
        {**s.default, "variant": "igemm", "BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 16, "num_warps": 2}
    for p in (s.default, other):
        _agrees(problem, s.render(p), case=case, atol=1e-4, rtol=1e-4, perturb=True)
    assert all(s.feasible(new) for _, new in s.applicable(s.default))


def test_the_start_fits_the_shape():
    """Depthwise (one channel a group) starts from the direct kernel; a wide convolution from the implicit GEMM with
    a channel tile no wider than its channels."""
    from kernelsearch.generators.conv import Conv, start_point

    dw = Conv(2, (1, 1), (0, 0), (1, 1), 64, False, (0, 0), (16, 64, 512, 512), (64, 1, 3, 3), (16, 64, 510, 510),
              torch.float32, False)
    assert start_point(dw)["variant"] == "direct"
    wide = Conv(2, (1, 1), (0, 0), (1, 1), 1, False, (0, 0), (8, 64, 512, 1024), (128, 64, 3, 3),
                (8, 128, 510, 1022), torch.float32, False)
    p = start_point(wide)
    assert (p["variant"], p["BLOCK_N"], p["BLOCK_K"], p["precision"]) == ("igemm", 128, 32, "tf32x3")
    few = Conv(2, (1, 1), (0, 0), (1, 1), 1, False, (0, 0), (8, 3, 32, 32), (24, 3, 1, 1), (8, 24, 32, 32),
               torch.float32, False)
    assert start_point(few)["BLOCK_N"] == 32 and start_point(few)["BLOCK_K"] == 16
    assert start_point(few)["precision"] == "ieee"   # K = 3: too short for the tensor cores' tile


def test_the_arguments_are_the_candidates_module_s_and_a_functional_call_is_baked(tmp_path):
    # a case that builds the model with another stride and kernel convolves with those, not the traced ones
    problem = _conv(tmp_path, "args", "Conv2d", "c, o, k, s", "c, o, k, stride=s", "[3, 16, 3, 1]", "batch, 3, 9, 9")
    m = match_problem(problem)
    code = m.space.render(m.space.default)
    assert "conv(x, self.conv.weight, self.conv.bias, _conv_params(self.conv))" in code
    mod = load_source_module(code, f"ks_test_conv_{next(_n)}")
    x = torch.randn(2, 3, 12, 11)
    for k, s in ((5, 2), (2, 3)):
        torch.manual_seed(0)
        ref = torch.nn.Conv2d(3, 16, k, stride=s)
        new = mod.ModelNew(3, 16, k, s)
        new.load_state_dict({f"conv.{n}": v for n, v in ref.state_dict().items()})
        with torch.no_grad():
            torch.testing.assert_close(new(x), ref(x), atol=1e-4, rtol=1e-4)

    fn = _problem(tmp_path, "conv_fn", "    def __init__(self):\n        super().__init__()\n"
                  "        self.weight = nn.Parameter(torch.randn(8, 2, 3))\n"
                  "    def forward(self, x):\n        return torch.nn.functional.conv1d(x, self.weight, stride=2, "
                  "padding=1, groups=2)", "[torch.randn(batch, 4, 19)]", sizes="batch = 2")
    m = match_problem(fn)
    code = m.space.render(m.space.default)
    assert "self._conv = ((2,), (1,), (1,), 2, False, (0,))" in code
    _agrees(fn, code, case=next(c for c in fn.cases if c.timed), perturb=True)


def test_a_convolution_then_elementwise_ops_is_two_kernels_that_agree(tmp_path):
    body = ("    def __init__(self, c, o, k):\n        super().__init__()\n        self.conv = nn.Conv2d(c, o, k)\n"
            "        self.bias = nn.Parameter(torch.randn(o, 1, 1))\n"
            "    def forward(self, x):\n        return torch.relu(self.conv(x) + self.bias) * 0.5")
    problem = _problem(tmp_path, "conv_relu", body, "[torch.randn(batch, 3, 8, 9)]", init="[3, 16, 3]",
                       sizes="batch = 2")
    m = match_problem(problem)
    assert m.kind == "conv_epilogue" and "then elementwise add -> relu -> mul" in m.summary
    _agrees(problem, m.space.render(m.space.default), case=next(c for c in problem.cases if c.timed), perturb=True)
    fixture = match_problem(_load(FIXTURES / "conv_relu.py"))   # nn.ReLU as a module after the convolution
    assert fixture.kind == "conv_epilogue" and fixture.summary.startswith("convolution 2-D of 8x3x32x32 float32")


def _judged(tmp_path):
    return _conv(tmp_path, "judged", "Conv2d", "c, o, k", "c, o, k, stride=2, padding=1, dilation=2, groups=2",
                 "[channels, 16, 3]", "batch, channels, h, w", sizes="batch = 2\nchannels = 4\nh = 11\nw = 13")


def test_the_first_kernel_is_ok_through_the_judge(tmp_path):
    problem = _judged(tmp_path)
    m = match_problem(problem)
    assert m.space.default["variant"] == "igemm"
    r = evaluate(problem, m.space.render(m.space.default), EvalSettings(trials=1, timing_iters=2, aot_compile=False),
                 mode="cpu", seed=3)
    assert r.status.value == "ok", (r.status, r.reason)


# wrong kernels: each edit breaks one thing a correct convolution needs
WRONG = [
    ("the padding forgotten", "i = o * S - P + k * L", "i = o * S + k * L"),
    ("the dilation forgotten", "i = o * S - P + k * L", "i = o * S - P + k"),
    ("every group reads the first group's channels", "x_base = (n * C + g * CG) * plane", "x_base = n * C * plane"),
    ("a transposed tap between strides not masked", "ok = (t >= 0) & (t - i * S == 0) & (i < I)",
     "ok = (t >= 0) & (i < I)"),
    ("the bias not added", "acc += tl.load(b_ptr + oc, mask=n_ok", "acc += 0 * tl.load(b_ptr + oc, mask=n_ok"),
]


@pytest.mark.parametrize("why,old,new", WRONG, ids=[w[0] for w in WRONG])
def test_a_wrong_kernel_fails(tmp_path, why, old, new):
    call = "c, o, k, stride=2, padding=1, dilation=2, groups=2, bias=True"
    cls = "ConvTranspose2d" if "transposed" in why else "Conv2d"
    problem = _conv(tmp_path, "wrong", cls, "c, o, k", call, "[4, 16, 3]", "batch, 4, 9, 10")
    m = match_problem(problem)
    code = m.space.render({**m.space.default, "variant": "igemm"})
    assert old in code
    with pytest.raises(AssertionError):
        _agrees(problem, code.replace(old, new), case=next(c for c in problem.cases if c.timed), perturb=True)


def test_a_wrong_kernel_is_incorrect_through_the_judge(tmp_path):
    problem = _judged(tmp_path)
    m = match_problem(problem)
    wrong = m.space.render(m.space.default).replace("i = o * S - P + k * L", "i = o * S + k * L")
    r = evaluate(problem, wrong, EvalSettings(trials=1, timing_iters=2, aot_compile=False), mode="cpu", seed=3)
    assert r.status.value == "incorrect", (r.status, r.reason)


def test_graphs_just_outside_the_pattern_are_not_matched(tmp_path):
    two = _problem(tmp_path, "two_convs", "    def __init__(self):\n        super().__init__()\n"
                   "        self.a = nn.Conv2d(3, 8, 3)\n        self.b = nn.Conv2d(8, 8, 3)\n"
                   "    def forward(self, x):\n        return self.b(self.a(x))", "[torch.randn(batch, 3, 12, 12)]",
                   sizes="batch = 2")
    assert match_conv(trace_problem(two)) is None
    with pytest.raises(Unmatched, match="convolution"):
        match_problem(two)
    circular = _conv(tmp_path, "circular", "Conv2d", "c", "c, 8, 3, padding=1, padding_mode='circular'", "[3]",
                     "batch, 3, 10, 10")
    assert match_conv(trace_problem(circular)) is None   # the wrap-around padding is an op of its own
    weight_arg = _problem(tmp_path, "weight_arg", "    def forward(self, x, w):\n        return "
                          "torch.nn.functional.conv2d(x, w)", "[torch.randn(batch, 3, 8, 8), torch.randn(4, 3, 3, 3)]",
                          sizes="batch = 2")
    assert match_conv(trace_problem(weight_arg)) is None   # the weight is an input, not a parameter
    pooled = _problem(tmp_path, "conv_pool", "    def __init__(self):\n        super().__init__()\n"
                      "        self.conv = nn.Conv2d(3, 8, 3)\n    def forward(self, x):\n        return "
                      "torch.nn.functional.max_pool2d(self.conv(x), 2)", "[torch.randn(batch, 3, 10, 10)]",
                      sizes="batch = 2")
    assert match_conv(trace_problem(pooled)) is None   # a pooling after it is not elementwise
