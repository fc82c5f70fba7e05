"""Sum-over-the-last-dimension search space: whole rows, row tiles swept in chunks, or rows split across programs.

Bytes: the floor is one read of x plus one value per row (spec.bytes_moved): at the timed fp32 8192 x 8192,
268 MB, 64 us at 4.2 TB/s. Every variant reads x once; they differ in how the work is cut. `single` holds
ROWS rows whole in registers (one load, one tree reduction); `chunked` sweeps a ROWS x BLOCK tile along the
rows with an fp32 accumulator (any width, loads pipelined); `split` cuts every row into SPLIT slices reduced
by separate programs and combined with fp32 atomic adds, for few, very wide rows (16 x 1M) where one program
per row leaves most SMs idle. The starter's figures: NOTES.md.
"""
from __future__ import annotations

from kernelsearch.families.reduce.spec import CASES
from kernelsearch.families.space import Move, SearchSpace, evict, fill, next_pow2

_PROLOGUE = '''import math

import torch
import triton
import triton.language as tl
'''

_SINGLE = '''

@triton.jit
def _sum_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    # ROWS rows whole in registers: one load of n_cols * size bytes a row, one tree reduction in fp32.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * x_stride + cols[None, :], mask=mask, other=0.0$X_HINT)
    tl.store(y_ptr + rows, tl.sum(x.to(tl.float32), axis=1).to(y_ptr.dtype.element_ty), mask=rows < n_rows)


def _launch(x, y, n_rows, n_cols):
    block = max(triton.next_power_of_2(n_cols), 16)
    if block * $ROWS > 65536:
        raise ValueError(f"sum kernel: {$ROWS} rows of {n_cols} do not fit in registers; use a chunked variant")
    _sum_rows_kernel[(triton.cdiv(n_rows, $ROWS),)](x, y, n_rows, n_cols, x.stride(0), BLOCK=block, ROWS=$ROWS,
                                                    num_warps=$num_warps)
'''

_CHUNKED = '''

@triton.jit
def _sum_chunked_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    # A ROWS x BLOCK tile slides along the rows adding into an fp32 accumulator; one tree reduction at the
    # end. x is read once; the loop's loads are pipelined num_stages deep.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows[:, None] < n_rows
    base = x_ptr + rows.to(tl.int64)[:, None] * x_stride
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
        cols = start + offs
        acc += tl.load(base + cols[None, :], mask=row_ok & (cols[None, :] < n_cols), other=0.0$X_HINT).to(tl.float32)
    tl.store(y_ptr + rows, tl.sum(acc, axis=1).to(y_ptr.dtype.element_ty), mask=rows < n_rows)


def _launch(x, y, n_rows, n_cols):
    _sum_chunked_kernel[(triton.cdiv(n_rows, $ROWS),)](x, y, n_rows, n_cols, x.stride(0), BLOCK=$BLOCK,
                                                       ROWS=$ROWS, num_warps=$num_warps)
'''

_SPLIT = '''

@triton.jit
def _sum_split_kernel(x_ptr, acc_ptr, n_rows, n_cols, x_stride, slice_len,
                      BLOCK: tl.constexpr, ROWS: tl.constexpr):
    # One program per (ROWS rows, slice of slice_len columns): a chunked fp32 sum of its slice, added to the
    # row's fp32 total with one atomic add per row (4 bytes a row per slice, nothing next to x).
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows[:, None] < n_rows
    base = x_ptr + rows.to(tl.int64)[:, None] * x_stride
    lo = tl.program_id(1) * slice_len
    hi = tl.minimum(lo + slice_len, n_cols)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in tl.range(lo, hi, BLOCK, num_stages=$num_stages):
        cols = start + offs
        acc += tl.load(base + cols[None, :], mask=row_ok & (cols[None, :] < hi), other=0.0$X_HINT).to(tl.float32)
    tl.atomic_add(acc_ptr + rows, tl.sum(acc, axis=1), mask=rows < n_rows, sem="relaxed")


@triton.jit
def _cast_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n).to(dst_ptr.dtype.element_ty), mask=offs < n)


def _launch(x, y, n_rows, n_cols):
    n_split = max(min($SPLIT, triton.cdiv(n_cols, $BLOCK)), 1)
    slice_len = triton.cdiv(triton.cdiv(n_cols, n_split), $BLOCK) * $BLOCK
    n_split = triton.cdiv(n_cols, slice_len)
    acc = y if y.dtype == torch.float32 else torch.empty(n_rows, dtype=torch.float32, device=x.device)
    acc.zero_()
    grid = (triton.cdiv(n_rows, $ROWS), n_split)
    _sum_split_kernel[grid](x, acc, n_rows, n_cols, x.stride(0), slice_len, BLOCK=$BLOCK, ROWS=$ROWS,
                            num_warps=$num_warps)
    if acc is not y:
        _cast_kernel[(triton.cdiv(n_rows, 1024),)](acc, y, n_rows, BLOCK=1024)
'''

_EPILOGUE = '''

def sum_last_dim(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"sum kernel: unsupported dtype {x.dtype}")
    if x.dim() == 0:
        raise ValueError("sum kernel: a 0-d tensor has no last dimension")
    shape = x.shape
    n_cols = shape[-1]
    n_rows = math.prod(shape[:-1])
    y = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        x2 = x.reshape(n_rows, n_cols)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        _launch(x2, y, n_rows, n_cols)
    elif n_rows:
        y.zero_()  # the sum over an empty dimension
    return y.reshape(shape[:-1])


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_last_dim(x)
'''


def _template(p: dict) -> str:
    body = {"single": _SINGLE, "chunked": _CHUNKED, "split": _SPLIT}[p["variant"]]
    return fill(_PROLOGUE + body + _EPILOGUE, {
        "X_HINT": evict("evict_first", p["cache_hints"]),
        "BLOCK": p["BLOCK"], "ROWS": p["ROWS"], "SPLIT": p["SPLIT"],
        "num_warps": p["num_warps"], "num_stages": p["num_stages"],
    })


PARAMS = {
    "variant": ["single", "chunked", "split"],
    "BLOCK": [128, 256, 512, 1024, 2048, 4096, 8192],
    "ROWS": [1, 2, 4, 8, 16],
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4],
    "cache_hints": [False, True],
    "SPLIT": [2, 4, 8, 16, 32, 64],
}

DEFAULT = {"variant": "chunked", "BLOCK": 2048, "ROWS": 1, "num_warps": 8, "num_stages": 3,
           "cache_hints": False, "SPLIT": 16}


def _moves() -> list[Move]:
    chunked = lambda p: p["variant"] != "single"  # noqa: E731
    split = lambda p: p["variant"] == "split"  # noqa: E731
    moves = [
        Move("whole rows in registers",
             "Load ROWS rows whole and reduce once: no loop, one load per element, best when rows are short.",
             {"variant": "single"}),
        Move("sweep row tiles in chunks",
             "Slide a ROWS x BLOCK tile along the rows into an fp32 accumulator: any width, loads pipelined "
             "num_stages deep, registers fixed by the tile.", {"variant": "chunked"}),
        Move("split rows across programs",
             "Cut every row into SPLIT slices reduced by separate programs and combined with fp32 atomic adds: "
             "with few, very wide rows (16 x 1M) one program per row leaves most SMs idle.",
             {"variant": "split"}),
        Move("evict x first", "x streams through once: load it with evict_first.", {"cache_hints": True}),
        Move("no cache hints", "Plain loads: let L2 manage itself.", {"cache_hints": False}),
    ]
    for r in PARAMS["ROWS"]:
        moves.append(Move(f"{r} rows per program",
                          f"{r} rows per program: short rows fill the warps and each program has more bytes in "
                          f"flight; long rows want fewer rows and more programs.", {"ROWS": r}))
    for b in PARAMS["BLOCK"]:
        for w in (2, 4, 8, 16):
            if not 1 <= b // (32 * w) <= 64:
                continue
            moves.append(Move(f"BLOCK {b} with {w} warps",
                              f"Chunks of {b} elements, {w} warps: {b // (32 * w)} elements per thread per row "
                              f"per load (16 bytes per thread makes one vector load).",
                              {"BLOCK": b, "num_warps": w}, when=chunked))
    for w in PARAMS["num_warps"]:
        moves.append(Move(f"{w} warps on whole rows",
                          f"Spread each in-register tile over {w} warps.", {"num_warps": w},
                          when=lambda p: p["variant"] == "single"))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"pipeline loads {s} deep",
                          f"num_stages={s}: the next chunks' loads are in flight while this one is added.",
                          {"num_stages": s}, when=chunked))
    for n in PARAMS["SPLIT"]:
        moves.append(Move(f"{n} slices per row",
                          f"Split each row into {n} slices: {n}x the programs, one atomic add per row and slice.",
                          {"SPLIT": n}, when=split))
    return moves


def shaped(case, cases) -> dict:
    """The starter's knobs at another shape than the timed 8192 x 8192 fp32 (a matched problem's): the default's
    tile kept, 2048 fp32 accumulators a program on 8 warps (8 a thread), its chunk cut to the row where the row is
    shorter (a 256-wide row is not swept by 2048-wide chunks, 7/8 masked) and rows packed to fill it; few rows of
    many columns (fewer than 2 x 132 rows, past 64K columns, as the family's 16 x 1M case) split each row over
    enough programs for two a SM. `chunked` runs any width, so no case of the problem refuses these."""
    cols, rows = case.params["cols"], case.params["rows"] * case.params.get("batch", 1)
    if rows < 264 and cols > 65536:
        return {"variant": "split", "SPLIT": min(PARAMS["SPLIT"][-1], next_pow2(-(-264 // rows)))}
    block = min(max(next_pow2(cols), PARAMS["BLOCK"][0]), DEFAULT["BLOCK"])
    tile_rows = min(PARAMS["ROWS"][-1], DEFAULT["BLOCK"] // block)
    return {"variant": "chunked", "BLOCK": block, "ROWS": tile_rows,
            "num_warps": min(PARAMS["num_warps"][-1], max(1, block * tile_rows // 256))}


SPACE = SearchSpace(params=PARAMS, default=DEFAULT, template=_template, moves=_moves(), shaped=shaped,
                    tuning=["num_warps", "num_stages", "BLOCK", "ROWS", "SPLIT"],
                    cases=CASES)  # no feasibility model yet: every point is taken as feasible
