"""Rotary embedding search space: tiles of positions, per (batch, head) or reusing cos/sin across heads.

Bytes: the floor is one read of x, one write of the output, and cos and sin once (spec.bytes_moved): at the
timed bf16 (4, 32, 4096, 128), 2 x 268 MB + 2 MB, 128 us at 4.2 TB/s. Every variant reads x once from DRAM;
they differ in how often cos and sin (1 MB each, L2-resident) are re-read: `rows` loads them once per
(batch, head) tile, 128 times in all at the timed size, from L2; `heads` keeps them in registers across
HEADS heads; `permuted` loads whole rows plus the partner half through a permuted index (the second load of x
hits L1) so each thread stores one contiguous row instead of two halves. `flat` is `permuted` on a 1-D grid over
all batch * heads * seq rows with 32-bit offsets and no masks when the tile divides the shape. How the starter
was chosen, with the figures: NOTES.md.
"""
from __future__ import annotations

from kernelsearch.families.rotary_embedding.spec import CASES
from kernelsearch.families.space import Move, SearchSpace, evict, fill

_PROLOGUE = '''import torch
import triton
import triton.language as tl
'''

_ROTATE = '''
    x1 = tl.load(x_ptr + x_off, mask=mask, other=0.0$X_HINT).to(tl.float32)
    x2 = tl.load(x_ptr + x_off + half, mask=mask, other=0.0$X_HINT).to(tl.float32)
    # out[:half] = x1 cos1 - x2 sin1, out[half:] = x2 cos2 + x1 sin2 (NeoX: element i pairs with i + half)
    tl.store(y_ptr + x_off, (x1 * c1 - x2 * s1).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + x_off + half, (x2 * c2 + x1 * s2).to(y_ptr.dtype.element_ty), mask=mask)
'''

_LOAD_CS = '''
    cs_off = s[:, None] * cs_stride + d[None, :]
    c1 = tl.load(cos_ptr + cs_off, mask=mask, other=0.0$CS_HINT).to(tl.float32)
    c2 = tl.load(cos_ptr + cs_off + half, mask=mask, other=0.0$CS_HINT).to(tl.float32)
    s1 = tl.load(sin_ptr + cs_off, mask=mask, other=0.0$CS_HINT).to(tl.float32)
    s2 = tl.load(sin_ptr + cs_off + half, mask=mask, other=0.0$CS_HINT).to(tl.float32)
'''

_ROWS = '''

@triton.jit
def _rope_rows_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, seq, half, bh_stride, s_stride, cs_stride,
                      BLOCK_S: tl.constexpr, BLOCK_H: tl.constexpr):
    # One program per (BLOCK_S positions, batch * head): x read once, out written once, cos and sin for the
    # positions read again for every head (from L2).
    s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_H)
    mask = (s[:, None] < seq) & (d[None, :] < half)
    $LOAD_CS
    x_off = tl.program_id(1).to(tl.int64) * bh_stride + s[:, None].to(tl.int64) * s_stride + d[None, :]
    $ROTATE

def _launch(x, cos, sin, y, bh, seq, half):
    grid = (triton.cdiv(seq, $BLOCK_S), bh)
    _rope_rows_kernel[grid](x, cos, sin, y, seq, half, x.stride(1), x.stride(2), cos.stride(0),
                            BLOCK_S=$BLOCK_S, BLOCK_H=triton.next_power_of_2(half), num_warps=$num_warps)
'''

_HEADS = '''

@triton.jit
def _rope_heads_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, n_heads, seq, half, bh_stride, s_stride, cs_stride,
                       HEADS: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_H: tl.constexpr):
    # One program per (BLOCK_S positions, batch, HEADS heads): cos and sin are loaded once into registers and
    # reused for each head, so they cross L2 n_heads / HEADS times instead of n_heads times.
    s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_H)
    mask = (s[:, None] < seq) & (d[None, :] < half)
    $LOAD_CS
    groups = tl.cdiv(n_heads, HEADS)
    b = tl.program_id(1) // groups
    h0 = (tl.program_id(1) % groups) * HEADS
    for h in tl.range(h0, tl.minimum(h0 + HEADS, n_heads), num_stages=$num_stages):
        x_off = (b * n_heads + h).to(tl.int64) * bh_stride + s[:, None].to(tl.int64) * s_stride + d[None, :]
        $ROTATE

def _launch(x, cos, sin, y, bh, seq, half):
    n_heads = x.shape[1]
    grid = (triton.cdiv(seq, $BLOCK_S), x.shape[0] * triton.cdiv(n_heads, $HEADS))
    _rope_heads_kernel[grid](x, cos, sin, y, n_heads, seq, half, x.stride(1), x.stride(2), cos.stride(0),
                             HEADS=$HEADS, BLOCK_S=$BLOCK_S, BLOCK_H=triton.next_power_of_2(half),
                             num_warps=$num_warps)
'''

_PERMUTED = '''

@triton.jit
def _rope_permuted_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, seq, half, bh_stride, s_stride, cs_stride,
                          BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    # Whole rows: x and its rotated partner (index i +- half, sign -1 on the first half); the partner load
    # touches the same cache lines as the first, so it is served by L1, and the store is one contiguous row.
    s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    first = d < half
    partner = tl.where(first, d + half, d - half)
    mask = (s[:, None] < seq) & (d[None, :] < 2 * half)
    cs_off = s[:, None] * cs_stride + d[None, :]
    c = tl.load(cos_ptr + cs_off, mask=mask, other=0.0$CS_HINT).to(tl.float32)
    sn = tl.load(sin_ptr + cs_off, mask=mask, other=0.0$CS_HINT).to(tl.float32)
    sn = tl.where(first[None, :], -sn, sn)
    row = tl.program_id(1).to(tl.int64) * bh_stride + s[:, None].to(tl.int64) * s_stride
    x = tl.load(x_ptr + row + d[None, :], mask=mask, other=0.0$X_HINT).to(tl.float32)
    xp = tl.load(x_ptr + row + partner[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + d[None, :], (x * c + xp * sn).to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, cos, sin, y, bh, seq, half):
    grid = (triton.cdiv(seq, $BLOCK_S), bh)
    _rope_permuted_kernel[grid](x, cos, sin, y, seq, half, x.stride(1), x.stride(2), cos.stride(0),
                                BLOCK_S=$BLOCK_S, BLOCK_D=triton.next_power_of_2(2 * half),
                                num_warps=$num_warps)
'''

_FLAT = '''

@triton.jit
def _rope_flat_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, n_rows, seq, half, cs_stride,
                      BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr, EVEN: tl.constexpr, WIDE: tl.constexpr):
    # x as one (batch * heads * seq, head_dim) matrix, BLOCK_S rows per program on a flat grid (row r is
    # position r % seq), whole rows with the partner load as in `permuted`. Offsets are 32-bit unless the
    # tensor needs more (WIDE), and no load or store is masked when the tile divides the shape (EVEN): less
    # index arithmetic per element than the 2-D grid's 64-bit offsets and masks.
    r = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    if WIDE:
        r = r.to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    first = d < half
    partner = tl.where(first, d + half, d - half)
    if EVEN:
        mask = tl.full([BLOCK_S, BLOCK_D], 1, tl.int1)
    else:
        mask = (r[:, None] < n_rows) & (d[None, :] < 2 * half)
    cs_off = (r % seq)[:, None] * cs_stride + d[None, :]
    c = tl.load(cos_ptr + cs_off, mask=mask, other=0.0$CS_HINT).to(tl.float32)
    sn = tl.load(sin_ptr + cs_off, mask=mask, other=0.0$CS_HINT).to(tl.float32)
    sn = tl.where(first[None, :], -sn, sn)
    row = r[:, None] * (2 * half)
    x = tl.load(x_ptr + row + d[None, :], mask=mask, other=0.0$X_HINT).to(tl.float32)
    xp = tl.load(x_ptr + row + partner[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + d[None, :], (x * c + xp * sn).to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, cos, sin, y, bh, seq, half):
    n_rows = bh * seq
    block_d = triton.next_power_of_2(2 * half)
    _rope_flat_kernel[(triton.cdiv(n_rows, $BLOCK_S),)](
        x, cos, sin, y, n_rows, seq, half, cos.stride(0), BLOCK_S=$BLOCK_S, BLOCK_D=block_d,
        EVEN=n_rows % $BLOCK_S == 0 and block_d == 2 * half, WIDE=x.numel() + block_d * $BLOCK_S >= 2**31,
        num_warps=$num_warps)
'''

_EPILOGUE = '''

def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """NeoX-style rotary embedding of x (batch, heads, seq, head_dim) with cos, sin of (seq, head_dim)."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"rotary kernel: unsupported dtype {x.dtype}")
    if x.dim() != 4 or x.shape[-1] % 2:
        raise ValueError(f"rotary kernel: x of shape {tuple(x.shape)}; expected (batch, heads, seq, even dim)")
    batch, heads, seq, dim = x.shape
    if cos.numel() != seq * dim or sin.numel() != seq * dim:
        raise ValueError(f"rotary kernel: cos {tuple(cos.shape)}, sin {tuple(sin.shape)} for seq {seq}, dim {dim}")
    cos = cos.reshape(seq, dim).contiguous()
    sin = sin.reshape(seq, dim).contiguous()
    if not x.is_contiguous():
        x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        _launch(x, cos, sin, y, batch * heads, seq, dim // 2)
    return y


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return rotary_embedding(x, cos, sin)
'''


def _template(p: dict) -> str:
    body = {"rows": _ROWS, "heads": _HEADS, "permuted": _PERMUTED, "flat": _FLAT}[p["variant"]]
    return fill(_PROLOGUE + body + _EPILOGUE, {
        "LOAD_CS": _LOAD_CS, "ROTATE": _ROTATE,
        # x streams through once; cos and sin are re-read for every head: keep them in L2
        "X_HINT": evict("evict_first", p["cache_hints"]), "CS_HINT": evict("evict_last", p["cache_hints"]),
        "BLOCK_S": p["BLOCK_S"], "HEADS": p["HEADS"], "num_warps": p["num_warps"], "num_stages": p["num_stages"],
    })


PARAMS = {
    "variant": ["rows", "heads", "permuted", "flat"],
    "BLOCK_S": [1, 2, 4, 8, 16, 32, 64],
    "HEADS": [1, 2, 4, 8, 16, 32],
    "num_warps": [1, 2, 4, 8, 16],
    "num_stages": [1, 2, 3, 4],
    "cache_hints": [False, True],
}

# the starter: whole rows with the partner load, 8 positions a program (NOTES.md)
DEFAULT = {"variant": "permuted", "BLOCK_S": 8, "HEADS": 4, "num_warps": 4, "num_stages": 2, "cache_hints": False}


def _moves() -> list[Move]:
    heads = lambda p: p["variant"] == "heads"  # noqa: E731
    moves = [
        Move("one tile per (batch, head)",
             "One program per block of positions of one (batch, head): x read once; cos and sin re-read per "
             "head from L2 (2 MB for all heads' reuse at the timed size).", {"variant": "rows"}),
        Move("reuse cos/sin across heads",
             "One program per block of positions and a group of HEADS heads: cos and sin are loaded into "
             "registers once and applied to each head, cutting their L2 traffic by HEADS times.",
             {"variant": "heads"}),
        Move("whole rows with a permuted partner load",
             "Load each row whole plus its rotated partner through a permuted index (the partner load hits L1) "
             "and store one contiguous row: wider, fully coalesced stores instead of two half-rows.",
             {"variant": "permuted"}),
        Move("one flat grid with 32-bit offsets",
             "Treat x as one (batch * heads * seq, head_dim) matrix on a 1-D grid: 32-bit offsets and no masks "
             "when the tile divides the shape, so each element costs less index arithmetic; whole rows with "
             "the partner load, as in the permuted kernel.", {"variant": "flat"}),
        Move("evict x first, keep cos/sin",
             "x streams through once: load it with evict_first, and cos and sin (re-read for every head) with "
             "evict_last, so the tables stay in L2.", {"cache_hints": True}),
        Move("no cache hints", "Plain loads: let L2 manage itself.", {"cache_hints": False}),
    ]
    for b in PARAMS["BLOCK_S"]:
        moves.append(Move(f"{b} positions per program",
                          f"Tiles of {b} positions x head_dim: {b * 256} bytes of bf16 x in flight per program at "
                          f"head_dim 128; bigger tiles amortize index math and hide latency, smaller ones make "
                          f"more programs.", {"BLOCK_S": b}))
    for w in PARAMS["num_warps"]:
        moves.append(Move(f"{w} warps per program",
                          f"{w} warps share a tile: match the threads to the tile so each thread moves 8-16 bytes "
                          f"per access.", {"num_warps": w}))
    for h in PARAMS["HEADS"]:
        moves.append(Move(f"{h} heads per program",
                          f"Apply one register copy of cos/sin to {h} heads: more reuse, fewer programs.",
                          {"variant": "heads", "HEADS": h}))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"pipeline the head loop {s} deep",
                          f"num_stages={s} on the loop over heads so the next head's x is loading while this one "
                          f"is rotated and stored.", {"num_stages": s}, when=heads))
    return moves


SPACE = SearchSpace(params=PARAMS, default=DEFAULT, template=_template, moves=_moves(),
                    tuning=["BLOCK_S", "num_warps", "HEADS", "num_stages"],
                    cases=CASES)  # no feasibility model yet: every point is taken as feasible
