"""The offline provider on the triplet margin loss (`nn.TripletMarginLoss` with p = 2, no swap, mean or sum; KernelBench
level 1's 99): for each row, d+ = ||a - p + eps||_2 and d- = ||a - n + eps||_2 over the last dim, the row's loss
max(d+ - d- + margin, 0), then the mean (or sum) over rows. Matched from the traced graph exactly (sub, add eps,
norm, twice; add margin, sub, clamp_min 0, mean or sum), margin and eps read from it.

Two kernels, deterministic: one program a row sweeps its D columns in BLOCK chunks, holding the two sums of squares
in fp32 lanes (each of the three inputs read once: the floor), and writes the row's loss; then one program sums the
rows' losses in a fixed order. Space: BLOCK with num_warps (the values a thread holds of each input a step).
The candidate's constructor takes the reference's arguments and keeps none: the margin is the traced one (the
reference's loss module is not instantiated: a torch module without weights is torch compute to the static scan).
"""
from __future__ import annotations

import torch

from kernelsearch.families.space import Move, SearchSpace, fill
from kernelsearch.generators.common import Match
from kernelsearch.judge.problem import Case

_CASES = (Case("matched", {}, timed=True),)

_TRIPLET = '''import torch
import triton
import triton.language as tl


@triton.jit
def _triplet_rows_kernel(a_ptr, p_ptr, n_ptr, loss_ptr, D, margin, eps, BLOCK: tl.constexpr):
    # $WHAT: one row, its D columns in BLOCK chunks; the two distances' sums of squares in fp32 lanes
    row = tl.program_id(0)
    base = tl.cast(row, tl.int64) * D
    lanes = tl.arange(0, BLOCK)
    s_pos = tl.zeros([BLOCK], dtype=tl.float32)
    s_neg = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, D, BLOCK):
        cols = start + lanes
        mask = cols < D
        a = tl.load(a_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        p = tl.load(p_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        n = tl.load(n_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        dp = tl.where(mask, a - p + eps, 0.0)
        dn = tl.where(mask, a - n + eps, 0.0)
        s_pos += dp * dp
        s_neg += dn * dn
    loss = tl.sqrt(tl.sum(s_pos, axis=0)) - tl.sqrt(tl.sum(s_neg, axis=0)) + margin
    tl.store(loss_ptr + row, tl.maximum(loss, 0.0))


@triton.jit
def _rows_total_kernel(loss_ptr, y_ptr, R, scale, BLOCK: tl.constexpr):
    # the rows' losses summed in a fixed order (one program), times 1/R for the mean
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, R, BLOCK):
        acc += tl.load(loss_ptr + start + lanes, mask=start + lanes < R, other=0.0)
    tl.store(y_ptr, tl.sum(acc, axis=0) * scale)


def triplet_loss(anchor, positive, negative):
    a, p, n = anchor.contiguous(), positive.contiguous(), negative.contiguous()
    rows, d = a.shape
    loss = torch.empty(rows, dtype=torch.float32, device=a.device)
    y = torch.empty((), dtype=a.dtype, device=a.device)
    if rows == 0:
        return y.fill_($EMPTY)   # torch's mean of no rows is nan, its sum 0
    _triplet_rows_kernel[(rows,)](a, p, n, loss, d, $MARGIN, $EPS, BLOCK=$BLOCK, num_warps=$num_warps)
    _rows_total_kernel[(1,)](loss, y, rows, $SCALE, BLOCK=1024, num_warps=4)
    return y


import torch.nn as nn  # noqa: E402,F401


class ModelNew(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, $FORWARD):
        return triplet_loss($A, $P, $N)
'''

PARAMS = {"BLOCK": [256, 512, 1024, 2048, 4096, 8192], "num_warps": [1, 2, 4, 8, 16]}


def triplet_space(margin: float, eps: float, mean: bool, names: tuple[str, str, str], traced, what: str) -> SearchSpace:
    def template(p: dict) -> str:
        return fill(_TRIPLET, {"WHAT": what, "MARGIN": repr(float(margin)), "EPS": repr(float(eps)),
                               "EMPTY": 'float("nan")' if mean else "0.0",
                               "SCALE": "1.0 / rows" if mean else "1.0", "BLOCK": p["BLOCK"],
                               "num_warps": p["num_warps"],
                               "FORWARD": ", ".join(traced.forward_args), "A": names[0], "P": names[1],
                               "N": names[2]})

    def limits(p: dict, case) -> str | None:
        per = p["BLOCK"] // (32 * p["num_warps"])
        if not 1 <= per <= 16:   # three inputs and two accumulators a step: 5 x 16 = 80 fp32 registers at most
            return f"a block of {p['BLOCK']} on {p['num_warps']} warps is {per} values a thread of each input (1 to 16)"
        return None

    moves = [Move(f"blocks of {b}", f"Sweep each row in blocks of {b} columns.", {"BLOCK": b}) for b in PARAMS["BLOCK"]]
    moves += [Move(f"{w} warps", f"{w} warps a row's program.", {"num_warps": w}) for w in PARAMS["num_warps"]]
    return SearchSpace(params=PARAMS, default={"BLOCK": 2048, "num_warps": 8}, template=template, moves=moves,
                       tuning=["BLOCK", "num_warps"], cases=_CASES, limits=limits)


def match_triplet(traced):
    from kernelsearch.generators.trace import op_name

    def is_op(node, name: str) -> bool:
        return isinstance(node, torch.fx.Node) and op_name(node) == name

    def number(v) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def distance(node):
        """norm(x - y + eps, 2, [1]) -> (x input, y input, eps), else None."""
        if not is_op(node, "norm") or len(node.args) < 3 or number(node.args[1]) != 2.0 or \
                list(node.args[2]) not in ([1], [-1]) or (len(node.args) > 3 and node.args[3]) or node.kwargs:
            return None
        add = node.args[0]
        if not is_op(add, "add") or number(add.args[1]) is None or not is_op(add.args[0], "sub"):
            return None
        x, y = (traced.input_of(v) if isinstance(v, torch.fx.Node) else None for v in add.args[0].args[:2])
        if x is None or y is None or x.kind != "tensor" or y.kind != "tensor":
            return None
        return x, y, number(add.args[1])

    out = traced.output
    if not (is_op(out, "mean") or is_op(out, "sum")) or len(out.args) != 1 or out.kwargs:
        return None
    cm = out.args[0]
    if not is_op(cm, "clamp_min") or number(cm.args[1]) != 0.0:
        return None
    s = cm.args[0]
    if not is_op(s, "sub") or not is_op(s.args[0], "add") or number(s.args[0].args[1]) is None:
        return None
    margin = number(s.args[0].args[1])
    pos, neg = distance(s.args[0].args[0]), distance(s.args[1])
    if pos is None or neg is None or pos[0] is not neg[0] or pos[2] != neg[2]:
        return None
    a, p, n = pos[0], pos[1], neg[1]
    if len({a.name, p.name, n.name}) != 3 or len(traced.ops) != 10:
        return None
    shapes = {tuple(v.shape) for v in (a, p, n)}
    if len(shapes) != 1 or len(a.shape) != 2 or any(v.dtype != torch.float32 for v in (a, p, n)):
        return None
    mean = op_name(out) == "mean"
    summary = (f"triplet margin loss (margin {margin:g}, eps {pos[2]:g}, {'mean' if mean else 'sum'}) of "
               f"{'x'.join(map(str, a.shape))} float32 rows")
    return Match("triplet_loss", summary, triplet_space(margin, pos[2], mean, (a.name, p.name, n.name), traced,
                                                       summary))
