# kernelsearch-space: {"BLOCK_M": 64, "BLOCK_N": 64, "longest_first": true, "num_stages": 3, "num_warps": 4, "split_diagonal": true, "tma": true}
import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


def _depth(stages, x):
    # fp32 tiles take twice the shared memory of the 16-bit tiles the depth was tuned for (fp32 matmul at 4
    # stages: 360 KB > the H200's 227 KB): fp32, checked for correctness rather than tuned, runs one stage deep
    return 1 if x.element_size() == 4 else stages

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
    block_m, block_n = 64, 64
    block_d = max(triton.next_power_of_2(dim), 16)
    qk_scale = LOG2E / math.sqrt(dim)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    use_tma = True and block_d == dim and _tma_ok(q3, k3, v3, o3)
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
                           CAUSAL=causal, SPLIT_DIAGONAL=True, USE_TMA=use_tma,
                           BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, HEAD_DIM=dim,
                           PRECISION=precision, EVEN_N=seq % block_n == 0, LONGEST_FIRST=causal and True,
                           num_warps=4, num_stages=_depth(3, q))
    return o


class ModelNew(torch.nn.Module):
    def __init__(self, causal: bool = True):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attention(q, k, v, self.causal)
