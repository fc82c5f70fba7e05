"""The matcher of a convolution (generators/conv.py's family): one aten.convolution of a forward argument by a
parameter weight (an nn.ConvNd / nn.ConvTransposeNd of the reference's constructor, or F.conv*d of a parameter),
1-3 spatial dims, optionally followed by elementwise ops on its output (level 2's Conv_X_Y: the convolution's
kernel, then one generated elementwise kernel, as the GEMM epilogue is matched in match.py).

What the candidate's forward does is read from the graph; the convolution's arguments are its own module's, read
when forward runs (`_conv_params(self.conv)`), so the derived cases that build the model with another stride or
kernel size convolve with those; a functional call has the traced values baked in.
"""
from __future__ import annotations

import re

import torch

from kernelsearch.generators.common import Match
from kernelsearch.generators.conv import Conv, conv_space
from kernelsearch.generators.pointwise import (
    DEFAULT,
    DEFAULT_INIT,
    FLOATS,
    NotPointwise,
    match_pointwise,
    render_kernel,
    self_attr,
)
from kernelsearch.generators.trace import Traced, meta, op_name, schema_args

_PASS = ("getitem", "clone", "alias", "detach")


def _ints(v, n: int) -> tuple:
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return tuple(int(e) for e in (v * n if len(v) == 1 else v))


def _module_of(traced: Traced, weight_name: str) -> str | None:
    """`self.conv` where the weight is `conv.weight` of an nn.ConvNd / nn.ConvTransposeNd the constructor builds."""
    if not weight_name.endswith(".weight"):
        return None
    mod = weight_name[: -len(".weight")]
    attr = self_attr(mod)
    src = traced.init_source or ""
    ctor = rf"{re.escape(attr)}\s*=\s*(?:torch\.)?nn\.Conv(?:Transpose)?[123]d\("
    return attr if re.search(ctor, src) else None


def conv_head(traced: Traced, computed: dict | None = None):
    """The graph's one convolution of a forward argument by a parameter weight, as (node, Conv, the candidate's
    constructor, forward's parameters, the host call computing it); None where the graph has none or several.
    `computed`: nodes computed before the convolution by the caller's kernels, each standing for a forward argument
    (an object with its kind "tensor", host variable name, shape and dtype), so the convolution may read one."""
    convs = [n for n in traced.ops if op_name(n) == "convolution"]
    if len(convs) != 1:
        return None
    node = convs[0]
    a = schema_args(node)
    x = traced.input_of(a["input"]) if isinstance(a["input"], torch.fx.Node) else None
    if x is None and computed and a["input"] in computed:
        x = computed[a["input"]]
    w = traced.input_of(a["weight"]) if isinstance(a["weight"], torch.fx.Node) else None
    bias_node = a.get("bias")
    b = traced.input_of(bias_node) if isinstance(bias_node, torch.fx.Node) else None
    if x is None or x.kind != "tensor" or x.dtype not in FLOATS or w is None or w.kind != "param" or \
            w.dtype != x.dtype or (bias_node is not None and (b is None or b.kind != "param")):
        return None
    nd = len(w.shape) - 2
    if nd not in (1, 2, 3) or len(x.shape) != nd + 2:
        return None
    y = meta(node)
    cv = Conv(nd, _ints(a["stride"], nd), _ints(a["padding"], nd), _ints(a["dilation"], nd), int(a["groups"]),
              bool(a["transposed"]), _ints(a["output_padding"], nd), tuple(x.shape), tuple(w.shape),
              tuple(y.shape), x.dtype, b is not None)
    module = _module_of(traced, w.name)
    init = (traced.init_source or DEFAULT_INIT).rstrip("\n")
    if module is not None:   # the module's own arguments, read when forward runs
        params = f"_conv_params({module})"
    else:                    # a functional call: the values traced at the problem's own case
        init += f"\n        self._conv = {cv.args()!r}"
        params = "self._conv"
    call = f"conv({x.name}, {self_attr(w.name)}, {self_attr(b.name) if b is not None else 'None'}, {params})"
    forward = ", ".join(traced.forward_args) or "*inputs"
    return node, cv, init, forward, call


def match_conv(traced: Traced) -> Match | None:
    """A convolution of one forward argument, alone or followed by elementwise ops; None where the graph is not."""
    head = conv_head(traced)
    if head is None:
        return None
    node, cv, init, forward, call = head

    rest = [n for n in traced.ops if n is not node and op_name(n) not in _PASS]
    out = traced.output
    while op_name(out) in _PASS and out is not node:
        out = out.args[0]
    if not rest and out is node:
        summary = cv.describe()
        return Match("conv", summary, conv_space(cv, init, forward, f"return {call}"))
    # the convolution, then elementwise ops on its output (the bias added in the convolution's kernel)
    try:
        pg = match_pointwise(traced, sources={node: ("y", None)}, skip=frozenset({node}))
    except NotPointwise:
        return None
    summary = (f"{cv.describe()}, then elementwise {' -> '.join(pg.ops)} (the generated convolution, then one "
               f"generated elementwise kernel)")
    args = ", ".join([o.expr for o in pg.operands] + pg.numbers)
    body = f"y = {call}\nreturn pointwise({args})"
    epilogue = render_kernel(pg, dict(DEFAULT), prefix="_pw")
    epilogue = epilogue.replace("import torch\nimport triton\nimport triton.language as tl\n", "", 1).strip("\n")
    return Match("conv_epilogue", summary, conv_space(cv, init, forward, body, helper=epilogue))
