"""Softmax search space: each row whole in registers (alone, pipelined with the next row, or split over
cooperating programs) or swept in chunks (an online max/sum sweep, or three plain sweeps).

Bytes: the floor is one read of x and one write of y (spec.bytes_moved). `single`, `pipelined` and `coop` meet
it; `online` reads a row twice (the second read mostly hits L2: a 32000-wide bf16 row is 64 KB); `three_pass`
reads it three times. How the starter was chosen, with the figures: NOTES.md.
"""
from __future__ import annotations

from kernelsearch.families.softmax.spec import CASES
from kernelsearch.families.space import (
    ELEMENT_BYTES,
    PIPELINED_ROWS,
    Move,
    SearchSpace,
    evict,
    fill,
    next_pow2,
    num_programs,
    packed_rows,
    programs_per_sm,
    row_tile,
    tl_exp,
)

_PROLOGUE = '''import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # jit code may only read constexpr globals
'''

# sweep 1 of the online kernel. `lane`: a running max and sum per lane, rescaled per element (two
# exponentials per element); `chunk`: each chunk reduced to its max first, one scalar running sum rescaled
# per chunk (one exponential per element, one cross-warp max per chunk)
_SWEEP1 = {
    "lane": """        m = tl.full([BLOCK], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")$HINT1).to(tl.float32)
            m_new = tl.maximum(m, x)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * $EXP_ALPHA + $EXP_X
            m = m_new
        m_row = tl.max(m, axis=0)
        s_row = tl.sum(s * $EXP_LANE, axis=0)
""",
    "chunk": """        m_row = tl.full([], float("-inf"), tl.float32)
        s_row = tl.full([], 0.0, tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")$HINT1).to(tl.float32)
            m_new = tl.maximum(m_row, tl.max(x, axis=0))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s_row = s_row * $EXP_ROW_ALPHA + tl.sum($EXP_X, axis=0)
            m_row = m_new
""",
}

_SINGLE = '''

@triton.jit
def _softmax_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride,
                         BLOCK: tl.constexpr, ROWS: tl.constexpr, PERSISTENT: tl.constexpr):
    # ROWS rows per program, each row whole in registers: one read, one write per element.
    cols = tl.arange(0, BLOCK)
    n_groups = tl.cdiv(n_rows, ROWS)
    step = tl.num_programs(0) if PERSISTENT else n_groups
    for g in range(tl.program_id(0), n_groups, step):
        rows = g * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        rows64 = rows.to(tl.int64)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=float("-inf"))
        x = x.to(tl.float32)
        m = tl.max(x, axis=1)
        m = tl.where(m == float("-inf"), 0.0, m)  # padding rows: keep them finite
        e = $EXP_E
        e = tl.where(mask, e, 0.0)
        s = tl.sum(e, axis=1)
        y = e * (1.0 / s)[:, None]
        tl.store(y_ptr + rows64[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, y, n_rows, n_cols):
    block = max(triton.next_power_of_2(n_cols), 16)
    rows = $ROWS
    if rows > 1 and block * rows > 65536:   # over 256 KB of fp32 a program: it spills, or compiles for minutes
        raise ValueError(f"softmax: {rows} rows of {n_cols} do not fit in one program's registers; "
                         f"use fewer rows per program or a chunked variant")
    warps = $num_warps
    while warps < 32 and block * rows > 64 * 32 * warps:   # rows far wider than the warps were picked for (a
        warps *= 2                                         # 32000-wide correctness case): 64 values a thread, not spills
    groups = triton.cdiv(n_rows, rows)
    grid = (min(groups, _num_programs(x)),) if $PERSISTENT else (groups,)
    _softmax_rows_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                               BLOCK=block, ROWS=rows, PERSISTENT=$PERSISTENT,
                               num_warps=warps, num_stages=$num_stages)
'''

_ONLINE = '''

@triton.jit
def _softmax_online_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride,
                           BLOCK: tl.constexpr, PERSISTENT: tl.constexpr):
    # Sweep 1 keeps a running max and a running sum per lane (the online softmax); sweep 2 writes.
    offs = tl.arange(0, BLOCK)
    step = tl.num_programs(0) if PERSISTENT else n_rows
    for row in range(tl.program_id(0), n_rows, step):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        y_row = y_ptr + tl.cast(row, tl.int64) * y_stride
        $SWEEP1
        inv = 1.0 / s_row
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")$HINT2).to(tl.float32)
            y = $EXP_OUT * inv
            tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols$HINT_STORE)


def _launch(x, y, n_rows, n_cols):
    grid = (min(n_rows, _num_programs(x)),) if $PERSISTENT else (n_rows,)
    _softmax_online_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                 BLOCK=$BLOCK, PERSISTENT=$PERSISTENT, num_warps=$num_warps)
'''

_COOP = '''

@triton.jit
def _softmax_coop_kernel(x_ptr, y_ptr, slot_ptr, n_cols, x_stride, y_stride, slice_len,
                         SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # SPLIT programs share a row, each holding its slice in registers: x is read from memory once even when a
    # row is wider than one program can hold. Each publishes (slice max, slice sum of exp) packed in one 64-bit
    # word with one atomic exchange (the value is its own ready flag: a packed pair is never 0), waits for the
    # others' words, and combines them. The parts of a row are consecutive program ids, so they are dispatched
    # together; a part only waits on parts of its own row.
    pid = tl.program_id(0)
    row = pid // SPLIT
    part = pid % SPLIT
    x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
    y_row = y_ptr + tl.cast(row, tl.int64) * y_stride
    cols = part * slice_len + tl.arange(0, BLOCK)
    mask = (cols < n_cols) & (tl.arange(0, BLOCK) < slice_len)
    x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    s = tl.sum(tl.where(mask, $EXP_X, 0.0), axis=0)
    word = (m.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | s.to(tl.uint32, bitcast=True).to(tl.uint64)
    slots = slot_ptr + tl.cast(row, tl.int64) * SPLIT
    tl.atomic_xchg(slots + part, word.to(tl.int64, bitcast=True), sem="release", scope="gpu")
    parts = tl.arange(0, SPLIT)
    words = tl.atomic_add(slots + parts, 0, sem="acquire", scope="gpu")
    while tl.min(tl.where(words == 0, 0, 1), axis=0) == 0:
        words = tl.atomic_add(slots + parts, 0, sem="acquire", scope="gpu")
    u = words.to(tl.uint64, bitcast=True)
    ms = (u >> 32).to(tl.uint32).to(tl.float32, bitcast=True)
    ss = (u & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)
    m_row = tl.max(ms, axis=0)
    m_row = tl.where(m_row == float("-inf"), 0.0, m_row)
    s_row = tl.sum(tl.where(ss > 0, ss * $EXP_COMBINE, 0.0), axis=0)
    y = $EXP_OUT * (1.0 / s_row)
    tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, y, n_rows, n_cols):
    # Triton's interpreter runs programs one after another, so a part would wait forever for the next one:
    # there a row is one part (the same code, the exchange with itself). Compiled, a row is cut into SPLIT
    # parts, more (a power of two) when a part would exceed MAX_PART columns.
    if os.environ.get("TRITON_INTERPRET") == "1":
        split = 1
    else:
        split = triton.next_power_of_2(max($SPLIT, triton.cdiv(n_cols, $MAX_PART)))
    slice_len = triton.cdiv(n_cols, split)
    block = max(triton.next_power_of_2(slice_len), 16)
    slots = torch.zeros(n_rows * split, dtype=torch.int64, device=x.device)
    _softmax_coop_kernel[(n_rows * split,)](x, y, slots, n_cols, x.stride(0), y.stride(0), slice_len,
                                            SPLIT=split, BLOCK=block, num_warps=$num_warps)
'''

_PIPELINED = '''

@triton.jit
def _softmax_pipelined_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    # Persistent, each program's rows whole in registers in turn, software-pipelined by one row: the next
    # row's loads are issued (in x's own dtype, half the registers of fp32 for bf16) before this row's max,
    # exponentials, sum and store, so they are in flight while this row is reduced. With one 1024-thread
    # program per SM (all a 64 KB row in registers allows) the `single` variant's loads stop at every row's
    # reductions; here a row's reductions overlap the next row's 64 KB on its way.
    $PIPELINED_ROWS
        m = tl.max(x, axis=0)
        e = $EXP_PIPE
        e = tl.where(cmask, e, 0.0)
        y = e * (1.0 / tl.sum(e, axis=0))
        tl.store(y_ptr + tl.cast(row, tl.int64) * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=cmask)


def _launch(x, y, n_rows, n_cols):
    block = max(triton.next_power_of_2(n_cols), 16)
    if block > 32768:   # two rows' worth of registers a program: past 32K columns it spills
        raise ValueError(f"softmax pipelined: a row of {n_cols} and the next one do not fit in one program's "
                         f"registers; use the coop or online variant")
    grid = (min(n_rows, _num_programs(x)),)
    _softmax_pipelined_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0), BLOCK=block,
                                    num_warps=$num_warps)
'''

_THREE_PASS = '''

@triton.jit
def _softmax_three_pass_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    # max sweep, sum sweep, write sweep: three reads of the row.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
        cols = start + offs
        m = tl.maximum(m, tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32))
    m_row = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        s += $EXP_OUT
    inv = 1.0 / tl.sum(s, axis=0)
    for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(y_row + cols, ($EXP_OUT * inv).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def _launch(x, y, n_rows, n_cols):
    _softmax_three_pass_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=$BLOCK,
                                         num_warps=$num_warps)
'''

_EPILOGUE = '''

$NUM_PROGRAMS


def softmax(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"softmax kernel: unsupported dtype {x.dtype}")
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows, n_cols = x2.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        _launch(x2, y, n_rows, n_cols)
    return y.reshape(shape)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x)
'''


def _template(p: dict) -> str:
    body = {"single": _SINGLE, "online": _ONLINE, "three_pass": _THREE_PASS, "coop": _COOP,
            "pipelined": _PIPELINED}[p["variant"]]
    exp = lambda x: tl_exp(x, p["exp2"])  # noqa: E731
    hints = p["cache_hints"]
    # (coop and three_pass launch no persistent grid, whatever `persistent` says; pipelined always does)
    persistent_grid = (p["persistent"] and p["variant"] in ("single", "online")) or p["variant"] == "pipelined"
    return fill(_PROLOGUE + body + _EPILOGUE, {
        "SWEEP1": _SWEEP1[p["stats"]], "PIPELINED_ROWS": PIPELINED_ROWS,
        # L2 residency between the online kernel's two reads of a row: the first read asks to keep the lines,
        # the second and the output stream past them
        "HINT1": evict("evict_last", hints), "HINT2": evict("evict_first", hints),
        "HINT_STORE": evict("evict_first", hints),
        "EXP_ROW_ALPHA": exp("m_row - m_safe"),
        "EXP_E": exp("x - m[:, None]"),
        "EXP_PIPE": exp("x - m"),
        "EXP_ALPHA": exp("m - m_safe"),
        "EXP_X": exp("x - m_safe"),
        "EXP_LANE": exp("m - m_row"),
        "EXP_OUT": exp("x - m_row"),
        "EXP_COMBINE": exp("ms - m_row"),
        "SPLIT": p["SPLIT"], "MAX_PART": 16384,
        "ROWS": p["ROWS"], "BLOCK": p["BLOCK"], "PERSISTENT": p["persistent"],
        "num_warps": p["num_warps"], "num_stages": p["num_stages"],
        "NUM_PROGRAMS": num_programs(programs_per_sm(p, persistent_grid)),
    })


PARAMS = {
    "variant": ["online", "single", "three_pass", "coop", "pipelined"],
    "BLOCK": [512, 1024, 2048, 4096, 8192, 16384],
    "ROWS": [1, 2, 4, 8],
    "num_warps": [2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
    "persistent": [False, True],
    "programs_per_sm": [1, 2, 4, 8],
    "exp2": [False, True],
    "stats": ["lane", "chunk"],
    "SPLIT": [2, 4, 8],
    "cache_hints": [False, True],
}

# the starter: the row in registers, pipelined by one row (NOTES.md)
DEFAULT = {"variant": "pipelined", "BLOCK": 2048, "ROWS": 1, "num_warps": 32, "num_stages": 1,
           "persistent": False, "programs_per_sm": 1, "exp2": True, "stats": "lane", "cache_hints": False,
           "SPLIT": 4}


def shaped(case, cases) -> dict:
    """The starter's knobs at another shape than the timed 4096 x 32000 bf16 (a model's, a matched problem's). The
    default holds a 64 KB row on 1024 threads (64 B a thread) and sizes its block to the row, so a short row leaves
    most of them idle (a 1 KB bf16 row of 512: 1024 threads for 512 elements, half of them holding none). So:
    - rows too wide for two in registers (past 32768 columns): the online sweep, 16 warps, 4096-wide chunks;
    - rows of 8 KB and more: the default's pipelined row, warps scaled to the row (64 B a thread, as tuned) and
      as many programs per SM as keep its 32 warps on each SM;
    - shorter rows: `single`, ROWS rows a program packed to about 8 KB of x, as many as the launcher takes at the
      widest of `cases` (the problem's correctness cases run the same kernel), 32 B a thread (16 bf16 or 8 fp32
      elements: two 128-bit loads), one program per row group, programs_per_sm set to fill an SM's 64 warps should
      a move make the grid persistent. 131072 rows of 512 bf16 beside the family's 32000-wide case: 2 rows on 2
      warps, 65536 programs of 2 KB, up to 32 resident a SM (64 warps: full occupancy, 64 KB of x in flight).
    """
    cols = case.params["cols"]
    block = max(next_pow2(cols), 16)
    if block > 32768:
        return {"variant": "online", "BLOCK": 4096, "num_warps": 16, "stats": "lane"}
    if block * ELEMENT_BYTES.get(case.dtype, 4) >= 8192:
        _, _, warps = row_tile(cols, case.dtype, 65536, 64, PARAMS["num_warps"], max_rows=1)
        return {"variant": "pipelined", "num_warps": warps, "programs_per_sm": min(8, max(1, 32 // warps))}
    point = packed_rows(case, cases, {**DEFAULT, "variant": "single", "persistent": False}, limits, 8192, 32,
                        PARAMS["num_warps"][:-1], PARAMS["BLOCK"])
    if point is None:
        return {}
    return {**point, "programs_per_sm": min(8, 64 // point["num_warps"])}


def _moves() -> list[Move]:
    chunked = lambda p: p["variant"] != "single"  # noqa: E731
    moves = [
        Move("keep the row in registers",
             "Load each row whole (BLOCK = next power of two of the width) so x is read from memory exactly "
             "once: max, exp, sum and the scaled write all happen on registers.", {"variant": "single"}),
        Move("one pass with an online max",
             "Sweep the row once keeping a running max and a rescaled running sum per lane (online softmax), "
             "then one write sweep: two reads instead of three, and rows of any width fit.",
             {"variant": "online"}),
        Move("split each row over programs that exchange max and sum",
             "Cut each row into SPLIT slices, one program each, every slice held in registers; the programs of "
             "a row exchange (slice max, slice sum of exp) through one 64-bit atomic word each and then write "
             "their slices: one read and one write per element even for rows too wide for one program.",
             {"variant": "coop", "SPLIT": 4, "num_warps": 16}),
        Move("load the next row while reducing this one",
             "Persistent programs, one per SM with 32 warps, each row whole in registers; the next row's loads "
             "are issued before this row's max and sum, so memory stays busy through the reductions (one read "
             "and one write per element, and no stall between rows).",
             {"variant": "pipelined", "num_warps": 32, "programs_per_sm": 1}),
        Move("three plain sweeps",
             "Separate max, sum and write sweeps; simplest code, three reads of each row, for comparison.",
             {"variant": "three_pass"}),
        Move("exp2 with a pre-scaled log2(e)",
             "Use exp2(x * log2 e), which maps to one MUFU.EX2 instruction, instead of exp.", {"exp2": True}),
        Move("one exponential per element in the first sweep",
             "Reduce each chunk to its max first and rescale one scalar running sum per chunk, instead of a "
             "running max and sum per lane rescaled at every element: the first sweep then costs one "
             "exponential per element, not two (MUFU throughput bounds a bf16 row sweep).",
             {"stats": "chunk"}, when=lambda p: p["variant"] == "online"),
        Move("per-lane running max and sum",
             "Keep a running max and sum per lane (no cross-warp reduction per chunk, two exponentials per "
             "element).", {"stats": "lane"}, when=lambda p: p["variant"] == "online"),
        Move("keep the row in L2 between its two reads",
             "Load the first sweep with evict_last and the second with evict_first, and store y with "
             "evict_first, so a row read twice stays in L2 while the output streams past it.",
             {"cache_hints": True}, when=lambda p: p["variant"] == "online"),
        Move("rows in flight sized to L2",
             "One persistent program per SM (16 warps) sweeping its rows in turn: only SMs x row bytes are in "
             "flight between a row's two reads (33 MB for 256 KB rows on 132 SMs), so the second read hits L2.",
             {"persistent": True, "programs_per_sm": 1, "num_warps": 16},
             when=lambda p: p["variant"] == "online"),
        Move("two persistent programs per SM",
             "Two persistent programs per SM: twice the rows in flight of one per SM, so one program's reduction "
             "overlaps the other's loads.", {"persistent": True, "programs_per_sm": 2},
             when=lambda p: p["variant"] == "online"),
        Move("persistent grid",
             "Launch a few programs per SM that loop over rows, so launch and tail effects shrink for many rows.",
             {"persistent": True}),
        Move("one program per row group",
             "Launch one program per row (group) and let the hardware schedule them.", {"persistent": False}),
    ]
    for b in PARAMS["BLOCK"]:
        for w in (4, 8, 16):
            moves.append(Move(f"BLOCK {b} with {w} warps",
                              f"Chunks of {b} elements per iteration, {w} warps per program: {b // (32 * w) or 1} "
                              f"elements per thread per load.", {"BLOCK": b, "num_warps": w}, when=chunked))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"pipeline loads {s} deep",
                          f"num_stages={s} on the chunk loop so the next chunk's loads are in flight while the "
                          f"current one is reduced.", {"num_stages": s}, when=chunked))
    for r in PARAMS["ROWS"][1:]:
        moves.append(Move(f"pack {r} rows per program",
                          f"Process {r} rows per program as a 2-D block so short rows still fill the warps.",
                          {"variant": "single", "ROWS": r}))
    for sp in PARAMS["SPLIT"]:
        for w in (8, 16, 32):
            moves.append(Move(f"{sp} programs per row, {w} warps each",
                              f"Split each row over {sp} cooperating programs of {w} warps.",
                              {"SPLIT": sp, "num_warps": w}, when=lambda p: p["variant"] == "coop"))
    for w in (4, 8, 16, 32):
        moves.append(Move(f"{w} warps on the whole row",
                          f"Spread the in-register row over {w} warps to cut registers per thread.",
                          {"variant": "single", "num_warps": w}, when=lambda p: p["variant"] == "single"))
    return moves


def limits(p: dict, case) -> str | None:
    """Why `p` cannot run at `case` on an H200, or None: the launchers' own refusals (a crash at every call). The
    registers of the rows-in-registers variants are not modelled here yet (rmsnorm's are: bench/feasibility.py)."""
    cols = case.params["cols"]
    block = max(next_pow2(cols), 16)
    if p["variant"] == "single" and p["ROWS"] > 1 and block * p["ROWS"] > 65536:
        return f"{p['ROWS']} rows of {cols} (BLOCK {block}) are over the launcher's 65536 elements a program"
    if p["variant"] == "pipelined" and block > 32768:
        return f"a row of {cols} and the next one: the pipelined launcher refuses rows past 32768 columns"
    return None


SPACE = SearchSpace(params=PARAMS, default=DEFAULT, template=_template, moves=_moves(), shaped=shaped,
                    tuning=["num_warps", "num_stages", "BLOCK", "programs_per_sm", "SPLIT"],
                    cases=CASES, limits=limits)
