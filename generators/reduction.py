"""A generated kernel family: a reduction of one dim (sum, mean, max, min: their values; logsumexp) that is no
family's.

The input is read as (outer, R, inner): each program reduces a BLOCK_R x BLOCK_I tile at a time along R for BLOCK_I
neighbouring inner positions (contiguous in memory, so the loads coalesce however the dim lies), in fp32, and
writes BLOCK_I results (logsumexp: a running maximum and a sum of exp(x - maximum) per column, rescaled as the
maximum grows, one sweep). Bytes: one read of x, one write of the result. The space: the tile (BLOCK_R, BLOCK_I) and
num_warps; a reduction of the last dim (inner = 1) starts from one column and long rows.
"""
from __future__ import annotations

import math

from kernelsearch.families.space import Move, SearchSpace, fill
from kernelsearch.judge.problem import Case

_KERNEL = '''@triton.jit
def _reduce_kernel(x_ptr, y_ptr, R, I, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # $WHAT: x read as (outer, R, inner); a BLOCK_R x BLOCK_I tile slides along R, reduced in fp32
    o = tl.program_id(0)
    i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = i < I
    base = x_ptr + tl.cast(o, tl.int64) * R * I
    acc = tl.full([BLOCK_R, BLOCK_I], $INIT, tl.float32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        m = (r[:, None] < R) & imask[None, :]
        v = tl.load(base + r[:, None] * I + i[None, :], mask=m, other=$INIT).to(tl.float32)
        acc = $COMBINE
    res = $REDUCE
    tl.store(y_ptr + tl.cast(o, tl.int64) * I + i, res.to(y_ptr.dtype.element_ty), mask=imask)
'''

# logsumexp: one sweep along R keeping each column's running maximum and its sum of exp(x - maximum), the sum
# rescaled when the maximum grows (the online softmax's recurrence); never exp(x) alone (it overflows past 88 in
# fp32). An infinite maximum (a column all -inf so far, or holding +inf) shifts by 0, as torch's logsumexp does: no
# inf - inf, and the result is -inf / inf as torch's.
_LSE_KERNEL = '''@triton.jit
def _reduce_kernel(x_ptr, y_ptr, R, I, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # $WHAT: x read as (outer, R, inner); a BLOCK_R x BLOCK_I tile slides along R; per column a running maximum and
    # the sum of exp(x - maximum), in fp32; the result log(sum) + maximum
    o = tl.program_id(0)
    i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = i < I
    base = x_ptr + tl.cast(o, tl.int64) * R * I
    top = tl.full([BLOCK_I], float("-inf"), tl.float32)
    acc = tl.zeros([BLOCK_I], tl.float32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        m = (r[:, None] < R) & imask[None, :]
        v = tl.load(base + r[:, None] * I + i[None, :], mask=m, other=float("-inf")).to(tl.float32)
        new = tl.maximum(top, tl.max(v, axis=0))
        shift = tl.where(tl.abs(new) == float("inf"), 0.0, new)
        acc = acc * tl.exp(top - shift) + tl.sum(tl.exp(v - shift[None, :]), axis=0)
        top = new
    shift = tl.where(tl.abs(top) == float("inf"), 0.0, top)
    res = tl.log(acc) + shift
    tl.store(y_ptr + tl.cast(o, tl.int64) * I + i, res.to(y_ptr.dtype.element_ty), mask=imask)
'''

_TEMPLATE = '''import math

import torch
import triton
import triton.language as tl


$KERNEL


def reduce_dim(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    shape = tuple(x.shape)
    d = $DIM
    outer, r, inner = math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:])
    y = torch.empty(shape[:d] + $KEPT + shape[d + 1:], dtype=x.dtype, device=x.device)
    if y.numel():
        _reduce_kernel[(outer, triton.cdiv(inner, $BLOCK_I))](x, y, r, inner, BLOCK_R=$BLOCK_R, BLOCK_I=$BLOCK_I,
                                                              num_warps=$num_warps)
    return y


import torch.nn as nn  # noqa: E402,F401 - what the reference's constructor may use


class ModelNew(torch.nn.Module):
    $INIT_SOURCE

    def forward(self, $FORWARD):
        return reduce_dim($X)
'''

_OPS = {   # op -> (initial value, combine, final reduction over the tile's rows)
    "sum": ("0.0", "acc + v", "tl.sum(acc, axis=0)"),
    "mean": ("0.0", "acc + v", "tl.sum(acc, axis=0) / R"),
    "max": ('float("-inf")', "tl.maximum(acc, v)", "tl.max(acc, axis=0)"),
    "min": ('float("inf")', "tl.minimum(acc, v)", "tl.min(acc, axis=0)"),
    "logsumexp": None,   # its own kernel (_LSE_KERNEL)
}

PARAMS = {"BLOCK_R": [1, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048],
          "BLOCK_I": [1, 16, 32, 64, 128, 256],
          "num_warps": [1, 2, 4, 8, 16]}


def reduction_space(op: str, dim: int, keepdim: bool, inner: int, x_name: str, forward: str, init: str,
                    what: str) -> SearchSpace:
    """The space of one reduction: `op` over `dim` of forward's `x_name`; `inner` (the elements after dim) picks the
    starting tile."""
    if op not in _OPS:
        raise ValueError(f"no reduction {op!r}")
    start, combine, final = _OPS[op] or ("", "", "")
    kernel = _LSE_KERNEL if op == "logsumexp" else _KERNEL

    def template(p: dict) -> str:
        return fill(_TEMPLATE, {"KERNEL": kernel, "WHAT": what, "INIT": start, "COMBINE": combine, "REDUCE": final,
                                "DIM": dim,
                                "KEPT": "(1,)" if keepdim else "()", "BLOCK_R": p["BLOCK_R"],
                                "BLOCK_I": p["BLOCK_I"], "num_warps": p["num_warps"], "INIT_SOURCE": init,
                                "FORWARD": forward, "X": x_name})

    default = {"BLOCK_R": 1024, "BLOCK_I": 1, "num_warps": 4} if inner == 1 else \
        {"BLOCK_R": 32, "BLOCK_I": 64, "num_warps": 4}

    def limits(p: dict, case) -> str | None:
        tile = p["BLOCK_R"] * p["BLOCK_I"]
        if tile > 16384:
            return f"a {p['BLOCK_R']} x {p['BLOCK_I']} tile is over 16384 fp32 values a program"
        if tile < 32 * p["num_warps"]:
            return f"a {p['BLOCK_R']} x {p['BLOCK_I']} tile leaves threads of {p['num_warps']} warps idle"
        return None

    moves = []
    for r in PARAMS["BLOCK_R"]:
        for i in PARAMS["BLOCK_I"]:
            if 128 <= r * i <= 8192 and (inner > 1 or i == 1):
                moves.append(Move(f"tile {r} x {i}", f"Reduce {r} rows of {i} neighbouring columns a step: "
                                  f"{r * i} values a step, {math.ceil(inner / i)} programs along the inner dims.",
                                  {"BLOCK_R": r, "BLOCK_I": i}))
    for w in PARAMS["num_warps"]:
        moves.append(Move(f"{w} warps", f"{w} warps a program.", {"num_warps": w}))
    return SearchSpace(params=PARAMS, default=default, template=template, moves=moves,
                       tuning=["BLOCK_R", "num_warps"], cases=(Case("reduction", {}, timed=True),), limits=limits)
