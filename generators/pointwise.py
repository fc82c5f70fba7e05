"""A generated kernel family: a reference that is a graph of elementwise operations, written as one Triton kernel.

The traced graph (generators/trace.py) is matched when every operation is elementwise (activations, arithmetic with
numbers or same-shape tensors, comparisons and where, clamps) and every tensor input has the output's shape or is
broadcast to it (along rows, over leading dims, or along trailing size-1 dims: an input unsqueezed, see Operand).
Each operation becomes one line of Triton, computed in fp32; the result is stored once in the output's dtype. Bytes:
one read of each input and one write of the output, the floor for a memory-bound map. The module is long because
the matcher, its operand kinds and the kernel's templates that read them belong together.

The offline search space (`pointwise_space`): one program per block of BLOCK elements, ITERS blocks a program, or a
persistent grid of a few programs per SM; num_warps with BLOCK sets the elements each thread holds (the vector
width: 4 fp32 elements make one 128-bit access); streaming cache hints. Only tl.* functions the interpreter knows are
used (libdevice is not), so every kernel also runs on CPU machines.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import torch

from kernelsearch.families.space import Move, SearchSpace, evict, fill, num_programs
from kernelsearch.generators.trace import Traced, meta, op_name, schema_args
from kernelsearch.judge.problem import Case


class NotPointwise(Exception):
    """The graph is not (only) elementwise; the message names what is not."""


def _lit(v) -> str:
    if isinstance(v, bool):
        return "1.0" if v else "0.0"
    v = float(v)
    if math.isinf(v):
        return 'float("inf")' if v > 0 else 'float("-inf")'
    if math.isnan(v):
        return 'float("nan")'
    return repr(v)


def _pow(a: str, e) -> str:
    if isinstance(e, str):
        return f"tl.exp({e} * tl.log({a}))"
    e = float(e)
    if e == int(e) and 0 <= e <= 8:
        return "(" + " * ".join([a] * int(e)) + ")" if e else "1.0"
    if e == int(e) and -8 <= e < 0:
        return "(1.0 / (" + " * ".join([a] * int(-e)) + "))"
    if e == 0.5:
        return f"tl.sqrt({a})"
    if e == -0.5:
        return f"tl.rsqrt({a})"
    return f"tl.exp({_lit(e)} * tl.log({a}))"   # x > 0 only: torch gives nan for negative bases too, unless e is whole


def _gelu(a: str, approximate: str) -> str:
    if approximate == "tanh":
        return f"(0.5 * {a} * (1.0 + _tanh(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a}))))"
    return f"(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))"


def _elu(a: str, alpha, scale, input_scale) -> str:
    return (f"tl.where({a} > 0.0, {a} * {_lit(scale)}, "
            f"(tl.exp({a} * {_lit(input_scale)}) - 1.0) * {_lit(float(alpha) * float(scale))})")


# aten name -> (schema argument names read, in order) and the expression; an argument that is a node arrives as its
# variable's name, any other as its Python value
_OPS = {
    "relu": (("self",), lambda a: f"tl.where({a} > 0.0, {a}, 0.0)"),
    "leaky_relu": (("self", "negative_slope"), lambda a, s: f"tl.where({a} > 0.0, {a}, {a} * {_lit(s)})"),
    "sigmoid": (("self",), lambda a: f"(1.0 / (1.0 + tl.exp(-{a})))"),
    "tanh": (("self",), lambda a: f"_tanh({a})"),
    "gelu": (("self", "approximate"), _gelu),
    "silu": (("self",), lambda a: f"({a} / (1.0 + tl.exp(-{a})))"),
    "softplus": (("self", "beta", "threshold"),
                 lambda a, b, t: f"_softplus({a}, {_lit(b)}, {_lit(t)})"),
    "mish": (("self",), lambda a: f"({a} * _tanh(_softplus({a}, 1.0, 20.0)))"),
    "hardtanh": (("self", "min_val", "max_val"),
                 lambda a, lo, hi: f"tl.minimum(tl.maximum({a}, {_lit(lo)}), {_lit(hi)})"),
    "elu": (("self", "alpha", "scale", "input_scale"), _elu),
    "selu": (("self",), lambda a: _elu(a, 1.6732632423543772, 1.0507009873554805, 1.0)),
    "celu": (("self", "alpha"), lambda a, al: _elu(a, al, 1.0, 1.0 / float(al))),
    "hardsigmoid": (("self",), lambda a: f"tl.minimum(tl.maximum({a} / 6.0 + 0.5, 0.0), 1.0)"),
    "hardswish": (("self",), lambda a: f"({a} * tl.minimum(tl.maximum({a} + 3.0, 0.0), 6.0) / 6.0)"),
    "threshold": (("self", "threshold", "value"),
                  lambda a, t, v: f"tl.where({a} > {_lit(t)}, {a}, {_lit(v)})"),
    "abs": (("self",), lambda a: f"tl.abs({a})"),
    "neg": (("self",), lambda a: f"(-{a})"),
    "exp": (("self",), lambda a: f"tl.exp({a})"),
    "log": (("self",), lambda a: f"tl.log({a})"),
    "sqrt": (("self",), lambda a: f"tl.sqrt({a})"),
    "rsqrt": (("self",), lambda a: f"tl.rsqrt({a})"),
    "sin": (("self",), lambda a: f"tl.sin({a})"),
    "cos": (("self",), lambda a: f"tl.cos({a})"),
    "erf": (("self",), lambda a: f"tl.erf({a})"),
    "reciprocal": (("self",), lambda a: f"(1.0 / {a})"),
    "square": (("self",), lambda a: f"({a} * {a})"),
    "sign": (("self",), lambda a: f"tl.where({a} > 0.0, 1.0, tl.where({a} < 0.0, -1.0, 0.0))"),
    "add": (("self", "other", "alpha"), lambda a, b, al: f"({a} + {_v(b)})" if al == 1 else
            f"({a} + {_v(b)} * {_lit(al)})"),
    "sub": (("self", "other", "alpha"), lambda a, b, al: f"({a} - {_v(b)})" if al == 1 else
            f"({a} - {_v(b)} * {_lit(al)})"),
    "rsub": (("self", "other", "alpha"), lambda a, b, al: f"({_v(b)} - {a})" if al == 1 else
             f"({_v(b)} - {a} * {_lit(al)})"),
    "mul": (("self", "other"), lambda a, b: f"({a} * {_v(b)})"),
    "div": (("self", "other"), lambda a, b: f"({_v(a)} / {_v(b)})"),
    "pow": (("self", "exponent"), lambda a, e: _pow(a, e) if isinstance(a, str) else
            f"tl.exp({e} * {_lit(math.log(float(a)))})"),
    "clamp": (("self", "min", "max"), lambda a, lo, hi: _clamp(a, lo, hi)),
    "clamp_min": (("self", "min"), lambda a, lo: _clamp(a, lo, None)),
    "clamp_max": (("self", "max"), lambda a, hi: _clamp(a, None, hi)),
    "maximum": (("self", "other"), lambda a, b: f"tl.maximum({a}, {b})"),
    "minimum": (("self", "other"), lambda a, b: f"tl.minimum({a}, {b})"),
    "gt": (("self", "other"), lambda a, b: f"({a} > {_v(b)})"),
    "ge": (("self", "other"), lambda a, b: f"({a} >= {_v(b)})"),
    "lt": (("self", "other"), lambda a, b: f"({a} < {_v(b)})"),
    "le": (("self", "other"), lambda a, b: f"({a} <= {_v(b)})"),
    "eq": (("self", "other"), lambda a, b: f"({a} == {_v(b)})"),
    "ne": (("self", "other"), lambda a, b: f"({a} != {_v(b)})"),
    "where": (("condition", "self", "other"), lambda c, a, b: f"tl.where({c}, {_v(a)}, {_v(b)})"),
}
# ops that pass their input on unchanged (a copy, a view of the same shape)
_IDENTITY = {"clone", "alias", "detach", "lift_fresh_copy", "contiguous"}
_SAME_SHAPE_VIEWS = {"view", "_unsafe_view", "reshape", "expand"}
_DTYPE_OPS = {"_to_copy", "to"}
FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _v(x) -> str:
    return x if isinstance(x, str) else _lit(x)


def _clamp(a: str, lo, hi) -> str:
    out = a
    if lo is not None:
        out = f"tl.maximum({out}, {_v(lo)})"
    if hi is not None:
        out = f"tl.minimum({out}, {_v(hi)})"
    return out


@dataclass
class Operand:
    """A tensor the kernel reads: the host expression that gives it (a forward argument, `self.bias`, an earlier
    kernel's result) and how it meets the output: `full` (the output's shape), `row` (a vector along the last dim,
    broadcast over the rows: a bias), `tail` (the output's trailing dims, broadcast over the leading ones: an
    attention mask of seq x seq added to batch x heads x seq x seq, read at offs % its numel), `lead` (size-1
    trailing dims broadcast along the output's: diag(A) @ B as A.unsqueeze(1) * B, a (C, 1, 1) bias; read at
    offs // the output's `trailing` dims' numel, % its numel) or `one` (one element, broadcast everywhere)."""

    expr: str
    kind: str
    dtype: torch.dtype
    trailing: int = 0    # `lead`: how many of its trailing dims are 1s broadcast


@dataclass
class PointwiseGraph:
    """An elementwise reference, ready to render: its tensor operands, its numbers and one Triton line per op."""

    operands: list[Operand]
    numbers: list[str]            # forward's numbers, by name
    lines: list[str]              # `v3 = ...`, in order
    result: str                   # the variable stored
    shape: tuple[int, ...]
    out_dtype: torch.dtype
    ops: list[str] = field(default_factory=list)

    def describe(self) -> str:
        shape = "x".join(map(str, self.shape)) or "scalar"
        return f"elementwise {' -> '.join(self.ops) or 'copy'} on {shape} {str(self.out_dtype).removeprefix('torch.')}"


def _kind(shape: tuple, out: tuple) -> str | None:
    if shape == out:
        return "full"
    if math.prod(shape) == 1:
        return "one"
    if out and shape and shape[-1] == out[-1] and math.prod(shape) == out[-1] and len(shape) <= len(out):
        return "row"
    while shape and shape[0] == 1:
        shape = shape[1:]
    if 1 < len(shape) < len(out) and tuple(out[-len(shape):]) == shape:
        return "tail"
    ones = _trailing_ones(shape)
    if 0 < ones < len(shape) <= len(out) and tuple(out[len(out) - len(shape):][:len(shape) - ones]) == \
            shape[:len(shape) - ones]:
        return "lead"
    return None


def _trailing_ones(shape: tuple) -> int:
    n = 0
    while n < len(shape) and shape[len(shape) - 1 - n] == 1:
        n += 1
    return n


def match_pointwise(traced: Traced, sources: dict | None = None, skip: frozenset = frozenset()) -> PointwiseGraph:
    """The graph as one elementwise kernel, or NotPointwise naming the first op (or input) that is not. `sources`:
    nodes computed before this kernel (a GEMM's product), each given as (host expression, bias Input or None: an
    addmm's bias, added first); `skip`: the nodes that compute them, left out here."""
    out = meta(traced.output)
    if out is None or out.dtype not in FLOATS:
        raise NotPointwise("its output is not a floating-point tensor")
    shape = tuple(out.shape)
    names: dict = {}
    operands: list[Operand] = []
    numbers: list[str] = []
    lines, ops = [], []

    def operand(expr: str, oshape: tuple, dtype, what: str) -> str:
        kind = _kind(tuple(oshape), shape)
        if kind is None:
            raise NotPointwise(f"{what} is {tuple(oshape)}, not broadcast along rows of {shape}")
        if dtype not in FLOATS:
            raise NotPointwise(f"{what} is {dtype}")
        for i, o in enumerate(operands):
            if o.expr == expr:
                return f"x{i}"
        operands.append(Operand(expr, kind, dtype, _trailing_ones(tuple(oshape)) if kind == "lead" else 0))
        return f"x{len(operands) - 1}"

    for node, (expr, bias) in (sources or {}).items():
        m = meta(node)
        var = operand(expr, tuple(m.shape), m.dtype, expr)
        if bias is not None:
            b = operand(self_attr(bias.name), bias.shape, bias.dtype, f"the parameter {bias.name}")
            lines.append(f"v{len(lines)} = ({var} + {b})")
            var = f"v{len(lines) - 1}"
            ops.append("add")
        names[node] = var
    for inp in traced.inputs:
        if not inp.node.users:
            continue
        if inp.kind == "number":
            names[inp.node] = f"s{len(numbers)}"
            numbers.append(inp.name)
        elif inp.kind in ("tensor", "param") and any(u not in skip for u in inp.node.users) and \
                not all(_read_as_view(u) for u in inp.node.users):   # those read it as unsqueezed (viewed)
            expr = inp.name if inp.kind == "tensor" else self_attr(inp.name)
            what = f"input {inp.name}" if inp.kind == "tensor" else f"the parameter {inp.name}"
            names[inp.node] = operand(expr, inp.shape, inp.dtype, what)
    for node in traced.ops:
        if node in skip or node in names:
            continue
        name = op_name(node)
        args = schema_args(node)
        src = args.get("self", node.args[0] if node.args else None)
        if name in _IDENTITY or (name in _SAME_SHAPE_VIEWS and _same_shape(node, src)) or \
                (name in _DTYPE_OPS and set(node.kwargs) <= {"dtype"}):
            if isinstance(src, torch.fx.Node) and src not in names:
                raise NotPointwise(f"{name} reads {src.name}, which is not an input or an elementwise result")
            names[node] = names[src] if isinstance(src, torch.fx.Node) else _v(src)
            continue
        view = _unsqueezed(traced, node) if _read_as_view(node) else None
        if view is not None:   # an input unsqueezed to broadcast: read as that (a chain is read at its end)
            if not all(_read_as_view(u) for u in node.users):
                m = meta(node)
                names[node] = operand(view[0], tuple(m.shape), m.dtype, f"{view[1].name} unsqueezed")
            continue
        if name not in _OPS:
            raise NotPointwise(f"{name} is not elementwise")
        if name == "div" and args.get("rounding_mode") is not None:
            raise NotPointwise("div with a rounding mode is not matched")
        m = meta(node)
        if m is None or _kind(tuple(m.shape), shape) is None:
            raise NotPointwise(f"{name} makes a {tuple(m.shape) if m is not None else '?'} result, not {shape}")
        keys, emit = _OPS[name]
        values = []
        for k in keys:
            v = args.get(k)
            if isinstance(v, torch.fx.Node):
                if v not in names:
                    raise NotPointwise(f"{name} reads {v.name}, which is not an input or an elementwise result")
                v = names[v]
            values.append(v)
        var = f"v{len(lines)}"
        lines.append(f"{var} = {emit(*values)}")
        names[node] = var
        ops.append(name)
    if traced.output not in names:
        raise NotPointwise("the output is not an elementwise result")
    full = [i for i, o in enumerate(operands) if o.kind == "full"]
    if not full:
        raise NotPointwise("no tensor of the output's shape reaches it")
    if full[0] != 0:   # the output takes the first operand's shape and device: a full one goes first
        order = [full[0]] + [i for i in range(len(operands)) if i != full[0]]
        rename = {f"x{old}": f"x{new}" for new, old in enumerate(order)}
        pattern = re.compile(r"\bx(\d+)\b")
        lines = [pattern.sub(lambda mt: rename[mt.group(0)], ln) for ln in lines]
        result = pattern.sub(lambda mt: rename[mt.group(0)], names[traced.output])
        operands = [operands[i] for i in order]
    else:
        result = names[traced.output]
    if not lines:
        raise NotPointwise("it computes nothing (a copy)")
    return PointwiseGraph(operands, numbers, lines, result, shape, out.dtype, ops)


def _ones_view(node) -> bool:
    """A view (view, reshape) that only adds or drops dims of size 1: `self.bias.view(1, -1, 1, 1, 1)`."""
    if op_name(node) not in ("view", "_unsafe_view", "reshape") or not node.args or \
            not isinstance(node.args[0], torch.fx.Node):
        return False
    m, s = meta(node), meta(node.args[0])
    return m is not None and s is not None and tuple(m.shape) != tuple(s.shape) and \
        [d for d in m.shape if d != 1] == [d for d in s.shape if d != 1]


def _read_as_view(node) -> bool:
    return op_name(node) == "unsqueeze" or _ones_view(node)


def _unsqueezed(traced: Traced, node):
    """(host expression, Input) of an input (a tensor or a parameter) unsqueezed once or more (or viewed with dims of
    1 added or dropped), or None."""
    src = node.args[0] if node.args else None
    if not isinstance(src, torch.fx.Node):
        return None
    if _read_as_view(src):
        inner = _unsqueezed(traced, src)
    else:
        inp = traced.input_of(src)
        inner = None if inp is None or inp.kind not in ("tensor", "param") else \
            (inp.name if inp.kind == "tensor" else self_attr(inp.name), inp)
    if inner is None:
        return None
    if op_name(node) == "unsqueeze":
        return f"{inner[0]}.unsqueeze({node.args[1]})", inner[1]
    shape = [int(d) for d in meta(node).shape]
    big = [i for i, d in enumerate(shape) if d != 1]
    if len(big) == 1:   # the one dim that is not 1 read as -1: the view holds at any size of the input
        shape[big[0]] = -1
    return f"{inner[0]}.view({', '.join(map(str, shape))})", inner[1]


def self_attr(name: str) -> str:
    """`ln.weight` -> `self.ln.weight`; `layers.0.weight` -> `self.layers[0].weight`."""
    out = "self"
    for part in name.split("."):
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


def _same_shape(node, src) -> bool:
    m, s = meta(node), meta(src) if isinstance(src, torch.fx.Node) else None
    return m is not None and s is not None and tuple(m.shape) == tuple(s.shape)


# -- the kernel file ------------------------------------------------------------------------------------------------

_PROLOGUE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _tanh(x):
    # tanh from one exponential of -2|x| (no overflow); libdevice's tanh would be one call on a GPU, but the
    # interpreter has no libdevice and the same file runs on both
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0.0, -t, t)


@triton.jit
def _softplus(x, beta, threshold):
    # torch's softplus: log(1 + exp(beta x)) / beta, and x itself past the threshold
    bx = x * beta
    return tl.where(bx > threshold, x, tl.log(1.0 + tl.exp(tl.minimum(bx, threshold))) / beta)
'''

_LOADS_AND_MATH = '''
$LOADS
$LINES
tl.store(y_ptr + offs, ${RESULT}.to(y_ptr.dtype.element_ty), mask=mask$STORE_HINT)
'''

_FLAT = '''

@triton.jit
def _pointwise_kernel($PARAMS, y_ptr, n, n_cols, BLOCK: tl.constexpr, ITERS: tl.constexpr, WIDE: tl.constexpr):
    # $WHAT
    # One program per ITERS consecutive blocks of BLOCK elements; each element is read once and written once.
    pid = tl.program_id(0)
    if WIDE:   # past 2**31 elements the offsets need 64 bits
        pid = tl.cast(pid, tl.int64)
    for it in tl.static_range(ITERS):
        offs = (pid * ITERS + it) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        $BODY


def _grid(n, x):
    return (triton.cdiv(n, $BLOCK * $ITERS),)
'''

_PERSISTENT = '''

@triton.jit
def _pointwise_kernel($PARAMS, y_ptr, n, n_cols, BLOCK: tl.constexpr, ITERS: tl.constexpr, WIDE: tl.constexpr):
    # $WHAT
    # A persistent grid: a few programs per SM walk the blocks with a stride of the grid, so there is no launch
    # tail; each element is read once and written once.
    n_blocks = tl.cdiv(n, BLOCK)
    for b in range(tl.program_id(0), n_blocks, tl.num_programs(0)):
        start = tl.cast(b, tl.int64) * BLOCK if WIDE else b * BLOCK
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        $BODY


def _grid(n, x):
    return (min(triton.cdiv(n, $BLOCK), _num_programs(x)),)
'''

_HOST = '''

$NUM_PROGRAMS


def pointwise($ARGS):
    $CONTIGUOUS
    y = torch.empty(x0.shape, dtype=$OUT_DTYPE, device=x0.device)
    n = y.numel()
    if n:
        wide = n + $BLOCK * $ITERS > 2**31 - 1
        n_cols = y.shape[-1] if y.dim() else 1
        _pointwise_kernel[_grid(n, x0)]($CALL, y, n, n_cols, BLOCK=$BLOCK, ITERS=$ITERS, WIDE=wide,
                                        num_warps=$num_warps)
    return y
'''

_MODEL = '''

import math  # noqa: E402,F401 - what the reference's constructor may use
import torch.nn as nn  # noqa: E402,F401


class ModelNew(torch.nn.Module):
    $INIT

    def forward(self, $FORWARD):
        return pointwise($FORWARD_CALL)
'''

DEFAULT_INIT = "    def __init__(self, *args, **kwargs):\n        super().__init__()"


_LOADS = {
    "full": "{x} = tl.load({x}_ptr + offs, mask=mask, other=0.0{hint}).to(tl.float32)",
    "row": "{x} = tl.load({x}_ptr + offs % n_cols, mask=mask, other=0.0).to(tl.float32)",   # a bias: stays in L1/L2
    "tail": "{x} = tl.load({x}_ptr + offs % {x}_n, mask=mask, other=0.0).to(tl.float32)",   # read once a leading index
    "lead": "{x} = tl.load({x}_ptr + (offs // {x}_inner) % {x}_n, mask=mask, other=0.0).to(tl.float32)",
    "one": "{x} = tl.load({x}_ptr).to(tl.float32)",
}


def render_kernel(pg: PointwiseGraph, p: dict, prefix: str = "") -> str:
    """The kernel, its launcher and `pointwise(x0, ..., s0, ...)`, at parameters `p`. `prefix` renames the module
    helpers this text shares names with other templates' (`_num_programs`), where it is pasted after one."""
    xs = [f"x{i}" for i in range(len(pg.operands))]
    ss = [f"s{i}" for i in range(len(pg.numbers))]
    # the numel each tail or lead operand wraps at; a lead operand's stride along the output
    tails = [f"{x}_n" for x, o in zip(xs, pg.operands) if o.kind in ("tail", "lead")]
    tail_args = [f"{x}.numel()" for x, o in zip(xs, pg.operands) if o.kind in ("tail", "lead")]
    tails += [f"{x}_inner" for x, o in zip(xs, pg.operands) if o.kind == "lead"]
    tail_args += [f"y.stride({-o.trailing - 1})" for o in pg.operands if o.kind == "lead"]
    hint = evict("evict_first", p["cache_hints"])
    loads = "\n".join(_LOADS[o.kind].format(x=x, hint=hint) for x, o in zip(xs, pg.operands))
    body = fill(_LOADS_AND_MATH, {"LOADS": loads, "LINES": "\n".join(pg.lines), "RESULT": pg.result,
                                  "STORE_HINT": hint})
    out_dtype = "x0.dtype" if pg.operands[0].dtype == pg.out_dtype else str(pg.out_dtype)
    per_thread = max(1, p["BLOCK"] // (32 * p["num_warps"]))
    kernel = _FLAT if p["variant"] == "flat" else _PERSISTENT
    text = fill(_PROLOGUE + kernel + _HOST, {
        "WHAT": f"{pg.describe()}; {per_thread} elements a thread",
        "PARAMS": ", ".join([f"{x}_ptr" for x in xs] + tails + ss),
        "BODY": body, "BLOCK": p["BLOCK"], "ITERS": p["ITERS"] if p["variant"] == "flat" else 1,
        "num_warps": p["num_warps"],
        "NUM_PROGRAMS": num_programs(p["programs_per_sm"] if p["variant"] == "persistent" else 4),
        "ARGS": ", ".join(xs + ss),
        "CONTIGUOUS": "\n".join(f"{x} = {x}.contiguous()" for x in xs),
        "OUT_DTYPE": out_dtype, "CALL": ", ".join(xs + tail_args + ss),
    })
    if prefix:
        text = re.sub(r"\b(_num_programs|_SMS|_grid)\b", lambda m: prefix + m.group(1), text)
    return text


def render(pg: PointwiseGraph, traced: Traced, p: dict) -> str:
    """The candidate file for `pg` at parameters `p` (without the space's header line)."""
    return render_kernel(pg, p) + fill(_MODEL, {
        "INIT": traced.init_source or DEFAULT_INIT,
        "FORWARD": ", ".join(traced.forward_args) or "*inputs",
        "FORWARD_CALL": ", ".join([o.expr for o in pg.operands] + pg.numbers),
    })


PARAMS = {
    "variant": ["flat", "persistent"],
    "BLOCK": [256, 512, 1024, 2048, 4096, 8192],
    "num_warps": [1, 2, 4, 8, 16],
    "ITERS": [1, 2, 4, 8],
    "programs_per_sm": [1, 2, 4, 8, 16],
    "cache_hints": [False, True],
}

# one block of 1024 a program, 4 warps: 8 fp32 elements a thread (two 128-bit accesses), Triton's usual choice
DEFAULT = {"variant": "flat", "BLOCK": 1024, "num_warps": 4, "ITERS": 1, "programs_per_sm": 4, "cache_hints": False}


def _limits(p: dict, case) -> str | None:
    per_thread = p["BLOCK"] // (32 * p["num_warps"])
    if per_thread < 1:
        return f"BLOCK {p['BLOCK']} is fewer elements than {p['num_warps']} warps have threads"
    return None if per_thread <= 32 else f"{per_thread} elements a thread (32 at most: registers)"


def _moves() -> list[Move]:
    flat = lambda p: p["variant"] == "flat"  # noqa: E731
    persistent = lambda p: p["variant"] == "persistent"  # noqa: E731
    moves = [
        Move("persistent grid",
             "Launch a few programs per SM that walk the blocks with a stride of the grid: no launch tail, and "
             "one program's loads overlap another's math.", {"variant": "persistent", "programs_per_sm": 4}),
        Move("one program per block",
             "Launch one program per block and let the hardware schedule them.", {"variant": "flat"}),
        Move("stream past the cache",
             "Load and store with evict_first: every element is touched once, so nothing is worth keeping in L2.",
             {"cache_hints": True}),
        Move("default cache policy", "Plain loads and stores.", {"cache_hints": False}),
    ]
    for k in PARAMS["ITERS"]:
        moves.append(Move(f"{k} blocks per program",
                          f"Each program handles {k} consecutive blocks (unrolled), so fewer programs are launched "
                          f"and each has {k} loads in flight.", {"variant": "flat", "ITERS": k}, when=flat))
    for s in PARAMS["programs_per_sm"]:
        moves.append(Move(f"{s} persistent programs per SM", f"A persistent grid of {s} programs per SM.",
                          {"variant": "persistent", "programs_per_sm": s}, when=persistent))
    for b in PARAMS["BLOCK"]:
        for w in PARAMS["num_warps"]:
            per = b // (32 * w)
            if per in (1, 2, 4, 8, 16):
                moves.append(Move(f"BLOCK {b} with {w} warps",
                                  f"Blocks of {b} elements over {w} warps: {per} elements a thread (fp32: "
                                  f"{max(1, per // 4)} 128-bit access{'es' if per > 4 else ''} a thread).",
                                  {"BLOCK": b, "num_warps": w}))
    return moves


def pointwise_space(pg: PointwiseGraph, traced: Traced) -> SearchSpace:
    """The generated family's offline search space for one elementwise reference."""
    return SearchSpace(params=PARAMS, default=dict(DEFAULT), template=lambda p: render(pg, traced, p),
                       moves=_moves(), tuning=["BLOCK", "num_warps", "ITERS", "programs_per_sm"],
                       cases=(Case("elementwise", {}, timed=True),), limits=_limits)
