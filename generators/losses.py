"""A generated kernel family: elementwise operations, then one reduction of everything to a scalar (a loss).

Matched (`match_loss`): a graph whose ops are elementwise over same-shape (or broadcast) inputs, then one sum or mean
of every element, then optional scalar arithmetic (KernelBench's MSELoss, HuberLoss, KLDivLoss, HingeLoss). The
loss ops torch keeps whole (smooth_l1_loss, mse_loss, l1_loss, huber_loss, linalg_vector_norm) and xlogy are first
decomposed into elementwise ops and a sum or mean (the graph re-traced with torch's decompositions), so every
elementwise line comes from the pointwise family's matcher and op table (generators/pointwise.py: `match_pointwise`
on the graph up to the reduction, and again with the reduction as a source for what follows it).
A graph whose scalar is then broadcast back over a full tensor (x / ||x||_F) is matched too: the same two kernels
write the scalar, and the pointwise family's kernel applies the rest.

The kernel, two passes, deterministic: a persistent grid of a few programs per SM, each summing f(x) over blocks
p, p + P, p + 2P, ... into fp32 lanes and writing one partial; then one program sums the P partials in a fixed tree
and applies the mean's division and the scalar epilogue. No atomics, so the sum's order is fixed by the grid and the
result is the same run after run. Bytes: one read of each input (the floor); the partials are a few KB.
A bias-like operand (a vector along the last dim, HingeLoss's target) is read at `start % n_cols + lane`, one
integer remainder a block, not one an element (a 32-bit remainder by a run-time value is ~20 instructions: at
8 bytes an element that would cost more than the memory).

The space: BLOCK with num_warps (the values a thread holds a step), programs per SM.

A second kind, `row_reduce_norm`: elementwise ops, a sum or mean of the last dim with keepdim, then elementwise ops
of the tensors and that per-row value (38_L1Norm_'s x / mean(|x|, 1, keepdim), 39_L2Norm_'s x / ||x||_2 along
dim 1). One program a row: the row whole in registers where it fits BLOCK (one read, one write), else two sweeps
of BLOCK chunks, the reduction then the output (the second read of a 256 KB row mostly from L2). Space: BLOCK and
num_warps. The module is past 500 lines on purpose: both kinds share the decomposition and the graph's split
around its one reduction.
"""
from __future__ import annotations

import dataclasses

import torch

from kernelsearch.families.space import Move, SearchSpace, fill, held_budget, num_programs
from kernelsearch.generators.common import Match
from kernelsearch.generators.pointwise import (
    _PROLOGUE,
    DEFAULT_INIT,
    FLOATS,
    NotPointwise,
    Operand,
    PointwiseGraph,
    match_pointwise,
)
from kernelsearch.generators.pointwise import DEFAULT as POINTWISE_DEFAULT
from kernelsearch.generators.pointwise import render_kernel as render_pointwise
from kernelsearch.generators.trace import Traced, TraceError, meta, op_name, schema_args
from kernelsearch.judge.problem import Case

_PARTIALS = '''

@triton.jit
def _loss_partials_kernel($PARAMS, part_ptr, n, n_cols, BLOCK: tl.constexpr, ONE_WRAP: tl.constexpr,
                          WIDE: tl.constexpr):
    # $WHAT
    # A persistent grid: program p sums f(x) over blocks p, p + P, ... in fp32 lanes and writes one partial (the
    # order of every sum is fixed by the grid: deterministic). Each element is read once.
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    n_blocks = tl.cdiv(n, BLOCK)
    for b in range(tl.program_id(0), n_blocks, tl.num_programs(0)):
        start = tl.cast(b, tl.int64) * BLOCK if WIDE else b * BLOCK
        offs = start + lanes
        mask = offs < n
        $LOADS
        $LINES
        acc += tl.where(mask, $RESULT, 0.0)
    tl.store(part_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@triton.jit
def _loss_finish_kernel(part_ptr, y_ptr, n_parts, n, $FINISH_PARAMS):
    # one program sums the partials in a fixed tree, then the scalar arithmetic after the reduction
    i = tl.arange(0, PARTS)
    total = tl.sum(tl.load(part_ptr + i, mask=i < n_parts, other=0.0), axis=0)
    x0 = $FINAL
    $FINISH_LINES
    tl.store(y_ptr, ${FINISH_RESULT}.to(y_ptr.dtype.element_ty))
'''

_HOST = '''

$NUM_PROGRAMS


def reduce_all($ARGS):
    $CONTIGUOUS
    n = x0.numel()
    n_cols = x0.shape[-1] if x0.dim() else 1
    progs = max(1, min(triton.cdiv(n, $BLOCK), _num_programs(x0)))
    parts = torch.empty(progs, dtype=torch.float32, device=x0.device)
    # a broadcast operand's index wraps at most once a block where BLOCK is no longer than what it wraps at
    one_wrap = $BLOCK <= min([$WRAPS])
    _loss_partials_kernel[(progs,)]($CALL, parts, n, n_cols, BLOCK=$BLOCK, ONE_WRAP=one_wrap,
                                    WIDE=n + $BLOCK > 2**31 - 1, num_warps=$num_warps)
    y = torch.empty($OUT_SHAPE, dtype=$OUT_DTYPE, device=x0.device)
    _loss_finish_kernel[(1,)](parts, y, progs, n, $FINISH_CALL, num_warps=4)
    return y
'''

_MODEL = '''

import math  # noqa: E402,F401 - what the reference's constructor may use
import torch.nn as nn  # noqa: E402,F401


class ModelNew(torch.nn.Module):
    $INIT

    def forward(self, $FORWARD):
        $BODY
'''

# operand kind (pointwise.Operand.kind) -> its load a block; `start`, `lanes`, `offs`, `mask` are the block's
_LOADS = {
    "full": "{x} = tl.load({x}_ptr + offs, mask=mask, other=0.0).to(tl.float32)",
    "row": "{x}_at = start % n_cols + lanes\n"
           "{x}_at = tl.where({x}_at >= n_cols, {x}_at - n_cols, {x}_at) if ONE_WRAP else offs % n_cols\n"
           "{x} = tl.load({x}_ptr + {x}_at, mask=mask, other=0.0).to(tl.float32)",
    "tail": "{x}_at = start % {x}_n + lanes\n"
            "{x}_at = tl.where({x}_at >= {x}_n, {x}_at - {x}_n, {x}_at) if ONE_WRAP else offs % {x}_n\n"
            "{x} = tl.load({x}_ptr + {x}_at, mask=mask, other=0.0).to(tl.float32)",
    "one": "{x} = tl.load({x}_ptr).to(tl.float32)",
}

_TL_DTYPES = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16"}

PARAMS = {"BLOCK": [1024, 2048, 4096, 8192, 16384], "num_warps": [2, 4, 8, 16], "programs_per_sm": [1, 2, 4, 8, 16]}

# 4096 elements over 8 warps (16 a thread: four 128-bit loads an input), 4 programs an SM: 32 warps an SM with
# 128 KB of two fp32 inputs' loads in flight, what an H200 SM needs to cover its memory latency
DEFAULT = {"BLOCK": 4096, "num_warps": 8, "programs_per_sm": 4}


@dataclasses.dataclass
class LossGraph:
    """A matched reduction: the elementwise graph before it, how it reduces, and what follows it."""

    pre: PointwiseGraph                 # up to the reduction's input
    op: str                             # "sum" | "mean"
    red_shape: tuple[int, ...]          # the reduction's result: () or (1, ..., 1) with keepdim
    red_dtype: torch.dtype
    post: PointwiseGraph | None         # after it, the reduction as operand "r"; None where it is the output
    scalar_post: bool                   # the epilogue is scalar (in the finish kernel) rather than full-shaped
    dims: list[int]                     # dims of the reduced tensor the epilogue reads at run time (d0, d1...)

    def describe(self) -> str:
        shape = "x".join(map(str, self.pre.shape))
        what = f"{self.op} of elementwise {' -> '.join(self.pre.ops)}" if self.pre.ops else self.op
        text = f"{what} over {shape} {str(self.pre.out_dtype).removeprefix('torch.')}"
        if self.post is not None:
            text += f", then {' -> '.join(self.post.ops)}"
            if not self.scalar_post:
                text += f" broadcast over {'x'.join(map(str, self.post.shape))}"
        return text


# -- the graph ------------------------------------------------------------------------------------------------------

def _xlogy(x, y):
    # torch's xlogy from ops the pointwise table knows: 0 where x is 0, NaN where y is NaN
    return torch.where(y != y, y, torch.where(x == 0, x, x * torch.log(y)))


_WHOLE = {"smooth_l1_loss", "mse_loss", "l1_loss", "huber_loss", "linalg_vector_norm", "xlogy"}


def _decomposed(traced: Traced) -> Traced:
    """A copy of `traced` (re-traced on the meta device: its nodes are this matcher's to rewrite) with the loss ops
    torch keeps whole written as elementwise ops and a sum or mean (torch's decompositions)."""
    from torch._decomp import get_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    aten = torch.ops.aten
    table = get_decompositions([aten.smooth_l1_loss, aten.mse_loss, aten.l1_loss, aten.huber_loss,
                                aten.linalg_vector_norm])
    table[aten.xlogy.Tensor] = _xlogy
    graph = torch.fx.Graph()   # a copy with plain positional placeholders, not the traced pytree's
    graph.output(graph.graph_copy(traced.graph, {}))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    args = []
    for inp in traced.inputs:
        v = meta(inp.node)
        args.append(torch.empty(v.shape, dtype=v.dtype, device="meta") if v is not None else inp.value)
    try:
        gm = make_fx(module, decomposition_table=table, tracing_mode="fake")(*args)
    except Exception as err:   # noqa: BLE001 - a graph that cannot be decomposed is not matched
        raise TraceError(f"decomposing raised {type(err).__name__}") from None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(traced.inputs):
        raise TraceError("the decomposed graph's inputs differ")
    inputs = [dataclasses.replace(inp, node=node) for inp, node in zip(traced.inputs, placeholders)]
    out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    out = out[0] if isinstance(out, (list, tuple)) and len(out) == 1 else out
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    done = Traced(gm.graph, inputs, ops, out, traced.forward_args, traced.init_source)
    done.by_node = {i.node: i for i in inputs}
    return done


def _full_reduction(node) -> str | None:
    """"sum" or "mean" where `node` reduces every element of its input (in a float dtype), else None."""
    name = op_name(node)
    if name not in ("sum", "mean"):
        return None
    a = schema_args(node)
    src, m = meta(a.get("self")) if isinstance(a.get("self"), torch.fx.Node) else None, meta(node)
    if src is None or m is None or m.numel() != 1 or src.numel() <= 1 or m.dtype not in FLOATS:
        return None
    dims = a.get("dim")
    if dims not in (None, []) and {d % src.dim() for d in dims} != set(range(src.dim())):
        return None
    return name


def _dim_sizes(graph: torch.fx.Graph, post: set, red_input_shape: tuple[int, ...]) -> list[int]:
    """The epilogue's constant divisors and factors that equal a dim of the reduced tensor (kl_div's batchmean
    divides by size(0), which the trace bakes in at the problem's shape) are made that dim, read at run time:
    the node's argument becomes `d{k}`, the finish kernel's argument of that name. The first matching dim wins."""
    used: list[int] = []
    for node in graph.nodes:
        if node not in post or op_name(node) not in ("div", "mul"):
            continue
        other = node.args[1] if len(node.args) > 1 else None
        if isinstance(other, bool) or not isinstance(other, (int, float)) or other != int(other) or other <= 1:
            continue
        for d, size in enumerate(red_input_shape):
            if size == other:
                node.args = (node.args[0], f"d{d}", *node.args[2:])
                used.append(d) if d not in used else None
                break
    return used


def match_loss_graph(traced: Traced) -> LossGraph | None:
    """The reference as elementwise ops, one full sum or mean, then elementwise ops; None where it is not."""
    if not any(op_name(n) in _WHOLE or _full_reduction(n) for n in traced.ops):
        return None
    try:
        t = _decomposed(traced)
    except TraceError:
        return None
    reds = [(n, _full_reduction(n)) for n in t.ops]
    reds = [(n, k) for n, k in reds if k]
    if len(reds) != 1 or any(op_name(n) in ("sum", "mean", "amax", "amin", "max", "min") and n is not reds[0][0]
                             for n in t.ops):
        return None
    red, op = reds[0]
    at = t.ops.index(red)
    pre_ops, post_ops = set(t.ops[:at]), set(t.ops[at + 1:])
    src = schema_args(red)["self"]
    try:
        pre = _pre_graph(t, src, frozenset(post_ops | {red}))
    except NotPointwise:
        return None
    if any(o.kind not in _LOADS for o in pre.operands):   # (an unsqueezed `lead` operand: not read here)
        return None
    m = meta(red)
    post, scalar_post, dims = None, True, []
    if t.output is not red:
        out = meta(t.output)
        if out is None:
            return None
        scalar_post = out.numel() == 1
        if scalar_post:
            dims = _dim_sizes(t.graph, post_ops, pre.shape)
        try:
            post = match_pointwise(t, sources={red: ("r", None)}, skip=frozenset(pre_ops | {red}))
        except NotPointwise:
            return None
        if post.operands[0].expr != "r" and scalar_post:
            return None
        if not scalar_post and any(o.expr == "r" and o.kind != "one" for o in post.operands):
            return None
    return LossGraph(pre, op, tuple(m.shape), m.dtype, post, scalar_post, dims)


def _pre_graph(t: Traced, src, skip: frozenset) -> PointwiseGraph:
    inp = t.input_of(src)
    if inp is not None:   # a sum of an input itself: no elementwise line
        if inp.kind != "tensor" or inp.dtype not in FLOATS:
            raise NotPointwise(f"{inp.name} is not a float tensor argument")
        numbers = [i.name for i in t.inputs if i.kind == "number" and i.node.users]
        return PointwiseGraph([Operand(inp.name, "full", inp.dtype)], numbers, [], "x0", inp.shape, inp.dtype)
    return match_pointwise(dataclasses.replace(t, output=src), skip=skip)


# -- the kernel file ------------------------------------------------------------------------------------------------

def render(lg: LossGraph, traced: Traced, p: dict) -> str:
    """The candidate file for `lg` at parameters `p` (without the space's header line)."""
    pre = lg.pre
    xs = [f"x{i}" for i in range(len(pre.operands))]
    ss = [f"s{i}" for i in range(len(pre.numbers))]
    tails = [f"{x}_n" for x, o in zip(xs, pre.operands) if o.kind == "tail"]
    loads = "\n".join(_LOADS[o.kind].format(x=x) for x, o in zip(xs, pre.operands))
    final = "total / n" if lg.op == "mean" else "total"
    if lg.red_dtype != torch.float32:   # the reference rounds the reduction to its dtype before what follows
        final = f"({final}).to({_TL_DTYPES[lg.red_dtype]}).to(tl.float32)"
    # the finish kernel's epilogue: the scalar ops after the reduction (x0 is the reduction; other operands are
    # scalars loaded once)
    post = lg.post if lg.scalar_post else None
    es = [f"x{i}" for i in range(1, len(post.operands))] if post else []
    dims = [f"d{d}" for d in lg.dims]
    finish_params = ", ".join([f"{e}_ptr" for e in es] + dims + ss + ["PARTS: tl.constexpr"])
    finish_call = ", ".join([f"e{e[1:]}" for e in es] + [f"x0.shape[{d}]" for d in lg.dims] + ss
                            + ["PARTS=max(16, triton.next_power_of_2(progs))"])
    finish_lines = [f"{e} = tl.load({e}_ptr).to(tl.float32)" for e in es] + (post.lines if post else [])
    out_dtype = post.out_dtype if post else lg.red_dtype
    args = xs + [f"e{e[1:]}" for e in es] + ss
    text = fill(_PROLOGUE + _PARTIALS + _HOST, {
        "WHAT": f"{lg.describe()}; {max(1, p['BLOCK'] // (32 * p['num_warps']))} elements a thread a step",
        "PARAMS": ", ".join([f"{x}_ptr" for x in xs] + tails + ss),
        "LOADS": loads or "pass", "LINES": "\n".join(pre.lines), "RESULT": pre.result,
        "FINISH_PARAMS": finish_params, "FINAL": final,
        "FINISH_LINES": "\n".join(finish_lines), "FINISH_RESULT": post.result if post else "x0",
        "NUM_PROGRAMS": num_programs(p["programs_per_sm"]), "BLOCK": p["BLOCK"], "num_warps": p["num_warps"],
        "ARGS": ", ".join(args),
        "CONTIGUOUS": "\n".join(f"{x} = {x}.contiguous()" for x in xs),
        "WRAPS": ", ".join(["n_cols"] + [f"{t.removesuffix('_n')}.numel()" for t in tails]),
        "CALL": ", ".join(xs + [f"{t.removesuffix('_n')}.numel()" for t in tails] + ss),
        "OUT_SHAPE": repr(tuple(lg.red_shape)), "OUT_DTYPE": str(out_dtype),
        "FINISH_CALL": finish_call,
    })
    call = ", ".join([o.expr for o in pre.operands] + ([o.expr for o in post.operands[1:]] if post else [])
                     + pre.numbers)
    if lg.post is not None and not lg.scalar_post:   # the scalar broadcast back: the pointwise family's kernel
        epilogue = render_pointwise(lg.post, dict(POINTWISE_DEFAULT), prefix="_pw")
        assert epilogue.startswith(_PROLOGUE)
        text = text.rstrip("\n") + "\n" + epilogue[len(_PROLOGUE):].rstrip("\n") + "\n"
        pw_call = ", ".join([o.expr for o in lg.post.operands] + lg.post.numbers)
        body = f"r = reduce_all({call})\nreturn pointwise({pw_call})"
    else:
        body = f"return reduce_all({call})"
    return text + fill(_MODEL, {"INIT": traced.init_source or DEFAULT_INIT,
                                "FORWARD": ", ".join(traced.forward_args) or "*inputs", "BODY": body})


def _limits_for(lg: LossGraph):
    return _held_limits(1 + sum(o.kind != "one" for o in lg.pre.operands))   # the sum's fp32 lanes, each input's


def _held_limits(held: int):
    """A space's limits for BLOCK elements a program on num_warps warps, each thread holding `held` fp32 values an
    element (the sum's lanes and each input's)."""

    def limits(p: dict, case) -> str | None:
        per = p["BLOCK"] // (32 * p["num_warps"])
        if per < 1:
            return f"BLOCK {p['BLOCK']} is fewer elements than {p['num_warps']} warps have threads"
        # sm_90 compiles (bench/feasibility.py at KernelBench's KL and hinge shapes): 64 values a thread of two
        # inputs and the sum compile to 180-189 registers with no spill, 128 spill 12 KB
        if per * held > held_budget(p["num_warps"]):
            return (f"{per} elements a thread x {held} (the sum and each input) is over the "
                    f"{held_budget(p['num_warps'])} fp32 values a thread of {p['num_warps']} warps holds")
        return None

    return limits


def _moves() -> list[Move]:
    moves = []
    for s in PARAMS["programs_per_sm"]:
        moves.append(Move(f"{s} programs per SM", f"A persistent grid of {s} programs per SM, each summing its "
                          f"share of the blocks into one partial.", {"programs_per_sm": s}))
    for b in PARAMS["BLOCK"]:
        for w in PARAMS["num_warps"]:
            per = b // (32 * w)
            if per in (2, 4, 8, 16, 32, 64):
                moves.append(Move(f"BLOCK {b} with {w} warps",
                                  f"Steps of {b} elements over {w} warps: {per} elements of each input a thread a "
                                  f"step ({max(1, per // 4)} 128-bit load{'s' if per > 4 else ''} of fp32).",
                                  {"BLOCK": b, "num_warps": w}))
    return moves


def loss_space(lg: LossGraph, traced: Traced) -> SearchSpace:
    return SearchSpace(params=PARAMS, default=dict(DEFAULT), template=lambda p: render(lg, traced, p),
                       moves=_moves(), tuning=["BLOCK", "num_warps", "programs_per_sm"],
                       cases=(Case("loss", {}, timed=True),), limits=_limits_for(lg))


# -- a reduction along the last dim, broadcast back over its row: x / mean(|x|, -1, keepdim) -------------------

_ROW = """

@triton.jit
def _row_norm_kernel($PARAMS, y_ptr, n_cols, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    # $WHAT
    # One program a row. SINGLE (the row fits BLOCK): the row in registers, one read and one write. Else two
    # sweeps: the reduction, then the output chunk by chunk; the second read of a row the program has just read
    # mostly hits L2 (132 rows of 256 KB in flight are 33 MB of the H200's 60 MB).
    base = tl.cast(tl.program_id(0), tl.int64) * n_cols
    lanes = tl.arange(0, BLOCK)
    if SINGLE:
        cols = lanes
        mask = cols < n_cols
        $LOADS_A
        $LINES_A
        r = $FINAL
        $SINGLE_B
        $LINES_B
        tl.store(y_ptr + base + cols, ${RESULT_B}.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for c0 in range(0, n_cols, BLOCK):
            cols = c0 + lanes
            mask = cols < n_cols
            $LOADS_A
            $LINES_A
            acc += tl.where(mask, $RESULT_A, 0.0)
        r = $FINAL_ACC
        for c0 in range(0, n_cols, BLOCK):
            cols = c0 + lanes
            mask = cols < n_cols
            $SWEEP_B
            $LINES_B
            tl.store(y_ptr + base + cols, ${RESULT_B}.to(y_ptr.dtype.element_ty), mask=mask)


def row_norm($ARGS):
    $CONTIGUOUS
    y = torch.empty($OUT_SHAPE_OF, dtype=$OUT_DTYPE, device=$FIRST.device)
    n_cols = y.shape[-1]
    n_rows = y.numel() // max(n_cols, 1)
    if y.numel():
        _row_norm_kernel[(n_rows,)]($CALL, y, n_cols, BLOCK=$BLOCK, SINGLE=n_cols <= $BLOCK, num_warps=$num_warps)
    return y
"""

_ROW_LOADS = {
    "full": "{x} = tl.load({x}_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)",
    "row": "{x} = tl.load({x}_ptr + cols, mask=mask, other=0.0).to(tl.float32)",
    "one": "{x} = tl.load({x}_ptr).to(tl.float32)",
}


@dataclasses.dataclass
class RowNormGraph:
    """A reduction along the last dim (keepdim) of elementwise ops, then elementwise ops of the result with it."""

    pre: PointwiseGraph       # up to the reduction's input (operands renamed a0..., lines av0...)
    op: str                   # "sum" | "mean"
    red_dtype: torch.dtype
    post: PointwiseGraph      # the output, the reduction as operand "r" (renamed b0..., lines bv0...)

    def describe(self) -> str:
        shape = "x".join(map(str, self.post.shape))
        what = f"elementwise {' -> '.join(self.pre.ops)}, " if self.pre.ops else ""
        return (f"{what}{self.op} along the last dim, then {' -> '.join(self.post.ops)}: rows of {shape} "
                f"{str(self.post.out_dtype).removeprefix('torch.')}")


def _renamed(lines: list[str], result: str, x: str, v: str) -> tuple[list[str], str]:
    import re

    def sub(text: str) -> str:
        return re.sub(r"\b([xv])(\d+)\b", lambda m: (x if m.group(1) == "x" else v) + m.group(2), text)

    return [sub(ln) for ln in lines], sub(result)


def match_row_norm_graph(traced: Traced) -> RowNormGraph | None:
    """x / reduce(f(x), -1, keepdim) and its kin: elementwise ops, one sum or mean of the last dim with keepdim, then
    elementwise ops of the full tensors and that per-row value; None for any other graph."""
    if not any(op_name(n) in _WHOLE or op_name(n) in ("sum", "mean") for n in traced.ops):
        return None
    try:
        t = _decomposed(traced)
    except TraceError:
        return None
    reds = [n for n in t.ops if op_name(n) in ("sum", "mean", "amax", "amin", "max", "min", "prod")]
    if len(reds) != 1 or op_name(reds[0]) not in ("sum", "mean"):
        return None
    red = reds[0]
    a = schema_args(red)
    src, m, out = meta(a.get("self")) if isinstance(a.get("self"), torch.fx.Node) else None, meta(red), meta(t.output)
    dims = a.get("dim")
    if src is None or m is None or out is None or src.dim() < 1 or not isinstance(dims, (list, tuple)) or \
            [d % src.dim() for d in dims] != [src.dim() - 1] or not a.get("keepdim") or m.dtype not in FLOATS or \
            tuple(out.shape) != tuple(src.shape) or t.output is red:
        return None
    at = t.ops.index(red)
    pre_ops, post_ops = set(t.ops[:at]), set(t.ops[at + 1:])
    try:
        pre = _pre_graph(t, a["self"], frozenset(post_ops | {red}))
        post = match_pointwise(t, sources={red: ("r", None)}, skip=frozenset(pre_ops | {red}))
    except NotPointwise:
        return None
    if any(o.kind not in _ROW_LOADS for o in pre.operands) or \
            any(o.kind not in _ROW_LOADS and o.expr != "r" for o in post.operands) or \
            pre.shape != tuple(src.shape):
        return None
    return RowNormGraph(pre, op_name(red), m.dtype, post)


def render_row_norm(g: RowNormGraph, traced: Traced, p: dict) -> str:
    """The candidate file for `g` at parameters `p` (without the space's header line)."""
    xa = [f"a{i}" for i in range(len(g.pre.operands))]
    xb = [f"b{i}" for i in range(len(g.post.operands))]
    lines_a, res_a = _renamed(g.pre.lines, g.pre.result, "a", "av")
    lines_b, res_b = _renamed(g.post.lines, g.post.result, "b", "bv")
    loads_a = "\n".join(_ROW_LOADS[o.kind].format(x=x) for x, o in zip(xa, g.pre.operands))
    # the post ops' operands: the row's value r, a tensor the sweep before read (x itself: in registers already
    # where the row is whole, read through the same pointer in the second sweep), or a tensor of their own
    same = {o.expr: x for x, o in zip(xa, g.pre.operands)}
    ptrs_b = [(x, o) for x, o in zip(xb, g.post.operands) if o.expr != "r" and o.expr not in same]
    single_b, sweep_b = [], []
    for x, o in zip(xb, g.post.operands):
        if o.expr == "r":
            single_b.append(f"{x} = r")
            sweep_b.append(f"{x} = r")
        elif o.expr in same:
            single_b.append(f"{x} = {same[o.expr]}")
            sweep_b.append(_ROW_LOADS[o.kind].format(x=x).replace(f"{x}_ptr", f"{same[o.expr]}_ptr"))
        else:
            single_b.append(_ROW_LOADS[o.kind].format(x=x))
            sweep_b.append(single_b[-1])
    ss = [f"s{i}" for i in range(len(g.pre.numbers))]

    def final(total: str) -> str:
        f = f"{total} / n_cols" if g.op == "mean" else total
        return f if g.red_dtype == torch.float32 else f"({f}).to({_TL_DTYPES[g.red_dtype]}).to(tl.float32)"

    args = xa + [x for x, _ in ptrs_b] + ss
    first = next(same.get(o.expr, x) for x, o in zip(xb, g.post.operands) if o.kind == "full")
    text = fill(_PROLOGUE + _ROW, {
        "WHAT": g.describe(), "PARAMS": ", ".join([f"{x}_ptr" for x in xa + [x for x, _ in ptrs_b]] + ss),
        "LOADS_A": loads_a or "pass", "LINES_A": "\n".join(lines_a), "RESULT_A": res_a,
        "FINAL": final(f"tl.sum(tl.where(mask, {res_a}, 0.0), axis=0)"), "FINAL_ACC": final("tl.sum(acc, axis=0)"),
        "SINGLE_B": "\n".join(single_b), "SWEEP_B": "\n".join(sweep_b), "LINES_B": "\n".join(lines_b),
        "RESULT_B": res_b, "ARGS": ", ".join(args),
        "CONTIGUOUS": "\n".join(f"{x} = {x}.contiguous()" for x in args if not x.startswith("s")),
        "OUT_SHAPE_OF": f"{first}.shape", "OUT_DTYPE": str(g.post.out_dtype), "FIRST": first,
        "CALL": ", ".join(args), "BLOCK": p["BLOCK"], "num_warps": p["num_warps"],
    })
    call = ", ".join([o.expr for o in g.pre.operands] + [o.expr for _, o in ptrs_b] + g.pre.numbers)
    return text + fill(_MODEL, {"INIT": traced.init_source or DEFAULT_INIT,
                                "FORWARD": ", ".join(traced.forward_args) or "*inputs",
                                "BODY": f"return row_norm({call})"})


ROW_PARAMS = {"BLOCK": [512, 1024, 2048, 4096, 8192, 16384, 32768], "num_warps": [2, 4, 8, 16, 32]}


def row_norm_space(g: RowNormGraph, traced: Traced) -> SearchSpace:
    cols = g.post.shape[-1]
    # a row whole in registers where it fits 32 values a thread of 16 warps, else 4096-element chunks on 8 warps
    block = 1 << max(0, (cols - 1).bit_length())
    default = {"BLOCK": max(block, 512), "num_warps": max(2, min(16, block // 1024))} if block <= 16384 else \
        {"BLOCK": 4096, "num_warps": 8}
    held = 1 + sum(o.kind != "one" for o in g.pre.operands) + sum(o.kind not in ("one",) and o.expr != "r"
                                                                  for o in g.post.operands)
    limits = _held_limits(held)

    moves = []
    for b in ROW_PARAMS["BLOCK"]:
        for w in ROW_PARAMS["num_warps"]:
            per = b // (32 * w)
            if per in (4, 8, 16, 32):
                what = "the whole row in registers (one read)" if b >= cols else \
                    f"chunks of {b} (two sweeps of each row)"
                moves.append(Move(f"BLOCK {b} with {w} warps", f"{what}, {per} elements a thread.",
                                  {"BLOCK": b, "num_warps": w}))
    return SearchSpace(params=ROW_PARAMS, default=default, template=lambda p: render_row_norm(g, traced, p),
                       moves=moves, tuning=["BLOCK", "num_warps"], cases=(Case("row_norm", {}, timed=True),),
                       limits=limits)


def match_loss(traced: Traced):
    """Match: elementwise ops, one sum or mean of every element, scalar ops (a loss), or that scalar broadcast back
    over a tensor (x / ||x||_F); None for any other graph."""
    lg = match_loss_graph(traced)
    if lg is None:
        g = match_row_norm_graph(traced)
        return Match("row_reduce_norm", g.describe(), row_norm_space(g, traced)) if g is not None else None
    kind = "loss" if lg.post is None or lg.scalar_post else "global_norm"
    return Match(kind, lg.describe(), loss_space(lg, traced))

