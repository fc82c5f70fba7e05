"""LayerNorm search space, shared with layernorm_crfm (the same kernels behind another ModelNew interface).

Variants, by the bytes they move per row of n elements of `size` bytes (the floor is 2 * n * size plus the
weight and bias once; at the timed bf16 8192 x 4096, 134 MB, 32 us at 4.2 TB/s):
- `single`: the row whole in registers; mean, then the variance of x - mean, both on registers: one read,
  stable (the two-pass formula costs no extra memory traffic here).
- `welford`: a sweep of per-lane Welford updates (running count, mean and M2 per lane, merged across lanes
  with Chan's formula), then a normalize sweep: two reads of the row, any width.
- `two_pass`: mean sweep, variance sweep, normalize sweep: three reads, the simplest stable chunked form.
- `split`: for few, very wide rows (the CRFM problem: 16 rows of 4M elements, fewer rows than SMs): many
  programs per row each reduce a SPLIT_CHUNK slice to (count, mean, M2) with Chan's formula, a small kernel
  merges them per row, and the apply kernel walks a column block over APPLY_ROWS rows, so the weight and bias
  are read once in all instead of once per row. x is read twice: 3 * n * size per row plus the affine once.
- `coop` (layernorm_crfm only): a row cut into parts of PART columns held in registers, at most one part per
  SM, exchanging (mean, M2) through 64-bit atomic words as the cooperative softmax does: x read once, 2 * n *
  size per row plus the affine (kept in L2 with cache hints). Slower than `split` on an H200, a part's loads
  idle while it waits for its row's other parts (../layernorm_crfm/NOTES.md); kept as a move.
Never E[x^2] - E[x]^2: in fp32 it loses the variance when the mean is large (see wrong/).
How the starter was chosen, with the figures: NOTES.md.
The module is long because each of the five variants' kernel templates and its feasibility limits live here
beside the moves that reach it; split apart they would have to share the placeholders' names by convention.
"""
from __future__ import annotations

import math

from kernelsearch.families.layernorm.spec import CASES
from kernelsearch.families.space import (
    Move,
    SearchSpace,
    evict,
    fill,
    next_pow2,
    num_programs,
    packed_rows,
    programs_per_sm,
)

_PROLOGUE = '''import math
import os

import torch
import triton
import triton.language as tl
'''

_SINGLE = '''

@triton.jit
def _layernorm_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                           BLOCK: tl.constexpr, ROWS: tl.constexpr, PERSISTENT: tl.constexpr):
    # ROWS rows per step, each whole in registers: x read once, y written once (2 * n_cols * size bytes a
    # row); weight and bias loaded once per program. The variance is taken of x - mean, on registers.
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0$W_HINT).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0$W_HINT).to(tl.float32)
    n_groups = tl.cdiv(n_rows, ROWS)
    step = tl.num_programs(0) if PERSISTENT else n_groups
    for g in range(tl.program_id(0), n_groups, step):
        rows = g * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < n_rows) & col_ok[None, :]
        rows64 = rows.to(tl.int64)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=0.0$X_HINT)
        x = x.to(tl.float32)
        mean = tl.sum(x, axis=1) / n_cols
        d = tl.where(mask, x - mean[:, None], 0.0)
        rstd = tl.rsqrt(tl.sum(d * d, axis=1) / n_cols + eps)
        y = d * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_ptr + rows64[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, w, b, y, n_rows, n_cols, eps):
    block = max(triton.next_power_of_2(n_cols), 16)
    rows = $ROWS
    if block * rows > 65536:
        raise ValueError(f"layernorm: {rows} rows of {n_cols} do not fit in one program's registers; use fewer "
                         f"rows per program or a chunked variant")
    warps = $num_warps
    while warps < 32 and block * rows > 64 * 32 * warps:   # rows far wider than the warps were picked for (the
        warps *= 2                                         # 16384-wide correctness case): 64 values a thread
    groups = triton.cdiv(n_rows, rows)
    grid = (min(groups, _num_programs(x)),) if $PERSISTENT else (groups,)
    _layernorm_rows_kernel[grid](x, w, b, y, n_rows, n_cols, x.stride(0), y.stride(0), eps,
                                 BLOCK=block, ROWS=rows, PERSISTENT=$PERSISTENT,
                                 num_warps=warps, num_stages=$num_stages)
'''

_NORMALIZE_SWEEP = '''
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            ok = cols < n_cols
            x = tl.load(x_row + cols, mask=ok, other=0.0$X_HINT).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=ok, other=0.0$W_HINT).to(tl.float32)
            b = tl.load(b_ptr + cols, mask=ok, other=0.0$W_HINT).to(tl.float32)
            tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)
'''

_WELFORD = '''

@triton.jit
def _layernorm_welford_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                              BLOCK: tl.constexpr, PERSISTENT: tl.constexpr):
    # Sweep 1: per-lane Welford (count, mean, M2), merged across lanes with Chan's formula; stable at any
    # mean. Sweep 2 reloads x (from L2 for rows of tens of KB) and writes: 2 reads + 1 write per element.
    offs = tl.arange(0, BLOCK)
    step = tl.num_programs(0) if PERSISTENT else n_rows
    for row in range(tl.program_id(0), n_rows, step):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        y_row = y_ptr + tl.cast(row, tl.int64) * y_stride
        cnt = tl.zeros([BLOCK], tl.float32)
        lane_mean = tl.zeros([BLOCK], tl.float32)
        lane_m2 = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            ok = cols < n_cols
            x = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
            cnt_new = cnt + tl.where(ok, 1.0, 0.0)
            delta = x - lane_mean
            lane_mean += tl.where(ok, delta / tl.maximum(cnt_new, 1.0), 0.0)
            lane_m2 += tl.where(ok, delta * (x - lane_mean), 0.0)
            cnt = cnt_new
        mean = tl.sum(cnt * lane_mean, axis=0) / n_cols
        dm = lane_mean - mean
        rstd = tl.rsqrt(tl.sum(lane_m2 + cnt * dm * dm, axis=0) / n_cols + eps)

        $NORMALIZE_SWEEP

def _launch(x, w, b, y, n_rows, n_cols, eps):
    grid = (min(n_rows, _num_programs(x)),) if $PERSISTENT else (n_rows,)
    _layernorm_welford_kernel[grid](x, w, b, y, n_rows, n_cols, x.stride(0), y.stride(0), eps,
                                    BLOCK=$BLOCK, PERSISTENT=$PERSISTENT, num_warps=$num_warps)
'''

_TWO_PASS = '''

@triton.jit
def _layernorm_two_pass_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                               BLOCK: tl.constexpr, PERSISTENT: tl.constexpr):
    # mean sweep, variance-of-(x - mean) sweep, normalize sweep: three reads of the row, stable.
    offs = tl.arange(0, BLOCK)
    step = tl.num_programs(0) if PERSISTENT else n_rows
    for row in range(tl.program_id(0), n_rows, step):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        y_row = y_ptr + tl.cast(row, tl.int64) * y_stride
        acc = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / n_cols
        acc = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
            d = tl.where(cols < n_cols, x - mean, 0.0)
            acc += d * d
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)

        $NORMALIZE_SWEEP

def _launch(x, w, b, y, n_rows, n_cols, eps):
    grid = (min(n_rows, _num_programs(x)),) if $PERSISTENT else (n_rows,)
    _layernorm_two_pass_kernel[grid](x, w, b, y, n_rows, n_cols, x.stride(0), y.stride(0), eps,
                                     BLOCK=$BLOCK, PERSISTENT=$PERSISTENT, num_warps=$num_warps)
'''

_SPLIT = '''

@triton.jit
def _layernorm_partial_kernel(x_ptr, part_ptr, n_cols, n_chunks, x_stride,
                              CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    # One program per (row, CHUNK-slice): (count, mean, M2) of the slice, BLOCK elements at a time, each block
    # reduced two-pass on registers and merged with Chan's formula. Reads the row once across programs.
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
    offs = tl.arange(0, BLOCK)
    lo = chunk * CHUNK
    hi = tl.minimum(lo + CHUNK, n_cols)
    n = 0.0
    mean = 0.0
    m2 = 0.0
    for start in tl.range(lo, hi, BLOCK, num_stages=$num_stages):
        cols = start + offs
        ok = cols < hi
        x = tl.load(x_row + cols, mask=ok, other=0.0$X_HINT).to(tl.float32)
        c = tl.minimum(hi - start, BLOCK).to(tl.float32)
        bmean = tl.sum(x, axis=0) / c
        d = tl.where(ok, x - bmean, 0.0)
        bm2 = tl.sum(d * d, axis=0)
        n_new = n + c
        delta = bmean - mean
        mean += delta * (c / n_new)
        m2 += bm2 + delta * delta * (n * c / n_new)
        n = n_new
    out = part_ptr + (tl.cast(row, tl.int64) * n_chunks + chunk) * 3
    tl.store(out, n)
    tl.store(out + 1, mean)
    tl.store(out + 2, m2)


@triton.jit
def _layernorm_merge_kernel(part_ptr, stats_ptr, n_chunks, n_cols, eps, PBLOCK: tl.constexpr):
    # One program per row merges its slices' (count, mean, M2) with Chan's formula: mean and rstd.
    row = tl.program_id(0)
    base = part_ptr + tl.cast(row, tl.int64) * n_chunks * 3
    offs = tl.arange(0, PBLOCK)
    n = 0.0
    mean = 0.0
    m2 = 0.0
    for start in range(0, n_chunks, PBLOCK):
        idx = start + offs
        ok = idx < n_chunks
        pn = tl.load(base + idx * 3, mask=ok, other=0.0)
        pmean = tl.load(base + idx * 3 + 1, mask=ok, other=0.0)
        pm2 = tl.load(base + idx * 3 + 2, mask=ok, other=0.0)
        c = tl.sum(pn, axis=0)
        bmean = tl.sum(pn * pmean, axis=0) / c
        d = tl.where(ok, pmean - bmean, 0.0)
        bm2 = tl.sum(pm2 + pn * d * d, axis=0)
        n_new = n + c
        delta = bmean - mean
        mean += delta * (c / n_new)
        m2 += bm2 + delta * delta * (n * c / n_new)
        n = n_new
    tl.store(stats_ptr + row * 2, mean)
    tl.store(stats_ptr + row * 2 + 1, tl.rsqrt(m2 / n_cols + eps))


@triton.jit
def _layernorm_apply_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stats_ptr, n_rows, n_cols, x_stride, y_stride,
                            BLOCK: tl.constexpr, APPLY_ROWS: tl.constexpr):
    # A column block of the weight and bias is loaded once and applied to APPLY_ROWS rows: the affine
    # parameters cross DRAM once per APPLY_ROWS rows; x is read (its second time) and y written once.
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < n_cols
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    row0 = tl.program_id(1) * APPLY_ROWS
    for r in range(row0, tl.minimum(row0 + APPLY_ROWS, n_rows)):
        mean = tl.load(stats_ptr + r * 2)
        rstd = tl.load(stats_ptr + r * 2 + 1)
        r64 = tl.cast(r, tl.int64)
        x = tl.load(x_ptr + r64 * x_stride + cols, mask=ok, other=0.0$X_HINT).to(tl.float32)
        tl.store(y_ptr + r64 * y_stride + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)


def _launch(x, w, b, y, n_rows, n_cols, eps):
    chunk = max(min($SPLIT_CHUNK, triton.next_power_of_2(n_cols)), $BLOCK)
    n_chunks = triton.cdiv(n_cols, chunk)
    part = torch.empty((n_rows, n_chunks, 3), dtype=torch.float32, device=x.device)
    stats = torch.empty((n_rows, 2), dtype=torch.float32, device=x.device)
    _layernorm_partial_kernel[(n_rows, n_chunks)](x, part, n_cols, n_chunks, x.stride(0), CHUNK=chunk,
                                                  BLOCK=$BLOCK, num_warps=$num_warps)
    pblock = min(max(triton.next_power_of_2(n_chunks), 16), 1024)
    _layernorm_merge_kernel[(n_rows,)](part, stats, n_chunks, n_cols, eps, PBLOCK=pblock, num_warps=4)
    grid = (triton.cdiv(n_cols, $BLOCK), triton.cdiv(n_rows, $APPLY_ROWS))
    _layernorm_apply_kernel[grid](x, w, b, y, stats, n_rows, n_cols, x.stride(0), y.stride(0),
                                  BLOCK=$BLOCK, APPLY_ROWS=$APPLY_ROWS, num_warps=$num_warps)
'''

_COOP = '''

@triton.jit
def _layernorm_coop_kernel(x_ptr, w_ptr, b_ptr, y_ptr, slot_ptr, n_cols, x_stride, y_stride, slice_len, eps,
                           PARTS: tl.constexpr, BLOCK: tl.constexpr):
    # PARTS programs share a row, each holding its slice in registers, so x is read from memory once however
    # wide the row: each reduces its slice two-pass to (mean, M2), publishes them packed in one 64-bit word
    # with one atomic exchange (M2 is stored negated, so the word is never 0 and is its own ready flag), waits
    # for the other parts' words and merges them all with Chan's formula, in the same order in every part.
    # The parts of a row are consecutive program ids, dispatched together; a part waits only on its own row.
    pid = tl.program_id(0)
    row = pid // PARTS
    part = pid % PARTS
    offs = tl.arange(0, BLOCK)
    cols = part * slice_len + offs
    mask = (offs < slice_len) & (cols < n_cols)
    r64 = tl.cast(row, tl.int64)
    x = tl.load(x_ptr + r64 * x_stride + cols, mask=mask, other=0.0$X_HINT).to(tl.float32)
    count = tl.maximum(tl.minimum(n_cols - part * slice_len, slice_len), 0).to(tl.float32)
    mean = tl.sum(x, axis=0) / tl.maximum(count, 1.0)
    d = tl.where(mask, x - mean, 0.0)
    m2 = tl.sum(d * d, axis=0)
    word = (mean.to(tl.uint32, bitcast=True).to(tl.uint64) << 32) | (-m2).to(tl.uint32, bitcast=True).to(tl.uint64)
    slots = slot_ptr + r64 * PARTS
    tl.atomic_xchg(slots + part, word.to(tl.int64, bitcast=True), sem="release", scope="gpu")
    parts = tl.arange(0, PARTS)
    words = tl.atomic_add(slots + parts, 0, sem="acquire", scope="gpu")
    while tl.min(tl.where(words == 0, 0, 1), axis=0) == 0:
        words = tl.atomic_add(slots + parts, 0, sem="acquire", scope="gpu")
    u = words.to(tl.uint64, bitcast=True)
    means = (u >> 32).to(tl.uint32).to(tl.float32, bitcast=True)
    m2s = -((u & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True))
    counts = tl.maximum(tl.minimum(n_cols - parts * slice_len, slice_len), 0).to(tl.float32)
    mean_row = tl.sum(counts * means, axis=0) / n_cols
    dm = means - mean_row
    rstd = tl.rsqrt(tl.sum(m2s + counts * dm * dm, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0$W_HINT).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0$W_HINT).to(tl.float32)
    y = (x - mean_row) * rstd * w + b
    tl.store(y_ptr + r64 * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, w, b, y, n_rows, n_cols, eps):
    # Triton's interpreter runs programs one after another, so a part would wait forever for the next one:
    # there a row is one part (the same code, the exchange with itself). Compiled, a row is cut into parts of
    # at most $PART columns, no more parts than SMs, so that all parts of a row can be resident at once.
    if os.environ.get("TRITON_INTERPRET") == "1":
        parts = 1
    else:
        parts = triton.next_power_of_2(triton.cdiv(n_cols, $PART))
        # (on a CPU tensor, the ahead-of-time compile for the H200: its 132 SMs)
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 132
        if parts > sms:
            raise ValueError(f"layernorm coop: a row of {n_cols} needs {parts} parts of {$PART} columns, more than "
                             f"the {sms} SMs that must hold them at once; use wider parts or the split variant")
    slice_len = triton.cdiv(n_cols, parts)
    block = max(triton.next_power_of_2(slice_len), 16)
    slots = torch.zeros(n_rows * parts, dtype=torch.int64, device=x.device)
    _layernorm_coop_kernel[(n_rows * parts,)](x, w, b, y, slots, n_cols, x.stride(0), y.stride(0), slice_len, eps,
                                              PARTS=parts, BLOCK=block, num_warps=$num_warps)
'''

_COMMON = '''

$NUM_PROGRAMS


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, n_dims: int = 1):
    """LayerNorm over the last `n_dims` dimensions of x, with an elementwise weight and bias of that shape."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"layernorm kernel: unsupported dtype {x.dtype}")
    shape = x.shape
    norm_shape = tuple(shape[len(shape) - n_dims:])
    if tuple(weight.shape) != norm_shape or tuple(bias.shape) != norm_shape:
        raise ValueError(f"layernorm kernel: weight {tuple(weight.shape)} and bias {tuple(bias.shape)} "
                         f"for normalized shape {norm_shape}")
    n_cols = math.prod(norm_shape)
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows = x2.shape[0]
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        _launch(x2, weight.reshape(-1).contiguous(), bias.reshape(-1).contiguous(), y, n_rows, n_cols, eps)
    return y.reshape(shape)
'''

# The ModelNew of each interface: its constructor and parameter names are the reference's.
_INTERFACES = {
    "llm": '''

class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=getattr(torch, dtype)))
        self.bias = torch.nn.Parameter(torch.zeros(hidden_size, dtype=getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)
''',
    "crfm": '''

class _Affine(torch.nn.Module):
    # holds the parameters under the reference's names (ln.weight, ln.bias)
    def __init__(self, shape):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(shape))
        self.bias = torch.nn.Parameter(torch.zeros(shape))


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = _Affine(tuple(normalized_shape))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.ln.weight, self.ln.bias, self.eps, self.ln.weight.dim())
''',
}

_BODIES = {"single": _SINGLE, "welford": _WELFORD, "two_pass": _TWO_PASS, "split": _SPLIT, "coop": _COOP}


def make_template(interface: str):
    def template(p: dict) -> str:
        hints = p["cache_hints"]
        persistent_grid = p["persistent"] and p["variant"] not in ("split", "coop")
        return fill(_PROLOGUE + _BODIES[p["variant"]] + _COMMON + _INTERFACES[interface], {
            "NORMALIZE_SWEEP": _NORMALIZE_SWEEP,
            # x is streamed: evict it first; the weight and bias are reused by every row: keep them in L2
            "X_HINT": evict("evict_first", hints), "W_HINT": evict("evict_last", hints),
            "ROWS": p["ROWS"], "BLOCK": p["BLOCK"], "PERSISTENT": p["persistent"],
            "num_warps": p["num_warps"], "num_stages": p["num_stages"],
            "NUM_PROGRAMS": num_programs(programs_per_sm(p, persistent_grid)),
            "SPLIT_CHUNK": p["SPLIT_CHUNK"],
            "APPLY_ROWS": p["APPLY_ROWS"], "PART": p["PART"],
        })

    return template


PARAMS = {
    "variant": ["single", "welford", "two_pass", "split", "coop"],
    "BLOCK": [256, 512, 1024, 2048, 4096, 8192],
    "ROWS": [1, 2, 4, 8],
    "num_warps": [1, 2, 4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
    "persistent": [False, True],
    "programs_per_sm": [1, 2, 4, 8],
    "cache_hints": [False, True],
    "SPLIT_CHUNK": [4096, 16384, 65536, 262144],
    "APPLY_ROWS": [1, 4, 16, 64],
    "PART": [16384, 32768],
}

# the starter: 2 rows a program in registers, with cache hints (NOTES.md)
DEFAULT = {"variant": "single", "BLOCK": 2048, "ROWS": 2, "num_warps": 8, "num_stages": 2,
           "persistent": False, "programs_per_sm": 4, "cache_hints": True, "SPLIT_CHUNK": 65536,
           "APPLY_ROWS": 16, "PART": 32768}


def make_moves() -> list[Move]:
    single = lambda p: p["variant"] == "single"  # noqa: E731
    chunked = lambda p: p["variant"] not in ("single", "coop")  # noqa: E731
    split = lambda p: p["variant"] == "split"  # noqa: E731
    coop = lambda p: p["variant"] == "coop"  # noqa: E731
    gridded = lambda p: p["variant"] not in ("split", "coop")  # noqa: E731  (a grid that can be persistent)
    moves = [
        Move("keep the row in registers",
             "Load each row whole: x is read from memory once (2 * width * size bytes a row, the floor) and the "
             "stable two-pass variance costs no extra traffic because the second pass is over registers.",
             {"variant": "single"}),
        Move("Welford sweep",
             "One sweep of per-lane Welford updates (count, mean, M2) merged with Chan's formula, then a "
             "normalize sweep: two reads of the row instead of three, stable at any mean, any width.",
             {"variant": "welford"}),
        Move("three plain sweeps",
             "Mean sweep, variance-of-(x - mean) sweep, normalize sweep: three reads of each row; the simplest "
             "stable chunked form, for comparison.", {"variant": "two_pass"}),
        Move("split each row over many programs",
             "For few very wide rows (fewer rows than SMs): slices of a row reduce to (count, mean, M2) in "
             "parallel, a tiny kernel merges them, and the apply kernel reuses each weight/bias block across "
             "rows, so the affine parameters are read once in all. x is read twice.",
             {"variant": "split"}),
        Move("one read of each wide row across cooperating programs",
             "Cut each row into parts held in registers, one program each (at most one part per SM, so a row's "
             "parts are resident together); the parts exchange (mean, M2) through one 64-bit atomic word each, "
             "merge them with Chan's formula and normalize from registers: x crosses DRAM once, not twice.",
             {"variant": "coop", "PART": 32768, "num_warps": 32}),
        Move("persistent grid",
             "A few programs per SM loop over rows: weight and bias are loaded once per program, not per row "
             "(2 * width * size bytes of L2 traffic saved a row), and launch and tail effects shrink.",
             {"persistent": True}, when=gridded),
        Move("one program per row group",
             "Launch one program per row (group) and let the hardware schedule them.", {"persistent": False},
             when=gridded),
        Move("cache hints",
             "Load x with evict_first (it streams) and weight and bias with evict_last (every row reuses them).",
             {"cache_hints": True}),
        Move("no cache hints", "Plain loads: let L2 manage itself.", {"cache_hints": False}),
    ]
    for r in PARAMS["ROWS"]:
        moves.append(Move(f"pack {r} rows per program",
                          f"Process {r} rows per step as a 2-D block: narrow rows fill the warps and more bytes "
                          f"are in flight per program.", {"variant": "single", "ROWS": r}))
    for w in (2, 4, 8, 16, 32):
        moves.append(Move(f"{w} warps on the whole row",
                          f"Spread the in-register row over {w} warps: fewer elements per thread cuts registers; "
                          f"more gives wider loads.", {"num_warps": w}, when=single))
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
                          f"{n} resident programs per SM: more hides latency, fewer reuses the affine more.",
                          {"programs_per_sm": n}, when=lambda p: p["persistent"] and gridded(p)))
    for c in PARAMS["SPLIT_CHUNK"]:
        moves.append(Move(f"slices of {c} elements",
                          f"Each statistics program reduces {c} elements of a row: smaller slices make more "
                          f"programs (more parallelism for few rows), larger ones fewer partials to merge.",
                          {"SPLIT_CHUNK": c}, when=split))
    for a in PARAMS["APPLY_ROWS"]:
        moves.append(Move(f"apply to {a} rows per weight block",
                          f"Each apply program reuses its weight/bias block for {a} rows: the affine crosses DRAM "
                          f"once per {a} rows; fewer rows per program gives more programs.",
                          {"APPLY_ROWS": a}, when=split))
    for part, w in ((16384, 16), (32768, 32)):
        moves.append(Move(f"cooperative parts of {part} columns",
                          f"Each cooperating program holds {part} columns of its row in registers with {w} warps "
                          f"({part // (32 * w)} values a thread): wider parts make fewer parts per row (a row may "
                          f"have at most one per SM), narrower ones fewer registers.",
                          {"PART": part, "num_warps": w}, when=coop))
    return moves


def limits(p: dict, case) -> str | None:
    """Why `p` cannot run at `case` on an H200, or None: the launchers' own refusals (a crash at every call). The
    registers of the rows-in-registers variant are not modelled here yet (rmsnorm's are: bench/feasibility.py)."""
    cols = case.params["cols"] if "cols" in case.params else math.prod(case.params["shape"][1:])
    block = max(next_pow2(cols), 16)
    if p["variant"] == "single" and block * p["ROWS"] > 65536:
        return f"{p['ROWS']} rows of {cols} (BLOCK {block}) are over the launcher's 65536 elements a program"
    if p["variant"] == "coop":
        parts = next_pow2(-(-cols // p["PART"]))
        if parts > 132:
            return f"a row of {cols} needs {parts} parts of {p['PART']} columns, more than the H200's 132 SMs"
    return None


def shaped(case, cases) -> dict:
    """The starter's knobs at another shape than the timed 8192 x 4096 bf16 (a model's, a matched problem's): the
    rows in registers with the tile the default has there, 16 KB a program (two 4096-wide bf16 rows) on 8 warps,
    64 B a thread, so short rows pack more a program and long ones fewer: as many as `limits` accepts at every one
    of `cases`. (The registers of `single` are not modelled yet: the launcher's 65536 elements decide.)"""
    if "cols" not in case.params:   # layernorm_crfm's shapes: its own default
        return {}
    point = packed_rows(case, cases, {**DEFAULT, "variant": "single"}, limits, 16384, 64,
                        [w for w in PARAMS["num_warps"] if w <= 16], PARAMS["BLOCK"])
    return {} if point is None else point


def make_space(interface: str, default: dict | None = None, variants: list[str] | None = None,
               cases=()) -> SearchSpace:
    """The space behind one ModelNew interface; `variants` drops the ones that cannot serve its shapes."""
    params = {**PARAMS, "variant": list(variants or PARAMS["variant"])}
    moves = [m for m in make_moves() if m.changes.get("variant", params["variant"][0]) in params["variant"]]
    return SearchSpace(params=params, default=dict(default or DEFAULT), template=make_template(interface),
                       moves=moves,
                       tuning=["num_warps", "num_stages", "BLOCK", "ROWS", "programs_per_sm", "SPLIT_CHUNK",
                               "APPLY_ROWS"], cases=cases, limits=limits,
                       shaped=shaped if interface == "llm" else None)


SPACE = make_space("llm", variants=["single", "welford", "two_pass", "split"], cases=CASES)  # (coop: for rows past registers)
