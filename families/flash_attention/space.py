"""Flash-attention forward search space, shared by flash_attention (full) and flash_attention_causal.

The work is 4 * B * H * S^2 * D flops (half that when causal): at the timed bf16 (4, 32, 4096, 128), 1.1e12
flops, 1.6 ms at 690 TFLOP/s (0.8 ms causal). Memory is one read of q, k, v and one write of o (537 MB,
0.13 ms), as long as the S x S scores never leave the chip: each program holds BLOCK_M queries and
streams K and V blocks through shared memory with an online softmax (running max m, running sum l, the
accumulator rescaled by exp2(m_old - m_new) when the max grows). K and V are re-read once per query block,
S / BLOCK_M times, mostly from L2.
- `split_diagonal` (causal): key blocks wholly below the diagonal run a loop without the causal mask; only the
  blocks on the diagonal pay for the compare and select; blocks above it are skipped either way.
- `tma`: q, k, v and o move through 3-D tensor descriptors (batch * head, seq, dim): the TMA engine computes
  addresses and zero-fills past the sequence end. Needs 16-byte aligned rows (head_dim * size % 16 == 0);
  other shapes use the pointer path.
Scores are scaled into the log2 domain (scale * log2 e) after the running max is subtracted, so every
exponential is one exp2 and the largest score of a row weighs exactly 1; when seq % BLOCK_N == 0 no key block
needs the sequence-end mask (`EVEN_N`).
- `longest_first` (causal): query blocks launch last-first, so the blocks that see the most keys start first
  and the tail of the grid holds short ones.
fp32 inputs use input_precision="ieee" for both products (no TF32).
Not in the space: Triton 3.6's warp specialisation of the key loop (`tl.range(..., warp_specialize=True)`), wrong
at some points and slower at the others on the H200. That, and how the starters were chosen, with the figures:
NOTES.md.
"""
from __future__ import annotations

from kernelsearch.families.flash_attention.spec import CASES
from kernelsearch.families.space import FP32_DEPTH, Move, SearchSpace, fill, shared_limit

_PROLOGUE = '''import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


$FP32_DEPTH

LOG2E = 1.4426950408889634


@triton.jit
def _attn_inner(acc, l_i, m_i, q, k_src, v_src, s_kn, s_vn, bh, offs_m, offs_d, lo, hi, seq, qk_scale,
                CAUSAL_MASK: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM: tl.constexpr,
                USE_TMA: tl.constexpr, PRECISION: tl.constexpr, EVEN_N: tl.constexpr):
    # One sweep over key blocks [lo, hi): scores, online softmax, and the P @ V accumulation, all on chip.
    offs_n0 = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N):
        offs_n = start_n + offs_n0
        if USE_TMA:
            k = k_src.load([bh, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        else:
            kv_mask = (offs_n[:, None] < seq) & (offs_d[None, :] < HEAD_DIM)
            k = tl.load(k_src + offs_n[:, None].to(tl.int64) * s_kn + offs_d[None, :], mask=kv_mask, other=0.0)
        qk = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        # keys past the end of the sequence never count (no such keys when seq % BLOCK_N == 0); under the
        # causal mask a query sees keys <= itself
        if CAUSAL_MASK:
            keep = offs_m[:, None] >= offs_n[None, :]
            if not EVEN_N:
                keep = keep & (offs_n[None, :] < seq)
            qk = tl.where(keep, qk, float("-inf"))
        elif not EVEN_N:
            qk = tl.where(offs_n[None, :] < seq, qk, float("-inf"))
        # the max is subtracted before the scale, so the row's largest score gives p = exp2(0) = 1 exactly: with
        # the scale folded into one multiply-add (qk * scale - max * scale, fused) it gave exp2(rounding of
        # max * scale), and a row whose softmax is one-hot (inputs x 1e3) came out off by bf16(p) / p: 6x eager's
        # error against float64 on the H200, where eager returns the picked row of v exactly
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        p = tl.math.exp2((qk - m_new[:, None]) * qk_scale)
        alpha = tl.math.exp2((m_i - m_new) * qk_scale)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if USE_TMA:
            v = v_src.load([bh, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        else:
            v = tl.load(v_src + offs_n[:, None].to(tl.int64) * s_vn + offs_d[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_kernel(q_src, k_src, v_src, o_src, seq, qk_scale,
                     s_qb, s_qn, s_kb, s_kn, s_vb, s_vn, s_ob, s_on,
                     CAUSAL: tl.constexpr, SPLIT_DIAGONAL: tl.constexpr, USE_TMA: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM: tl.constexpr,
                     PRECISION: tl.constexpr, EVEN_N: tl.constexpr, LONGEST_FIRST: tl.constexpr):
    # One program per (BLOCK_M queries, batch * head). q stays in registers; K and V blocks stream through.
    pid_m = tl.program_id(0)
    if LONGEST_FIRST:  # causal: the last query blocks see the most keys; start them first, shorten the tail
        pid_m = tl.num_programs(0) - 1 - pid_m
    start_m = pid_m * BLOCK_M
    bh = tl.program_id(1)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    if USE_TMA:
        q = q_src.load([bh, start_m, 0]).reshape(BLOCK_M, BLOCK_D)
        k_base = k_src
        v_base = v_src
    else:
        q_mask = (offs_m[:, None] < seq) & (offs_d[None, :] < HEAD_DIM)
        q = tl.load(q_src + bh.to(tl.int64) * s_qb + offs_m[:, None].to(tl.int64) * s_qn + offs_d[None, :],
                    mask=q_mask, other=0.0)
        k_base = k_src + bh.to(tl.int64) * s_kb
        v_base = v_src + bh.to(tl.int64) * s_vb
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M, seq)  # blocks above the diagonal are skipped
        if SPLIT_DIAGONAL:
            # key blocks that end at or before the first query of the block need no causal mask; the rest,
            # from the last BLOCK_N boundary at or below start_m (BLOCK_N may exceed BLOCK_M), are masked
            diag = (start_m // BLOCK_N) * BLOCK_N
            acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, s_kn, s_vn, bh, offs_m, offs_d,
                                        0, diag, seq, qk_scale, False, BLOCK_N, BLOCK_D, HEAD_DIM,
                                        USE_TMA, PRECISION, True)
            acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, s_kn, s_vn, bh, offs_m, offs_d,
                                        diag, hi, seq, qk_scale, True, BLOCK_N, BLOCK_D, HEAD_DIM,
                                        USE_TMA, PRECISION, EVEN_N)
        else:
            acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, s_kn, s_vn, bh, offs_m, offs_d,
                                        0, hi, seq, qk_scale, True, BLOCK_N, BLOCK_D, HEAD_DIM,
                                        USE_TMA, PRECISION, EVEN_N)
    else:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, s_kn, s_vn, bh, offs_m, offs_d,
                                    0, seq, seq, qk_scale, False, BLOCK_N, BLOCK_D, HEAD_DIM, USE_TMA, PRECISION,
                                    EVEN_N)
    o = acc / l_i[:, None]
    if USE_TMA:
        o_src.store([bh, start_m, 0], o.to(o_src.dtype).reshape(1, BLOCK_M, BLOCK_D))
    else:
        o_ptrs = o_src + bh.to(tl.int64) * s_ob + offs_m[:, None].to(tl.int64) * s_on + offs_d[None, :]
        tl.store(o_ptrs, o.to(o_src.dtype.element_ty), mask=(offs_m[:, None] < seq) & (offs_d[None, :] < HEAD_DIM))
'''

_EPILOGUE = '''

def _tma_ok(*tensors):
    # TMA needs 16-byte aligned base addresses and row strides
    return all(t.data_ptr() % 16 == 0 and (t.stride(1) * t.element_size()) % 16 == 0 and
               (t.stride(0) * t.element_size()) % 16 == 0 for t in tensors)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v over (batch, heads, seq, head_dim) tensors, optionally causal."""
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"attention kernel: unsupported dtypes {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"attention kernel: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}; "
                         f"expected equal (batch, heads, seq, head_dim)")
    batch, heads, seq, dim = q.shape
    if dim > 256:
        raise ValueError(f"attention kernel: head_dim {dim} > 256")
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    if q.numel() == 0:
        return o
    q3, k3, v3, o3 = (t.reshape(batch * heads, seq, dim) for t in (q, k, v, o))
    q3, k3, v3 = (t if t.stride(2) == 1 else t.contiguous() for t in (q3, k3, v3))
    block_m, block_n = $BLOCK_M, $BLOCK_N
    block_d = max(triton.next_power_of_2(dim), 16)
    qk_scale = LOG2E / math.sqrt(dim)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    use_tma = $TMA and block_d == dim and _tma_ok(q3, k3, v3, o3)
    if use_tma:
        srcs = [TensorDescriptor.from_tensor(t, [1, block_m, block_d]) for t in (q3, o3)]
        q_src, o_src = srcs
        k_src, v_src = (TensorDescriptor.from_tensor(t, [1, block_n, block_d]) for t in (k3, v3))
    else:
        q_src, k_src, v_src, o_src = q3, k3, v3, o3
    grid = (triton.cdiv(seq, block_m), batch * heads)
    _attn_fwd_kernel[grid](q_src, k_src, v_src, o_src, seq, qk_scale,
                           q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1), v3.stride(0), v3.stride(1),
                           o3.stride(0), o3.stride(1),
                           CAUSAL=causal, SPLIT_DIAGONAL=$SPLIT_DIAGONAL, USE_TMA=use_tma,
                           BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, HEAD_DIM=dim,
                           PRECISION=precision, EVEN_N=seq % block_n == 0, LONGEST_FIRST=causal and $LONGEST_FIRST,
                           num_warps=$num_warps, num_stages=_depth($num_stages, q))
    return o


class ModelNew(torch.nn.Module):
    def __init__(self, causal: bool = $CAUSAL_DEFAULT):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attention(q, k, v, self.causal)
'''


def make_template(causal_default: bool):
    def template(p: dict) -> str:
        return fill(_PROLOGUE + _EPILOGUE, {
            "FP32_DEPTH": FP32_DEPTH,
            "BLOCK_M": p["BLOCK_M"], "BLOCK_N": p["BLOCK_N"], "num_warps": p["num_warps"],
            "num_stages": p["num_stages"], "SPLIT_DIAGONAL": p["split_diagonal"], "TMA": p["tma"],
            "CAUSAL_DEFAULT": causal_default, "LONGEST_FIRST": p["longest_first"],
        })

    return template


PARAMS = {
    "BLOCK_M": [64, 128],
    "BLOCK_N": [32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [1, 2, 3, 4],
    "split_diagonal": [False, True],
    "tma": [False, True],
    "longest_first": [False, True],
}

# the starters (NOTES.md): full attention 64 queries x 128 keys, 1 stage; causal 64 x 64, 3 stages
FULL_DEFAULT = {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 1}
DEFAULT = {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3, "split_diagonal": True, "tma": True,
           "longest_first": True}


def make_moves(causal: bool) -> list[Move]:
    moves = [
        Move("TMA descriptors for q, k, v, o",
             "Move tiles with 3-D tensor descriptors: the copy engine computes addresses and zero-fills past "
             "the sequence end, freeing registers and issue slots for the two wgmma products.", {"tma": True}),
        Move("pointer loads", "Load tiles with masked pointer loads (cp.async pipelined).", {"tma": False}),
    ]
    if causal:
        moves += [
            Move("split the diagonal blocks off",
                 "Run the key blocks wholly below the diagonal in a loop with no causal mask and only the "
                 "diagonal blocks with it: the compare-and-select leaves all but 1 / (S / BLOCK_M) of the "
                 "blocks.", {"split_diagonal": True}),
            Move("one masked loop",
                 "One loop over all key blocks up to the diagonal, masking each: simpler, more ALU work.",
                 {"split_diagonal": False}),
            Move("longest query blocks first",
                 "Launch the query blocks in reverse: under the causal mask the last ones see the most keys, so "
                 "starting them first leaves short blocks, not long ones, for the tail of the grid.",
                 {"longest_first": True}),
            Move("query blocks in order",
                 "Launch the query blocks in sequence order (the first see the fewest keys).",
                 {"longest_first": False}),
        ]
    for bm, bn, w in [(128, 64, 8), (128, 128, 8), (128, 32, 4), (64, 64, 4), (64, 32, 4), (128, 64, 4),
                      (64, 128, 4)]:
        moves.append(Move(f"{bm} queries x {bn} keys per step, {w} warps",
                          f"BLOCK_M={bm} queries per program (K and V re-read S / {bm} times, from L2), "
                          f"BLOCK_N={bn} keys per step ({bm}x{bn} fp32 scores in registers), {w} warps.",
                          {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w}))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"{s} pipeline stages",
                          f"Keep {s} key/value blocks in flight in shared memory ({s} x 2 x BLOCK_N x 128 x 2 "
                          f"bytes at head_dim 128): hides load latency behind the two products.",
                          {"num_stages": s}))
    return moves   # those landing past shared memory are left out by the space's `feasible`


SHARED_MAX = 232448  # bytes of shared memory one program may use on an H100/H200 (227 KB)


def shared_bytes(p: dict, head_dim: int = 128, size: int = 2) -> int:
    """Shared memory at the timed head_dim in bf16, as Triton 3.6 allocates it for sm_90 (checked against
    compiled kernels): num_stages K and V blocks, and the q block."""
    return p["num_stages"] * 2 * p["BLOCK_N"] * head_dim * size + p["BLOCK_M"] * head_dim * size


def make_space(causal: bool, cases) -> SearchSpace:
    params = dict(PARAMS)
    default = dict(DEFAULT)
    if not causal:  # the split and the launch order only matter under a causal mask
        params["split_diagonal"] = [True]
        params["longest_first"] = [True]
        default.update(FULL_DEFAULT)
    return SearchSpace(params=params, default=default, template=make_template(causal), moves=make_moves(causal),
                       tuning=["num_stages", "num_warps", "BLOCK_N"],
                       cases=cases, limits=shared_limit(shared_bytes))


SPACE = make_space(causal=False, cases=CASES)
