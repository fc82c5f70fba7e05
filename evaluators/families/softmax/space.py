"""Softmax search space: one row per program (whole row in registers) or an online max/sum sweep in chunks.

Bytes: the floor is one read of x and one write of y (spec.bytes_moved). `single` meets it; `online` reads a
row twice (the second read mostly hits L2: a 32000-wide bf16 row is 64 KB); `three_pass` reads it three times.
"""
from __future__ import annotations

from kernelsearch.evaluators.space import Move, SearchSpace

_PROLOGUE = '''import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # jit code may only read constexpr globals
'''

_EXP = {False: "tl.exp({x})", True: "tl.exp2(({x}) * LOG2E)"}

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
        e = {EXP_E}
        e = tl.where(mask, e, 0.0)
        s = tl.sum(e, axis=1)
        y = e * (1.0 / s)[:, None]
        tl.store(y_ptr + rows64[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, y, n_rows, n_cols):
    block = max(triton.next_power_of_2(n_cols), 16)
    rows = {ROWS}
    groups = triton.cdiv(n_rows, rows)
    grid = (min(groups, _num_programs(x)),) if {PERSISTENT} else (groups,)
    _softmax_rows_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                               BLOCK=block, ROWS=rows, PERSISTENT={PERSISTENT},
                               num_warps={num_warps}, num_stages={num_stages})
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
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages={num_stages}):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * {EXP_ALPHA} + {EXP_X}
            m = m_new
        m_row = tl.max(m, axis=0)
        s_row = tl.sum(s * {EXP_LANE}, axis=0)
        inv = 1.0 / s_row
        for start in tl.range(0, n_cols, BLOCK, num_stages={num_stages}):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
            y = {EXP_OUT} * inv
            tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def _launch(x, y, n_rows, n_cols):
    grid = (min(n_rows, _num_programs(x)),) if {PERSISTENT} else (n_rows,)
    _softmax_online_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0),
                                 BLOCK={BLOCK}, PERSISTENT={PERSISTENT}, num_warps={num_warps})
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
    for start in tl.range(0, n_cols, BLOCK, num_stages={num_stages}):
        cols = start + offs
        m = tl.maximum(m, tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32))
    m_row = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(0, n_cols, BLOCK, num_stages={num_stages}):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        s += {EXP_OUT}
    inv = 1.0 / tl.sum(s, axis=0)
    for start in tl.range(0, n_cols, BLOCK, num_stages={num_stages}):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(y_row + cols, ({EXP_OUT} * inv).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def _launch(x, y, n_rows, n_cols):
    _softmax_three_pass_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK={BLOCK},
                                         num_warps={num_warps})
'''

_EPILOGUE = '''

_SMS = {{}}


def _num_programs(x):
    # persistent grids: a few programs per SM (the interpreter has no SMs; 4 keeps it quick)
    if x.device.type != "cuda":
        return 4
    idx = x.device.index or 0
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * {PROGRAMS_PER_SM}


def softmax(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"softmax kernel: unsupported dtype {{x.dtype}}")
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
    exp = _EXP[p["exp2"]]
    body = {"single": _SINGLE, "online": _ONLINE, "three_pass": _THREE_PASS}[p["variant"]]
    fill = {
        "EXP_E": exp.format(x="x - m[:, None]"),
        "EXP_ALPHA": exp.format(x="m - m_safe"),
        "EXP_X": exp.format(x="x - m_safe"),
        "EXP_LANE": exp.format(x="m - m_row"),
        "EXP_OUT": exp.format(x="x - m_row"),
        "ROWS": p["ROWS"], "BLOCK": p["BLOCK"], "PERSISTENT": p["persistent"],
        "num_warps": p["num_warps"], "num_stages": p["num_stages"],
    }
    body = body.replace("{{", "\x00").replace("}}", "\x01")
    for k, v in fill.items():
        body = body.replace("{" + k + "}", str(v))
    body = body.replace("\x00", "{").replace("\x01", "}")
    return _PROLOGUE + body + _EPILOGUE.format(PROGRAMS_PER_SM=p["programs_per_sm"])


PARAMS = {
    "variant": ["online", "single", "three_pass"],
    "BLOCK": [512, 1024, 2048, 4096, 8192],
    "ROWS": [1, 2, 4, 8],
    "num_warps": [2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
    "persistent": [False, True],
    "programs_per_sm": [1, 2, 4, 8],
    "exp2": [False, True],
}

DEFAULT = {"variant": "online", "BLOCK": 2048, "ROWS": 1, "num_warps": 8, "num_stages": 2,
           "persistent": False, "programs_per_sm": 4, "exp2": False}


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
        Move("three plain sweeps",
             "Separate max, sum and write sweeps; simplest code, three reads of each row, for comparison.",
             {"variant": "three_pass"}),
        Move("exp2 with a pre-scaled log2(e)",
             "Use exp2(x * log2 e), which maps to one MUFU.EX2 instruction, instead of exp.", {"exp2": True}),
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
    for w in (4, 8, 16, 32):
        moves.append(Move(f"{w} warps on the whole row",
                          f"Spread the in-register row over {w} warps to cut registers per thread.",
                          {"variant": "single", "num_warps": w}, when=lambda p: p["variant"] == "single"))
    return moves


SPACE = SearchSpace(params=PARAMS, default=DEFAULT, template=_template, moves=_moves(),
                    tuning=["num_warps", "num_stages", "BLOCK", "programs_per_sm"])
