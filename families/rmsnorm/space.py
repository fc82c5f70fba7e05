"""RMSNorm search space: each row whole in registers (one read) or swept in chunks (two reads of a row).

Bytes: the floor is one read of x, one write of y and one read of the weight (spec.bytes_moved): at the
timed bf16 8192 x 4096 that is 134 MB, 32 us at 4.2 TB/s. `single` meets it: the row is loaded once, reduced
and scaled in registers. `chunked` reads each row twice (the second read mostly hits L2: a 4096-wide bf16 row
is 8 KB) and is the variant for rows too wide for registers. A persistent grid loads the weight once per
program instead of once per row (8 KB of L2 traffic per row at the timed size). The starter's figures: NOTES.md.
"""
from __future__ import annotations

from kernelsearch.families.rmsnorm.spec import CASES
from kernelsearch.families.space import (
    Move,
    SearchSpace,
    evict,
    fill,
    next_pow2,
    num_programs,
    packed_rows,
    per_thread,
    programs_per_sm,
    register_limit,
)
from kernelsearch.judge.problem import Case

_PROLOGUE = '''import torch
import triton
import triton.language as tl
'''

_SINGLE = '''

@triton.jit
def _rmsnorm_rows_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                         BLOCK: tl.constexpr, ROWS: tl.constexpr, PERSISTENT: tl.constexpr):
    # ROWS rows per step, each whole in registers: x is read once and y written once (2 * n_cols * size
    # bytes a row); the weight is loaded once per program and reused for every row it handles.
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0$W_HINT).to(tl.float32)
    n_groups = tl.cdiv(n_rows, ROWS)
    step = tl.num_programs(0) if PERSISTENT else n_groups
    for g in range(tl.program_id(0), n_groups, step):
        rows = g * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < n_rows) & col_ok[None, :]
        rows64 = rows.to(tl.int64)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=0.0$X_HINT)
        x = x.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + rows64[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, w, y, n_rows, n_cols, eps):
    block = max(triton.next_power_of_2(n_cols), 16)
    rows = $ROWS
    if block * rows > 65536:
        raise ValueError(f"rmsnorm: {rows} rows of {n_cols} do not fit in one program's registers; use fewer "
                         f"rows per program or the chunked variant")
    groups = triton.cdiv(n_rows, rows)
    grid = (min(groups, _num_programs(x)),) if $PERSISTENT else (groups,)
    _rmsnorm_rows_kernel[grid](x, w, y, n_rows, n_cols, x.stride(0), y.stride(0), eps,
                               BLOCK=block, ROWS=rows, PERSISTENT=$PERSISTENT,
                               num_warps=$num_warps, num_stages=$num_stages)
'''

_CHUNKED = '''

@triton.jit
def _rmsnorm_chunked_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                            BLOCK: tl.constexpr, PERSISTENT: tl.constexpr):
    # Sweep 1 sums squares in a BLOCK-wide fp32 accumulator; sweep 2 reloads x (from L2 for rows of a few
    # tens of KB) and writes: 3 * n_cols * size bytes a row through the SM, 2 * n_cols * size from DRAM.
    offs = tl.arange(0, BLOCK)
    step = tl.num_programs(0) if PERSISTENT else n_rows
    for row in range(tl.program_id(0), n_rows, step):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        y_row = y_ptr + tl.cast(row, tl.int64) * y_stride
        acc = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            acc += x * x
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0$X_HINT).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0$W_HINT).to(tl.float32)
            tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def _launch(x, w, y, n_rows, n_cols, eps):
    grid = (min(n_rows, _num_programs(x)),) if $PERSISTENT else (n_rows,)
    _rmsnorm_chunked_kernel[grid](x, w, y, n_rows, n_cols, x.stride(0), y.stride(0), eps,
                                  BLOCK=$BLOCK, PERSISTENT=$PERSISTENT, num_warps=$num_warps)
'''

_EPILOGUE = '''

$NUM_PROGRAMS


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"rmsnorm kernel: unsupported dtype {x.dtype}")
    if weight.shape != (x.shape[-1],):
        raise ValueError(f"rmsnorm kernel: weight of shape {tuple(weight.shape)} for rows of {x.shape[-1]}")
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows, n_cols = x2.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        _launch(x2, weight.contiguous(), y, n_rows, n_cols, eps)
    return y.reshape(shape)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)
'''


def _template(p: dict) -> str:
    body = {"single": _SINGLE, "chunked": _CHUNKED}[p["variant"]]
    hints = p["cache_hints"]
    return fill(_PROLOGUE + body + _EPILOGUE, {
        # x is streamed once: evict it first; the weight is reused by every row: keep it in L2
        "X_HINT": evict("evict_first", hints), "W_HINT": evict("evict_last", hints),
        "ROWS": p["ROWS"], "BLOCK": p["BLOCK"], "PERSISTENT": p["persistent"],
        "num_warps": p["num_warps"], "num_stages": p["num_stages"],
        "NUM_PROGRAMS": num_programs(programs_per_sm(p, p["persistent"])),
    })


PARAMS = {
    "variant": ["single", "chunked"],
    "BLOCK": [256, 512, 1024, 2048, 4096, 8192],
    "ROWS": [1, 2, 4, 8],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
    "persistent": [False, True],
    "programs_per_sm": [1, 2, 4, 8],
    "cache_hints": [False, True],
}

# the starter: the row in registers, with cache hints (NOTES.md)
DEFAULT = {"variant": "single", "BLOCK": 2048, "ROWS": 1, "num_warps": 8, "num_stages": 2,
           "persistent": False, "programs_per_sm": 4, "cache_hints": True}


def _moves() -> list[Move]:
    single = lambda p: p["variant"] == "single"  # noqa: E731
    chunked = lambda p: p["variant"] == "chunked"  # noqa: E731
    moves = [
        Move("keep the row in registers",
             "Load each row whole (BLOCK = next power of two of the width): x is read from memory once, "
             "2 * width * size bytes a row, the floor.", {"variant": "single"}),
        Move("sweep the row in chunks",
             "Sum squares over BLOCK-wide chunks, then reload and scale: registers no longer grow with the "
             "width, at the price of a second read of each row (from L2 when rows are a few tens of KB).",
             {"variant": "chunked"}),
        Move("persistent grid",
             "A few programs per SM loop over rows: the weight is loaded once per program instead of once per "
             "row (saves width * size bytes of L2 traffic a row), and launch and tail effects shrink.",
             {"persistent": True}),
        Move("one program per row group",
             "Launch one program per row (group) and let the hardware schedule them.", {"persistent": False}),
        Move("cache hints",
             "Load x with evict_first (it is read once) and the weight with evict_last (every row reuses it), "
             "so the streaming rows do not push the weight out of L2.", {"cache_hints": True}),
        Move("no cache hints", "Plain loads: let L2 manage itself.", {"cache_hints": False}),
    ]
    for r in PARAMS["ROWS"]:
        moves.append(Move(f"pack {r} rows per program",
                          f"Process {r} rows per step as a 2-D block: with narrow rows one row leaves threads "
                          f"idle, and more bytes in flight per program hide DRAM latency.",
                          {"variant": "single", "ROWS": r}))
    for w in (2, 4, 8, 16, 32):
        moves.append(Move(f"{w} warps on the whole row",
                          f"Spread the in-register row over {w} warps: fewer elements per thread cuts registers "
                          f"and raises occupancy; more elements per thread gives wider loads.",
                          {"num_warps": w}, when=single))
    for b in PARAMS["BLOCK"]:
        for w in (4, 8, 16):
            moves.append(Move(f"BLOCK {b} with {w} warps",
                              f"Chunks of {b} elements per iteration, {w} warps per program: "
                              f"{max(b // (32 * w), 1)} elements per thread per load.",
                              {"BLOCK": b, "num_warps": w}, when=chunked))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"pipeline loads {s} deep",
                          f"num_stages={s} on the chunk loops so the next chunk's loads are in flight while the "
                          f"current one is reduced.", {"num_stages": s}, when=chunked))
    for n in PARAMS["programs_per_sm"]:
        moves.append(Move(f"{n} persistent programs per SM",
                          f"{n} resident programs per SM: more hides latency, fewer reuses the weight more.",
                          {"programs_per_sm": n}, when=lambda p: p["persistent"]))
    return moves


def limits(p: dict, case: Case) -> str | None:
    """Why `p` cannot run at `case` on an H200, or None (space.py's feasibility; calibrated against sm_90 compiles
    with bench/feasibility.py rmsnorm: its figures in NOTES.md)."""
    cols = case.params["cols"]
    if p["variant"] == "single":
        block = max(next_pow2(cols), 16)
        if block * p["ROWS"] > 65536:   # the launcher's own refusal (a crash at every call)
            return f"{p['ROWS']} rows of {cols} (BLOCK {block}) are over the launcher's 65536 elements a program"
        # x for ROWS rows and the weight's columns, spread over the program's threads
        held = per_thread(block * p["ROWS"], p["num_warps"]) + per_thread(block, p["num_warps"])
        return register_limit(held, p["num_warps"], f"{p['ROWS']} rows of BLOCK {block} on {p['num_warps']} warps")
    # chunked: the fp32 accumulator, x and the weight of one chunk
    held = 3 * per_thread(p["BLOCK"], p["num_warps"])
    return register_limit(held, p["num_warps"], f"chunks of {p['BLOCK']} on {p['num_warps']} warps")


def shaped(case, cases) -> dict:
    """The starter's knobs at another shape than the timed 8192 x 4096 bf16 (a model's, a matched problem's): the
    rows in registers with the tile the default has there, 8 KB a program (one 4096-wide bf16 row) on 8 warps,
    32 B a thread, so short rows pack several a program on fewer warps: as many as `limits` accepts at every one
    of `cases` (one kernel runs them all: beside the family's 16384-wide case, none)."""
    point = packed_rows(case, cases, {**DEFAULT, "variant": "single"}, limits, 8192, 32,
                        [w for w in PARAMS["num_warps"] if w <= 16], PARAMS["BLOCK"])
    if point is None:   # a row past registers at some case: the chunked sweep
        return {"variant": "chunked", "BLOCK": 4096, "num_warps": 8}
    return point


SPACE = SearchSpace(params=PARAMS, default=DEFAULT, template=_template, moves=_moves(), shaped=shaped,
                    tuning=["num_warps", "num_stages", "BLOCK", "ROWS", "programs_per_sm"],
                    cases=CASES, limits=limits)
