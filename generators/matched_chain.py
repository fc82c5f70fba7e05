"""Level-2 chains: a convolution or a linear layer, then elementwise ops, group norm, batch norm (training mode, as the
judge runs the reference), instance norm, layer norm, max / average pooling (1-3 D), softmax along one dim, reductions
of consecutive dims (sum, mean, max, min, logsumexp) and, after a linear head, more linear layers, in any order after
the head (KernelBench level 2's Conv2d_GroupNorm_*, Gemm_BatchNorm_*, Conv2d_Min_*, Conv2d_*_MaxPool_*,
Conv3d_Softmax_*, Gemm_LogSumExp_*, ConvTranspose3d_LayerNorm_*, Gemm_Sigmoid_LogSumExp, ...).

Nothing is fused: the chain is the existing generated kernels run one after the other on the previous one's output,
each a stage of the candidate's forward:
- the head: the generated convolution (conv.py, its search space: the space of the whole chain), or the matmul
  family's GEMM (its template and space, at the problem's M, N, K), whose bias is added by the first elementwise
  kernel;
- each run of elementwise ops between two stages: one generated elementwise kernel (pointwise.py) at the family's
  default;
- group norm and instance norm: matched_extra.py's row normalisation; batch norm: matched_batchnorm.py's
  per-channel one; each at its default chunk (4096 values on 8 warps);
- pooling: the generated pooling kernel (pooling.py) at its default, the pooling's arguments the constructor's
  nn.XxxPoolNd call's where it has one (else the traced values); a reduction: generators/reduction.py's kernel, the
  reduced dims flattened into one, at its default tile (logsumexp: its running maximum and sum of exp(x - maximum),
  any length, -inf / inf as torch's); softmax: the softmax family's kernel at its starter for the shape (the dim
  moved last where it is not; over trailing dims viewed as one and viewed back: over the flattened dims); layer norm
  over the trailing normalized_shape: the layernorm family's kernel at its
  starter for the rows x cols (its Welford sweep where a row is past the registers' variant; no weight / bias: ones
  / zeros made at the call). A stage is read through the unsqueezes and squeezes around it (views in its call: 1-D
  pooling of a GEMM's rows);
- a later linear layer (x @ W.t() of a parameter W) after a GEMM head: the head's `matmul` at the head's parameters,
  its bias added by the elementwise kernel after it;
- a pooling of a forward argument that the convolution reads (ConvTranspose3d_AvgPool_*): the pooling kernel first,
  the convolution on its output.
Only the head's parameters are searched; the stages stay at their starters. Batch norm of a GEMM's (N, C) output
reads each channel with a stride of C (matched_batchnorm.py's kernel, made for N x C x H x W): correct, not fast.
Every stage's output makes one round trip through memory. An elementwise run may read, besides its input, any earlier
stage's input or output (a residual add across a normalisation, x - mean(x)), or a copy of a forward argument made
before the head (x.clone().detach() for a residual add), not a value inside an earlier run. A chain of no stage but
elementwise ops is matched_conv's or match.py's (one epilogue kernel). Two heads side by side (a stage reading
anything but the chain), a linear layer after a convolution, or dropout (random in training mode, as the judge runs
the reference) are not matched here.
This module runs to about 600 lines because each kind of stage is read from the graph and written as host code in
one place (its reader beside its writer); split by stage, the graph walk that orders them would be spread over files.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import torch

from kernelsearch.families.space import fill
from kernelsearch.generators.common import Match, adapted_space, shape_text, with_helper
from kernelsearch.generators.conv import conv_space
from kernelsearch.generators.matched_batchnorm import _BN, _BN_STATS
from kernelsearch.generators.matched_conv import conv_head
from kernelsearch.generators.matched_extra import _NORM, _ROW_STATS
from kernelsearch.generators.pointwise import (
    DEFAULT,
    DEFAULT_INIT,
    FLOATS,
    NotPointwise,
    match_pointwise,
    render_kernel,
    self_attr,
)
from kernelsearch.generators.pooling import _POOL_OPS, START_THREAD_LOADS, Pooling, _constructor_call, _n, pooling_space
from kernelsearch.generators.reduction import reduction_space
from kernelsearch.generators.trace import Traced, meta, op_name, schema_args
from kernelsearch.judge.problem import Case

_PASS = ("getitem", "detach", "alias", "clone")
# ops off the output's path that are allowed (copies and views of what the reference computes and drops: max
# pooling's indices); an op that writes in place there is refused, but for the buffers' `num_batches_tracked += 1`
_SIDE = ("detach", "getitem", "empty", "alias", "clone", "squeeze", "unsqueeze", "view")
_NORM_DEFAULT = {"CHUNK": 4096, "num_warps": 8}
_OURS = ("import torch", "import triton", "import triton.language as tl")


def _gemm_head(traced: Traced):
    """addmm(bias, x, W.t()) or mm(x, W.t()) of a linear layer's (or a parameter's) W: (node, bias Input or None,
    the host line computing the product, a summary, the matmul case)."""
    cores = [n for n in traced.ops if op_name(n) in ("mm", "addmm", "bmm", "convolution")]
    if not cores or any(op_name(n) not in ("mm", "addmm") for n in cores):
        return None
    mm = cores[0]   # (a later linear layer is a stage: _linear_stage)
    a = schema_args(mm)
    x_node = a["mat1"] if op_name(mm) == "addmm" else a["self"]
    x = traced.input_of(x_node) if isinstance(x_node, torch.fx.Node) else None
    found = _linear(traced, mm)
    if x is None or x.kind != "tensor" or len(x.shape) != 2 or x.dtype not in FLOATS or found is None or \
            found[1].dtype != x.dtype:
        return None
    w_node, w, bias = found
    n = int(meta(mm).shape[-1])
    case = Case("problem", {"m": int(x.shape[0]), "n": n, "k": int(x.shape[1])},
                str(x.dtype).removeprefix("torch."), timed=True)
    line = f"matmul({x.name}, {self_attr(w.name)}.t())"
    return mm, bias, line, f"linear {shape_text(x)} -> {n}", case, {w_node}


def _linear(traced: Traced, mm):
    """mm(x, W.t()) or addmm(b, x, W.t()) of a parameter W (and a parameter b): (the W.t() node, W, b or None);
    None where `mm` is not that."""
    a = schema_args(mm)
    addmm = op_name(mm) == "addmm"
    if addmm and (a.get("beta", 1) != 1 or a.get("alpha", 1) != 1):
        return None
    w_node = a["mat2"]
    if not (isinstance(w_node, torch.fx.Node) and op_name(w_node) in ("t", "permute", "transpose")):
        return None
    w = traced.input_of(w_node.args[0])
    m = meta(w_node)
    if w is None or w.kind != "param" or len(w.shape) != 2 or m is None or tuple(m.shape) != tuple(reversed(w.shape)):
        return None
    bias = None
    if addmm:
        bias = traced.input_of(a["self"]) if isinstance(a["self"], torch.fx.Node) else None
        if bias is None or bias.kind != "param":
            return None
    return w_node, w, bias


@dataclass
class _Stage:
    """One kernel after the head: the node it reads and the node it gives, what the summary calls it, the nodes it
    owns, its helper text (kernels and host function, as rendered), and its call and constructor line: format
    strings of `x` (the previous stage's variable) and the helper's names (renamed per stage)."""

    inp: Any
    out: Any
    kind: str
    owned: set
    text: str
    call: str
    init: str = ""
    bias: Any = None   # a linear stage's bias (an Input): added first by the elementwise kernel after it


def _norm_stage(traced: Traced, node) -> _Stage | None:
    """Group norm, batch norm in training mode, or instance norm as traced (x viewed (1, N*C, ...), batch norm with
    no weight or running stats, viewed back); None where the node is not one of them."""
    a = schema_args(node)
    outs = [u for u in node.users if op_name(u) == "getitem" and u.args[1] == 0]
    if len(outs) != 1:
        return None
    out = outs[0]
    owned = {node, *node.users}

    def param(k):
        v = a.get(k)
        inp = traced.input_of(v) if isinstance(v, torch.fx.Node) else None
        return inp if inp is not None and inp.kind == "param" else None

    def text(template, stats, kind):
        m = meta(out)
        return fill(template, {"WHAT": f"{kind} of {'x'.join(map(str, m.shape))}", "EPS": repr(float(a["eps"])),
                               "STATS_KERNEL": stats, **_NORM_DEFAULT})

    if op_name(node) == "native_group_norm":
        w, b = param("weight"), param("bias")
        if w is None or b is None:
            return None
        weight = self_attr(w.name)
        groups = f"{weight.removesuffix('.weight')}.num_groups" if weight.endswith(".weight") else str(int(a["group"]))
        return _Stage(a["input"], out, "group norm", owned, text(_NORM, _ROW_STATS, "group norm"),
                      f"{{row_norm}}({{x}}, {weight}, {self_attr(b.name)}, {groups})")
    if op_name(node) != "native_batch_norm" or not a.get("training"):
        return None
    src = a["input"]
    users = list(out.users)
    if isinstance(src, torch.fx.Node) and op_name(src) == "view" and len(users) == 1 and op_name(users[0]) == "view":
        v, x = meta(src), meta(src.args[0])
        back = meta(users[0])
        if any(a.get(k) is not None for k in ("weight", "bias", "running_mean", "running_var")) or v is None or \
                x is None or x.dim() < 3 or back is None or tuple(back.shape) != tuple(x.shape) or \
                tuple(v.shape) != (1, x.shape[0] * x.shape[1], *x.shape[2:]):
            return None
        return _Stage(src.args[0], users[0], "instance norm", owned | {src, users[0]},
                      text(_NORM, _ROW_STATS, "instance norm"), "{row_norm}({x}, None, None, {x}.shape[1])")
    w, b = param("weight"), param("bias")
    if (a.get("weight") is None) != (a.get("bias") is None) or (a.get("weight") is not None and (w is None or
                                                                                                 b is None)):
        return None
    call = f"{{batch_norm}}({{x}}, {self_attr(w.name)}, {self_attr(b.name)})" if w is not None else \
        "{batch_norm}({x}, None, None)"
    return _Stage(src, out, "batch norm", owned, text(_BN, _BN_STATS, "batch norm"), call)


def _pool_stage(traced: Traced, node) -> _Stage | None:
    """Max or average pooling over the 1 to 3 dims after the channels (1-D traces as unsqueeze -> 2-D pooling ->
    squeeze): the pooling family's kernel. Its arguments are the constructor's nn.XxxPoolNd call's (a line of the
    candidate's constructor), or where it has none the traced values, a constant of the helper."""
    op, nd = _POOL_OPS[op_name(node)]
    a = schema_args(node)
    if op == "max":
        outs = [u for u in node.users if op_name(u) == "getitem" and u.args[1] == 0]
        if len(outs) != 1:
            return None
        out, owned = outs[0], {node, *node.users}
    else:
        out, owned = node, {node}
    src = a["self"]
    x, y = meta(src), meta(out)
    if x is None or y is None or x.dim() != nd + 2 or x.dtype not in FLOATS:
        return None
    k, st = _n(a["kernel_size"], nd), _n(a.get("stride") or a["kernel_size"], nd)
    pad, dil = _n(a.get("padding", 0), nd), _n(a.get("dilation", 1) if op == "max" else 1, nd)
    sq = next(iter(out.users)) if len(out.users) == 1 else None
    if nd == 2 and op_name(src) == "unsqueeze" and src.args[1] % x.dim() == 2 and len(src.users) == 1 and \
            (k[0], st[0], pad[0], dil[0]) == (1, 1, 0, 1) and sq is not None and op_name(sq) == "squeeze" and \
            _dim_of(sq) in (-2, 2, (-2,), (2,)):   # 1-D pooling: (N, C, L) pooled as (N, C, 1, L)
        nd, k, st, pad, dil = 1, k[1:], st[1:], pad[1:], dil[1:]
        owned |= {src, sq}
        src, out = src.args[0], sq
        x, y = meta(src), meta(out)
    pool = Pooling(op, k, st, pad, dil, bool(a.get("ceil_mode", False)),
                   bool(a.get("count_include_pad", True)) if op == "avg" else True,
                   a.get("divisor_override") if op == "avg" else None, tuple(x.shape), tuple(y.shape), x.dtype)
    space = pooling_space(pool, "    def __init__(self):\n        super().__init__()", "x", "x")
    window = math.prod(k)   # a thread's outputs x window elements within the family's starter's budget
    block = max(128, min(1024, 128 * (1 << max(0, (START_THREAD_LOADS // window).bit_length() - 1))))
    text = space.render({**space.default, "BLOCK": block, "TILE_W": 0, "num_warps": 4})
    ctor = _constructor_call(traced.reference_source, op, nd)
    if ctor is not None:
        args = ", ".join([ast.unparse(e) for e in ctor.args] + [ast.unparse(kw) for kw in ctor.keywords])
        return _Stage(src, out, f"{op} pooling", owned, text, "{pool}({x}, self._{pool})",
                      f"self._{{pool}} = {{_pool_params}}({args})")
    text = _helper_text(text) + f"\n\n\n_POOL_ARGS = {pool.args()!r}\n"
    return _Stage(src, out, f"{op} pooling", owned, text, "{pool}({x}, {_POOL_ARGS})")


def _reduce_stage(traced: Traced, node, live: set) -> _Stage | None:
    """sum / mean / amax / amin / logsumexp over consecutive dims, or max / min's values along one:
    generators/reduction.py's kernel on the dims flattened into one; a squeeze of the result right after it is read
    with it."""
    name = op_name(node)
    a = schema_args(node)
    if name in ("max", "min"):
        if "dim" not in a:
            return None
        outs = [u for u in node.users if op_name(u) == "getitem" and u.args[1] == 0]
        if len(outs) != 1 or any(u in live for u in node.users if u is not outs[0]):
            return None
        out, owned, dims = outs[0], {node, *node.users}, [a["dim"]]
    else:
        out, owned, dims = node, {node}, a.get("dim")
    x = meta(a["self"])
    if x is None or x.dtype not in FLOATS or not x.dim() or a.get("dtype") is not None or \
            not isinstance(dims, (list, tuple)) or not dims:
        return None
    ds = sorted({d % x.dim() for d in dims})
    if ds != list(range(ds[0], ds[-1] + 1)):
        return None
    d0, d1, keep = ds[0], ds[-1], bool(a.get("keepdim"))
    op = {"amax": "max", "amin": "min"}.get(name, name)
    what = f"{op} over dims {d0}-{d1}" if d1 > d0 else f"{op} over dim {d0}"
    space = reduction_space(op, d0, keep, math.prod(x.shape[d1 + 1:]), "x", "x",
                            "    def __init__(self):\n        super().__init__()", what)
    call = "{reduce_dim}(" + (f"{{x}}.flatten({d0}, {d1})" if d1 > d0 else "{x}") + ")"
    if keep and d1 > d0:
        call += f".unflatten({d0}, {(1,) * (d1 - d0 + 1)!r})"
    while len(out.users) == 1 and op_name(next(iter(out.users))) == "squeeze":   # read with the reduction
        sq = next(iter(out.users))
        sa = schema_args(sq)
        sd = sa.get("dim")
        if sd is None or meta(sq) is None:
            break
        call += f".squeeze({tuple(sd) if isinstance(sd, (list, tuple)) else sd!r})"
        out, owned = sq, owned | {sq}
    return _Stage(a["self"], out, what, owned, space.render(space.default), call)


def _flattened(node, live: set):
    """(its input, k, the view back) where `node` is a view of x merging x's dims k.. into its last, read only by a
    softmax along that last dim whose one live user views it back to x's shape (Conv3d_*_Softmax over the
    flattened spatial dims: x.view(n, c, -1).softmax(-1).view(n, c, d, h, w)); else None."""
    if op_name(node) not in ("view", "_unsafe_view", "reshape") or len(node.users) != 1 or \
            not isinstance(node.args[0], torch.fx.Node):
        return None
    x, v = meta(node.args[0]), meta(node)
    if x is None or v is None or not 1 <= v.dim() - 1 < x.dim() - 1:
        return None
    k = v.dim() - 1
    if tuple(v.shape) != (*x.shape[:k], math.prod(x.shape[k:])):
        return None
    soft = next(iter(node.users))
    back = [u for u in soft.users if u in live]
    if len(back) != 1 or op_name(back[0]) not in ("view", "_unsafe_view", "reshape") or meta(back[0]) is None or \
            tuple(meta(back[0]).shape) != tuple(x.shape):
        return None
    return node.args[0], k, back[0]


def _softmax_stage(node, live: set) -> _Stage | None:
    """Softmax along one dim: the softmax family's kernel at its starter for the rows x cols (the dim moved last);
    a softmax over trailing dims flattened into one and viewed back (_flattened) is one along the flattened dims."""
    from kernelsearch.families.softmax.space import SPACE

    a = schema_args(node)
    x = meta(a["self"])
    if x is None or x.dtype not in FLOATS or not x.dim() or a.get("half_to_float"):
        return None
    d = a["dim"] % x.dim()
    cols = int(x.shape[d])
    case = Case("problem", {"rows": x.numel() // max(cols, 1), "cols": cols}, str(x.dtype).removeprefix("torch."),
                timed=True)
    text = SPACE.template(SPACE.default_for(case))
    flat = _flattened(a["self"], live) if isinstance(a["self"], torch.fx.Node) and d == x.dim() - 1 else None
    if flat is not None:
        src, k, back = flat
        what = f"softmax over dims {k}-{meta(src).dim() - 1} (flattened)"
        return _Stage(src, back, what, {a["self"], node, back}, text, f"{{softmax}}({{x}}.flatten({k})).view_as({{x}})")
    call = "{softmax}({x})" if d == x.dim() - 1 else f"{{softmax}}({{x}}.movedim({d}, -1)).movedim(-1, {d})"
    return _Stage(a["self"], node, f"softmax over dim {d}", {node}, text, call)


def _linear_stage(traced: Traced, node) -> _Stage | None:
    """A linear layer after a GEMM head (Gemm_Sigmoid_Gemm_*): the head's GEMM (the matmul family's `matmul`, at
    the head's parameters) on the previous stage's output; its bias added by the elementwise kernel after it."""
    found = _linear(traced, node)
    x = meta(schema_args(node)["mat1" if op_name(node) == "addmm" else "self"])
    if found is None or x is None or x.dim() != 2 or x.dtype != found[1].dtype:
        return None
    w_node, w, bias = found
    what = f"linear -> {int(w.shape[0])}"
    return _Stage(schema_args(node)["mat1" if op_name(node) == "addmm" else "self"], node, what, {node, w_node}, "",
                  f"matmul({{x}}, {self_attr(w.name)}.t())", bias=bias)


def _layernorm_stage(traced: Traced, node, live: set) -> _Stage | None:
    """Layer norm over the trailing normalized_shape (nn.LayerNorm, F.layer_norm), with or without its weight and
    bias: the layernorm family's kernel at its starter for the rows x cols (a missing weight read as ones, a missing
    bias as zeros, each made at the call at x's trailing shape); its mean and rstd outputs dropped."""
    from kernelsearch.families.layernorm.space import SPACE

    a = schema_args(node)
    outs = [u for u in node.users if op_name(u) == "getitem" and u.args[1] == 0]
    if len(outs) != 1 or any(u in live for u in node.users if u is not outs[0]):
        return None
    x = meta(a["input"])
    shape = a.get("normalized_shape")
    if x is None or x.dtype not in FLOATS or not isinstance(shape, (list, tuple)) or not shape or \
            len(shape) > x.dim() or tuple(x.shape[x.dim() - len(shape):]) != tuple(shape):
        return None
    nd, cols = len(shape), math.prod(shape)
    affine = []
    for k, fill_with in (("weight", "new_ones"), ("bias", "new_zeros")):
        v = a.get(k)
        if v is None:
            affine.append(f"{{x}}.{fill_with}({{x}}.shape[{-len(shape)}:])")
            continue
        inp = traced.input_of(v) if isinstance(v, torch.fx.Node) else None
        if inp is None or inp.kind != "param" or tuple(inp.shape) != tuple(shape):
            return None
        affine.append(self_attr(inp.name))
    case = Case("problem", {"rows": x.numel() // max(cols, 1), "cols": cols}, str(x.dtype).removeprefix("torch."),
                timed=True)
    point = SPACE.default_for(case)
    if SPACE.limits(point, case):   # a row past the registers' variant: the Welford sweep (any width)
        point = {**point, "variant": "welford"}
    call = f"{{layer_norm}}({{x}}, {affine[0]}, {affine[1]}, {float(a['eps'])!r}, n_dims={nd})"
    what = f"layer norm over the last {nd} dim{'s' if nd > 1 else ''}"
    return _Stage(a["input"], outs[0], what, {node, *node.users}, SPACE.template(point), call)


def _stage(traced: Traced, node, live: set, claimed: set, gemm: bool) -> _Stage | None | bool:
    """The stage `node` starts, None where it cannot be one, False where it is no stage's (elementwise, a copy);
    `claimed`: the nodes of the stages before it, which it does not read through, and to which it adds its own;
    `gemm`: the head is a GEMM (whose kernel a later linear layer runs too)."""
    name = op_name(node)
    if name in ("mm", "addmm"):
        st = _linear_stage(traced, node) if gemm else None
    elif name in ("native_group_norm", "native_batch_norm"):
        st = _norm_stage(traced, node)
    elif name in _POOL_OPS:
        st = _pool_stage(traced, node)
    elif name in ("sum", "mean", "amax", "amin", "max", "min", "logsumexp"):
        st = _reduce_stage(traced, node, live)
    elif name == "_softmax":
        st = _softmax_stage(node, live)
    elif name == "native_layer_norm":
        st = _layernorm_stage(traced, node, live)
    else:
        return False
    if st is None:
        return None
    st = _through_views(st, claimed)
    claimed |= st.owned
    return st


def _dim_of(node):
    d = schema_args(node).get("dim")
    return tuple(d) if isinstance(d, (list, tuple)) else d


def _through_views(st: _Stage, claimed: set) -> _Stage:
    """The stage read through the unsqueezes and squeezes around it (1-D pooling of a GEMM's rows traces as
    unsqueeze -> 2-D pooling -> squeeze): each a view in its call, its nodes the stage's."""
    pre = []
    while isinstance(st.inp, torch.fx.Node) and op_name(st.inp) in ("unsqueeze", "squeeze") and \
            st.inp not in claimed and len(st.inp.users) == 1 and _dim_of(st.inp) is not None:
        pre.append(f".{op_name(st.inp)}({_dim_of(st.inp)!r})")
        st.owned.add(st.inp)
        st.inp = st.inp.args[0]
    if pre:
        st.call = st.call.replace("{x}", "{x}" + "".join(reversed(pre)))
    while len(st.out.users) == 1 and op_name(next(iter(st.out.users))) in ("unsqueeze", "squeeze"):
        nxt = next(iter(st.out.users))
        if _dim_of(nxt) is None:
            break
        st.call += f".{op_name(nxt)}({_dim_of(nxt)!r})"
        st.owned.add(nxt)
        st.out = nxt
    return st


def _helper_text(text: str) -> str:
    """A rendered kernel file cut before its ModelNew, its leading torch and triton imports left out (the head's
    file has them; another import is kept) and the line a space's render heads a kernel with (its parameters)."""
    at = text.find("\n\nclass ModelNew(")
    text = text[:at] if at >= 0 else text
    head = re.match(r"\A(?:(?:import [\w.]+(?: as \w+)?|# kernelsearch-space: .*)?\n)+", text)
    kept = [ln for ln in (head.group(0).splitlines() if head else []) if ln.startswith("import ") and ln not in _OURS]
    text = text[head.end():] if head else text
    if "math." in text and "import math" not in kept and not text.startswith("import math"):
        kept.append("import math")
    return "".join(f"{ln}  # noqa: E402,F401\n" for ln in kept) + ("\n" if kept else "") + text.strip("\n")


def _live(traced: Traced) -> set:
    seen, todo = set(), [traced.output]
    while todo:
        n = todo.pop()
        if n in seen or not isinstance(n, torch.fx.Node):
            continue
        seen.add(n)
        todo.extend(n.all_input_nodes)
    return seen


def _renamed(text: str, suffix: str) -> tuple[str, dict]:
    """`text` with each name it defines at the top level given `suffix` (so stages never collide)."""
    names = set(re.findall(r"^def (\w+)", text, re.M)) | set(re.findall(r"^(\w+)\s*=", text, re.M))
    if not names:
        return text, {}
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    return pattern.sub(lambda m: m.group(1) + suffix, text), {n: n + suffix for n in names}


def _pooled_input(traced: Traced, live: set) -> _Stage | None:
    """A pooling of a forward argument that the graph's one convolution reads (ConvTranspose3d_AvgPool_*'s pooling
    before the convolution), as a stage whose output the convolution reads as `pre0`; None where there is none."""
    convs = [n for n in traced.ops if op_name(n) == "convolution"]
    if len(convs) != 1:
        return None
    src = schema_args(convs[0])["input"]
    if not isinstance(src, torch.fx.Node):
        return None
    pool = src.args[0] if op_name(src) == "getitem" and isinstance(src.args[0], torch.fx.Node) else src
    if op_name(pool) not in _POOL_OPS or traced.input_of(pool) is not None:
        return None
    st = _pool_stage(traced, pool)
    x = traced.input_of(st.inp) if st is not None and isinstance(st.inp, torch.fx.Node) else None
    if st is None or st.out is not src or x is None or x.kind != "tensor" or \
            any(u in live for u in src.users if u is not convs[0]):
        return None
    return st


def match_chain(traced: Traced) -> Match | None:
    """A conv or GEMM head, then elementwise runs and other stages, as one `Match`; None where the graph is not."""
    live = _live(traced)
    conv = conv_head(traced)
    pre = None if conv is not None else _pooled_input(traced, live)
    if pre is not None:   # the convolution reads a pooling of a forward argument: `pre0`, computed first
        m = meta(pre.out)
        conv = conv_head(traced, {pre.out: SimpleNamespace(kind="tensor", name="pre0", shape=tuple(m.shape),
                                                           dtype=m.dtype)})
    gemm = None if conv is not None else _gemm_head(traced)
    if conv is None and gemm is None:
        return None
    head = conv[0] if conv is not None else gemm[0]
    position = {n: i for i, n in enumerate(traced.ops)}
    claimed: set = set()
    found = [(n, _stage(traced, n, live, claimed, gemm is not None)) for n in traced.ops
             if position[n] > position[head]]
    if any(st is None for _, st in found):
        return None
    starts = [n for n, st in found if st is not False]
    stages = [st for _, st in found if st is not False]
    if not stages:
        return None
    owned = set().union(*(st.owned for st in stages)) | {head} | (gemm[5] if gemm is not None else set()) | \
        (pre.owned if pre is not None else set())
    for n in traced.ops:   # off the output's path: copies and the buffers' `num_batches_tracked += 1` only
        if n not in live and n not in owned and not (op_name(n) in _SIDE or (op_name(n) == "add_" and _buffer(
                traced, n.args[0]))):
            return None
    copies = {}   # copies of a forward argument made before the head (x.clone().detach() for a residual add)
    for n in traced.ops:
        if n in live and n not in owned and position[n] < position[head]:
            inp = n
            while isinstance(inp, torch.fx.Node) and inp in position and op_name(inp) in _PASS:
                inp = inp.args[0]
            arg = traced.input_of(inp) if isinstance(inp, torch.fx.Node) else None
            if op_name(n) not in _PASS or arg is None or arg.kind != "tensor":
                return None   # an op before the head feeds the chain
            copies[n] = arg.name
    bounds = [position[n] for n in starts] + [len(traced.ops)]
    ends = [st.inp for st in stages] + [traced.output]
    helpers, lines, what, inits = [], [], [], []
    src, var, bias = head, "y0", (gemm[1] if gemm is not None else None)
    if pre is not None:
        text, names = _renamed(_helper_text(pre.text), "_1")
        helpers.append(text)
        lines.append(f"pre0 = {pre.call.format(x=traced.input_of(pre.inp).name, **names)}")
        if pre.init:
            inits.append(pre.init.format(**names))
    lines.append(f"y0 = {conv[4] if conv is not None else gemm[2]}")
    # what a later elementwise run may read besides its own input: the stages' outputs and inputs (a residual add
    # across a stage, x - mean(x)); the GEMM's product lacks its bias and is not one of them
    done = {**copies, **({head: "y0"} if bias is None else {})}
    lo = position[head]
    for k, (hi, end) in enumerate(zip(bounds, ends)):
        seg = [n for n in traced.ops[lo + 1:hi] if n in live and n not in owned]
        compute = [n for n in seg if op_name(n) not in _PASS]
        if compute or bias is not None:
            if end is not src and end not in seg:
                return None
            sub = replace(traced, ops=seg, output=end)
            skip = frozenset(n for n in traced.ops if n not in seg)
            inside = set(seg)
            sources = {src: (var, bias)} | {n: (v, None) for n, v in done.items()
                                             if n is not src and any(u in inside for u in n.users)}
            try:
                pg = match_pointwise(sub, sources=sources, skip=skip)
            except NotPointwise:
                return None
            text, names = _renamed(_helper_text(render_kernel(pg, dict(DEFAULT))), f"_{len(helpers) + 1}")
            helpers.append(text)
            args = ", ".join([o.expr for o in pg.operands] + pg.numbers)
            var = f"y{len(lines)}"
            lines.append(f"{var} = {names['pointwise']}({args})")
            what.append(f"elementwise {' -> '.join(pg.ops)}")
            bias = None
            done[end] = var
        else:   # nothing computed between two stages: the next reads the previous one's output as it is
            n = end
            while n is not src and isinstance(n, torch.fx.Node) and op_name(n) in _PASS:
                n = n.args[0]
            if n is not src:
                return None
        if k == len(stages):
            break
        st = stages[k]
        m = meta(st.out)
        if m is None or m.dtype not in FLOATS:
            return None
        text, names = _renamed(_helper_text(st.text), f"_{len(helpers) + 1}") if st.text else ("", {})
        if text:
            helpers.append(text)
        new = f"y{len(lines)}"
        lines.append(f"{new} = {st.call.format(x=var, **names)}")
        if st.init:
            inits.append(st.init.format(**names))
        what.append(st.kind)
        src, var, lo, bias = st.out, new, bounds[k], st.bias
        if bias is None:   # (a linear stage's product lacks its bias: not a value a later run reads)
            done[src] = var
    lines.append(f"return {var}")
    helper = "\n\n\n".join(helpers)
    chain = ", then ".join(what)
    if conv is not None:
        _, cv, init, forward, _ = conv
        init = "\n".join([init] + [f"        {line}" for line in inits])
        summary = f"{cv.describe()}, then {chain} (the generated convolution, then one generated kernel a stage)"
        if pre is not None:
            summary = f"{pre.kind} of {traced.input_of(pre.inp).name}, then {summary}"
        return Match("conv_chain", summary, conv_space(cv, init, forward, "\n".join(lines), helper=helper))
    summary = f"{gemm[3]}, then {chain} (the matmul family's GEMM, then one generated kernel a stage)"
    if inits:   # the stages' constructor lines after the reference's
        traced = replace(traced, init_source="\n".join([(traced.init_source or DEFAULT_INIT).rstrip("\n")] +
                                                        [f"        {line}" for line in inits]))
    space = adapted_space("matmul", traced, lines, summary, case=gemm[4], case_limits=True)
    return Match("gemm_chain", summary, with_helper(space, "\n\n" + helper + "\n"))


def _buffer(traced: Traced, node) -> bool:
    inp = traced.input_of(node) if isinstance(node, torch.fx.Node) else None
    return inp is not None and inp.kind == "param"
