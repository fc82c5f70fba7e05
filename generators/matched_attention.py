"""Scaled dot-product attention at any head size: F.scaled_dot_product_attention (and the same written out: q @ k^T
times a number, softmax over the keys, @ v), as the tracer reads it on the meta device (torch's math path: q and
k^T each times sqrt(scale), a bmm, an additive tril mask of -inf where causal, _safe_softmax, a bmm).

Two routes:
- where the flash_attention family fits (4-D q, k, v of one shape, so Lq = Lk and Dv = D; head dim <= 256; the
  default scale 1 / sqrt(D); fp32, fp16 or bf16), its template and search space (flash_attention_causal's where
  causal), as for the family's own problem;
- otherwise (a head dim over 256 as KernelBench's 97: (32, 32, 512, 1024) fp32; Lq != Lk; an explicit scale; 3-D
  inputs; Dv != D) a generated flash-style kernel whose program owns BLOCK_M query rows and BLOCK_D columns of the
  output: per block of BLOCK_N keys it takes the scores over the whole head dim, keeps a running max and sum
  (online softmax, the max subtracted before the scale so a row's largest score weighs exactly 1) and accumulates
  P @ V for its BLOCK_D columns only (fp32 accumulation). Where Dv needs several column slices, each would
  recompute q k^T ((slices + 1) / 2 times attention's 4 B H Lq Lk D flops: 2.5x at 97 with BLOCK_D 256), so by
  default (`scores`) a batched-GEMM kernel computes the raw scores once (fp32, B H Lq Lk x 4 bytes: 1.07 GB at 97;
  tiles wholly above a causal diagonal skipped) and the slices read them (from L2 mostly: a query block's slices
  are neighbours in the grid); past 4 GiB of scores, or `scores` off, each slice computes its own in BLOCK_K
  chunks.
fp32 products run 3xTF32 (`input_precision="tf32x3"`, the matmul family's fp32 rule: as accurate as an fp32 sum
for reductions up to 16384 terms, matmul NOTES.md) where D and Lk are both at most 16384, else "ieee"; a move
switches. Plain TF32 is not in the space (its 10-bit mantissa puts errors of 1e-3 into scores of size 10).

Refused with a reason: an attention mask tensor, dropout (dropout_p > 0), key/value batch dims broadcast against
the query's (GQA's repeat).
"""
from __future__ import annotations

import math

import torch

from kernelsearch.families.space import Move, SearchSpace, fill
from kernelsearch.generators.common import LLM_HINT, Match, Unmatched, adapted_space, shape_text, tensor_input
from kernelsearch.generators.pointwise import DEFAULT_INIT
from kernelsearch.generators.trace import Traced, meta, op_name, schema_args
from kernelsearch.judge.problem import Case

TF32X3_MAX_K = 16384   # the matmul family's bound for one 3xTF32 accumulator (families/matmul/NOTES.md)

_KERNEL = '''
LOG2E = 1.4426950408889634
SCORES_MAX_BYTES = 1 << 32


@triton.jit
def _attn_scores_kernel(q_ptr, k_ptr, s_ptr, Lq, Lk, D, s_qb, s_qm, s_kb, s_kn, s_sb, s_sm,
                        CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                        PRECISION: tl.constexpr, K_STAGES: tl.constexpr):
    # The raw scores q k^T (unscaled, fp32) of one BLOCK_M x BLOCK_N tile of one (batch, head), summed over the
    # whole head dim. Under the causal mask a tile wholly above the diagonal is never read: skipped.
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    bh = tl.program_id(2).to(tl.int64)
    if CAUSAL and pid_n * BLOCK_N > pid_m * BLOCK_M + BLOCK_M - 1:
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k0 = tl.arange(0, BLOCK_K)
    m_mask = offs_m < Lq
    n_mask = offs_n < Lk
    q_rows = q_ptr + bh * s_qb + offs_m[:, None].to(tl.int64) * s_qm
    k_rows = k_ptr + bh * s_kb + offs_n[:, None].to(tl.int64) * s_kn
    qk = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start_k in tl.range(0, D, BLOCK_K, num_stages=K_STAGES):
        offs_k = start_k + offs_k0
        k_mask = offs_k < D
        q = tl.load(q_rows + offs_k[None, :], mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        k = tl.load(k_rows + offs_k[None, :], mask=n_mask[:, None] & k_mask[None, :], other=0.0)
        qk = tl.dot(q, tl.trans(k), qk, input_precision=PRECISION)
    s_ptrs = s_ptr + bh * s_sb + offs_m[:, None].to(tl.int64) * s_sm + offs_n[None, :]
    tl.store(s_ptrs, qk, mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def _attn_dslice_kernel(q_ptr, k_ptr, v_ptr, o_ptr, s_ptr, Lq, Lk, D, DV, qk_scale,
                        s_qb, s_qm, s_kb, s_kn, s_vb, s_vn, s_ob, s_om, s_sb, s_sm,
                        CAUSAL: tl.constexpr, NEGATE: tl.constexpr, SCORES: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
                        PRECISION: tl.constexpr, K_STAGES: tl.constexpr):
    # One program: BLOCK_M query rows x BLOCK_D output columns of one (batch, head). The column programs of a query
    # block are neighbours in the grid (axis 0), so the q and k chunks (or the stored scores) they all read come
    # from L2. SCORES: the raw scores are read from s_ptr (_attn_scores_kernel's) instead of computed here.
    pid_d = tl.program_id(0)
    pid_m = tl.program_id(1)
    bh = tl.program_id(2).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    offs_k0 = tl.arange(0, BLOCK_K)
    offs_n0 = tl.arange(0, BLOCK_N)
    m_mask = offs_m < Lq
    d_mask = offs_d < DV
    q_rows = q_ptr + bh * s_qb + offs_m[:, None].to(tl.int64) * s_qm
    s_rows = s_ptr + bh * s_sb + offs_m[:, None].to(tl.int64) * s_sm
    k_base = k_ptr + bh * s_kb
    v_base = v_ptr + bh * s_vb
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    hi = Lk
    if CAUSAL:   # query i sees keys j <= i (torch's tril of an Lq x Lk mask): no key block past the last row's
        hi = tl.minimum(Lk, (pid_m + 1) * BLOCK_M)
    for start_n in tl.range(0, hi, BLOCK_N):
        offs_n = start_n + offs_n0
        n_mask = offs_n < Lk
        if SCORES:
            qk = tl.load(s_rows + offs_n[None, :], mask=m_mask[:, None] & n_mask[None, :], other=0.0)
        else:
            k_rows = k_base + offs_n[:, None].to(tl.int64) * s_kn
            # the scores over the whole head dim, BLOCK_K at a time, summed in fp32
            qk = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
            for start_k in tl.range(0, D, BLOCK_K, num_stages=K_STAGES):
                offs_k = start_k + offs_k0
                k_mask = offs_k < D
                q = tl.load(q_rows + offs_k[None, :], mask=m_mask[:, None] & k_mask[None, :], other=0.0)
                k = tl.load(k_rows + offs_k[None, :], mask=n_mask[:, None] & k_mask[None, :], other=0.0)
                qk = tl.dot(q, tl.trans(k), qk, input_precision=PRECISION)
        if NEGATE:   # a negative scale: softmax(s * x) = softmax(|s| * (-x))
            qk = -qk
        keep = n_mask[None, :]
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= offs_n[None, :])
        qk = tl.where(keep, qk, float("-inf"))
        # online softmax: the max subtracted before the scale (the row's largest score gives exp2(0) = 1 exactly)
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        p = tl.where(keep, tl.math.exp2((qk - m_new[:, None]) * qk_scale), 0.0)
        alpha = tl.where(m_i == float("-inf"), 0.0, tl.math.exp2((m_i - m_new) * qk_scale))
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + offs_n[:, None].to(tl.int64) * s_vn + offs_d[None, :],
                    mask=n_mask[:, None] & d_mask[None, :], other=0.0)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PRECISION)
        m_i = m_new
    o = acc / l_i[:, None]
    o_ptrs = o_ptr + bh * s_ob + offs_m[:, None].to(tl.int64) * s_om + offs_d[None, :]
    tl.store(o_ptrs, o.to(o_ptr.dtype.element_ty), mask=m_mask[:, None] & d_mask[None, :])


def attention_any_dim(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                      scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * scale) v, q (..., Lq, D), k (..., Lk, D), v (..., Lk, Dv) of the same leading dims; scale
    1 / sqrt(D) where None; causal: query i sees keys j <= i (torch's is_causal, a top-left tril)."""
    if q.dtype not in (torch.float32, torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"attention kernel: unsupported dtypes {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dim() < 3 or k.shape[:-2] != q.shape[:-2] or v.shape[:-2] != q.shape[:-2] or k.shape[-1] != q.shape[-1] \\
            or v.shape[-2] != k.shape[-2]:
        raise ValueError(f"attention kernel: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    lq, d = q.shape[-2:]
    lk, dv = k.shape[-2], v.shape[-1]
    o = torch.empty((*q.shape[:-1], dv), dtype=q.dtype, device=q.device)
    if o.numel() == 0:
        return o
    if lk == 0:
        return o.fill_(float("nan"))
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], t.shape[-1]) for t in (q, k, v))
    q3, k3, v3 = (t if t.stride(2) == 1 else t.contiguous() for t in (q3, k3, v3))
    o3 = o.view(-1, lq, dv)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    precision = $PRECISION if q.dtype == torch.float32 else "tf32"
    if precision == "tf32x3" and max(d, lk) > $TF32X3_MAX_K:
        precision = "ieee"
    block_d = min($BLOCK_D, max(triton.next_power_of_2(dv), 16))
    # the scores stored once (fp32, bh x lq x lk) where several column slices would each recompute them, and
    # they take at most SCORES_MAX_BYTES; else every slice computes its own
    slices = triton.cdiv(dv, block_d)
    scores = $SCORES and slices > 1 and q3.shape[0] * lq * lk * 4 <= SCORES_MAX_BYTES
    s3 = q3
    if scores:
        s3 = torch.empty((q3.shape[0], lq, lk), dtype=torch.float32, device=q.device)
        grid_s = (triton.cdiv(lk, $S_BLOCK), triton.cdiv(lq, $S_BLOCK), q3.shape[0])
        _attn_scores_kernel[grid_s](q3, k3, s3, lq, lk, d, q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1),
                                    s3.stride(0), s3.stride(1), CAUSAL=causal, BLOCK_M=$S_BLOCK, BLOCK_N=$S_BLOCK,
                                    BLOCK_K=32, PRECISION=precision, K_STAGES=$num_stages,
                                    num_warps=$S_WARPS, num_stages=$num_stages)
    grid = (slices, triton.cdiv(lq, $BLOCK_M), q3.shape[0])
    _attn_dslice_kernel[grid](q3, k3, v3, o3, s3, lq, lk, d, dv, abs(scale) * LOG2E,
                              q3.stride(0), q3.stride(1), k3.stride(0), k3.stride(1), v3.stride(0), v3.stride(1),
                              o3.stride(0), o3.stride(1), s3.stride(0), s3.stride(1),
                              CAUSAL=causal, NEGATE=scale < 0, SCORES=scores, BLOCK_M=$BLOCK_M, BLOCK_N=$BLOCK_N,
                              BLOCK_K=$BLOCK_K,
                              BLOCK_D=block_d, PRECISION=precision, K_STAGES=$num_stages,
                              num_warps=$num_warps, num_stages=$num_stages)
    return o
'''

_TEMPLATE = '''import math

import torch
import triton
import triton.language as tl

$KERNEL

import torch.nn as nn  # noqa: E402,F401 - what the reference's constructor may use


class ModelNew(torch.nn.Module):
    # the problem's constructor and forward around a generated attention kernel ($SUMMARY)
    $INIT

    def forward(self, $ARGS):
        return attention_any_dim($Q, $K, $V, $CAUSAL, $SCALE)
'''

PARAMS = {
    "BLOCK_M": [32, 64, 128],
    "BLOCK_N": [32, 64, 128],
    "BLOCK_K": [16, 32, 64],
    "BLOCK_D": [32, 64, 128, 256],
    "num_warps": [4, 8],
    "num_stages": [1, 2, 3],
    "precision": ["tf32x3", "ieee"],
    "scores": [True, False],
    "S_BLOCK": [64, 128],
}

# fp32 values a thread holds: the accumulator, the scores and (3x where 3xTF32 splits it into high and low parts)
# the value tile; 180 separates the points compiled for sm_90 at KernelBench 97 without a spill from those with
_REGISTERS = 180
_SHARED = 232448   # bytes of shared memory a program may use on an H100 / H200


def attention_default(dv: int) -> dict:
    """The starter: 64 queries x 32 keys, head-dim chunks of 16 two stages deep; output columns 256 a program on 8
    warps where Dv > 128 (half the recomputed q k^T of 128), else 128 on 4. Compiled for sm_90 at KernelBench 97's
    fp32 (32, 32, 512, 1024), 3xTF32: 255 registers, no spill (128 on 4 warps: 241, none); 64 x 64 x 32 with 256
    columns spills 1.6 KB, 128 x 32 x 16 with 256 columns 1.5 KB."""
    wide = dv > 128
    return {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 16, "BLOCK_D": 256 if wide else 128,
            "num_warps": 8 if wide else 4, "num_stages": 2, "precision": "tf32x3", "scores": dv > 256,
            "S_BLOCK": 128}


def attention_space(q: str, k: str, v: str, causal: bool, scale: float | None, dv: int, size: int, forward: str,
                    init: str, summary: str) -> SearchSpace:
    def template(p: dict) -> str:
        kernel = fill(_KERNEL, {k_: p[k_] for k_ in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_D", "num_warps",
                                                     "num_stages", "S_BLOCK")}
                      | {"PRECISION": repr(p["precision"]), "TF32X3_MAX_K": TF32X3_MAX_K, "SCORES": p["scores"],
                         "S_WARPS": 8 if p["S_BLOCK"] == 128 else 4})
        return fill(_TEMPLATE, {"KERNEL": kernel, "SUMMARY": summary, "INIT": init, "ARGS": forward, "Q": q,
                                "K": k, "V": v, "CAUSAL": causal, "SCALE": "None" if scale is None else repr(scale)})

    block_d_max = max(triton_next_pow2(dv), 16)

    def limits(p: dict, case) -> str | None:
        bd = min(p["BLOCK_D"], block_d_max)
        threads = 32 * p["num_warps"]
        split = 3 if p["precision"] == "tf32x3" and size == 4 else 1
        held = (p["BLOCK_M"] * bd + p["BLOCK_M"] * p["BLOCK_N"] + split * p["BLOCK_N"] * bd) // threads
        if held > _REGISTERS:
            return f"{held} fp32 accumulator, score and value elements a thread > {_REGISTERS}"
        # the value tile staged num_stages deep (plus its 3xTF32 parts), the q and k chunks, P: within 20 % of
        # Triton 3.6's sm_90 allocation at the 7 points compiled at KernelBench 97 (under it), hence the margin
        smem = (p["num_stages"] * p["BLOCK_N"] * bd + (p["BLOCK_N"] * bd if split == 3 else 0)
                + p["num_stages"] * (p["BLOCK_M"] + p["BLOCK_N"]) * p["BLOCK_K"] + p["BLOCK_M"] * p["BLOCK_N"]) * size
        if smem > 0.85 * _SHARED:
            return f"about {smem} B of shared memory > 85 % of {_SHARED} B"
        return None

    moves = [Move("scores stored once", "Compute q k^T once (a batched-GEMM kernel of 128 x 128 tiles, fp32 scores "
                  "to memory: B H Lq Lk x 4 bytes, up to 4 GiB) and let every column slice read it, instead of each "
                  "slice recomputing it over the whole head dim.", {"scores": True}),
             Move("scores recomputed per slice", "Each column slice computes q k^T itself: no score traffic, "
                  "Dv / BLOCK_D times the q k^T flops.", {"scores": False}),
             Move("3xTF32 products", "fp32 q k^T and P V as three TF32 tensor-core products (hi*hi + hi*lo + "
                  "lo*hi): fp32 accuracy at tensor-core speed.", {"precision": "tf32x3"}),
             Move("fp32 FMA products", "fp32 q k^T and P V on the CUDA cores (input_precision ieee).",
                  {"precision": "ieee"})]
    for bd in PARAMS["BLOCK_D"]:
        if bd <= block_d_max:
            moves.append(Move(f"{bd} output columns a program",
                              f"BLOCK_D={bd}: {math.ceil(dv / bd)} programs per query block, each recomputing the "
                              f"scores over the whole head dim; wider slices recompute less but hold more "
                              f"accumulator.", {"BLOCK_D": bd}))
    for bm, bn, w in [(64, 32, 4), (64, 32, 8), (128, 32, 8), (64, 64, 8), (32, 64, 4), (32, 32, 4)]:
        moves.append(Move(f"{bm} queries x {bn} keys, {w} warps", f"BLOCK_M={bm}, BLOCK_N={bn} on {w} warps.",
                          {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": w}))
    for bk in PARAMS["BLOCK_K"]:
        moves.append(Move(f"head-dim chunks of {bk}", f"BLOCK_K={bk} columns of q and k a step of the score sum.",
                          {"BLOCK_K": bk}))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"{s} stages", f"Keep {s} q/k chunks in flight.", {"num_stages": s}))
    return SearchSpace(params=PARAMS, default=attention_default(dv), template=template, moves=moves,
                       tuning=["BLOCK_D", "num_warps", "num_stages"], cases=(Case("attention", {}, timed=True),),
                       limits=limits)


def triton_next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


# -- reading the graph ------------------------------------------------------------------------------------------------

_VIEWS = ("view", "_unsafe_view", "reshape", "expand")
_SOFTMAX = ("_safe_softmax", "_softmax")


def _number(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _through_views(node, seen: set):
    """`node` with views and expands that do not broadcast skipped; None where an expand broadcasts."""
    while isinstance(node, torch.fx.Node) and op_name(node) in _VIEWS:
        if op_name(node) == "expand":
            a, b = meta(node), meta(node.args[0])
            if a is None or b is None or tuple(a.shape) != tuple(b.shape):
                return None
        seen.add(node)
        node = node.args[0]
    return node


def _scaled(node, seen: set) -> tuple[object, float]:
    """`node` with multiplications and divisions by numbers skipped, and the product of those numbers."""
    factor = 1.0
    while isinstance(node, torch.fx.Node) and op_name(node) in ("mul", "div"):
        a = schema_args(node)
        c = _number(a.get("other"))
        if c is None or not isinstance(a.get("self"), torch.fx.Node) or (op_name(node) == "div" and c == 0):
            break
        factor = factor * c if op_name(node) == "mul" else factor / c
        seen.add(node)
        node = a["self"]
    return node, factor


def _upcast_input(traced: Traced, node, seen: set):
    """The forward tensor `node` is, or is upcast from (torch's math path computes fp16 / bf16 in fp32)."""
    if isinstance(node, torch.fx.Node) and op_name(node) == "_to_copy":
        a = schema_args(node)
        if a.get("dtype") == torch.float32 and set(a) <= {"self", "dtype", "layout", "device", "pin_memory",
                                                          "non_blocking", "memory_format"}:
            seen.add(node)
            node = a["self"]
    return tensor_input(traced, node)


def _last_two_swapped(node) -> bool:
    s = meta(node.args[0])
    nd = s.dim() if s is not None else 0
    if nd < 2:
        return False
    if op_name(node) == "transpose":
        return {node.args[1] % nd, node.args[2] % nd} == {nd - 2, nd - 1}
    if op_name(node) == "permute":
        return [d % nd for d in node.args[1]] == [*range(nd - 2), nd - 1, nd - 2]
    return op_name(node) == "t" and nd == 2


def _causal_mask(node, lq: int, lk: int, seen: set) -> bool:
    """where(tril(ones(lq, lk, bool)), 0, -inf): the additive mask of torch's is_causal."""
    if not isinstance(node, torch.fx.Node) or op_name(node) != "where":
        return False
    a = schema_args(node)
    tril, zero, ninf = a.get("condition"), a.get("self"), a.get("other")
    if not all(isinstance(n, torch.fx.Node) for n in (tril, zero, ninf)) or op_name(tril) != "tril" or \
            schema_args(tril).get("diagonal", 0) != 0 or op_name(tril.args[0]) != "ones" or \
            list(schema_args(tril.args[0]).get("size", ())) != [lq, lk]:
        return False
    values = []
    for n in (zero, ninf):
        if op_name(n) != "scalar_tensor":
            return False
        values.append(float(schema_args(n)["s"]))
    if values != [0.0, float("-inf")]:
        return False
    seen.update({node, tril, tril.args[0], zero, ninf})
    return True


def match_attention(traced: Traced) -> Match | None:
    """softmax(q k^T * scale [+ causal mask]) v, as sdpa's math path or written out; None where the graph is not
    two batched products around a softmax; Unmatched (with the reason) where it is attention the kernels do not
    compute (a mask tensor, dropout, broadcast key/value heads)."""
    names = [op_name(n) for n in traced.ops]
    if names.count("bmm") != 2 or not any(n in _SOFTMAX for n in names):
        return None
    what = "scaled dot-product attention"
    if any(n.startswith("bernoulli") or n in ("native_dropout", "dropout") for n in names):
        raise Unmatched(f"{what} with dropout (dropout_p > 0): the offline attention kernels compute no dropout; "
                        f"{LLM_HINT}")
    seen: set = set()
    out = traced.output
    low = None
    if op_name(out) == "_to_copy":   # fp16 / bf16 through the math path: computed in fp32, cast back
        low = schema_args(out).get("dtype")
        seen.add(out)
        out = out.args[0]
    bmm2 = _through_views(out, seen)
    if not isinstance(bmm2, torch.fx.Node) or op_name(bmm2) != "bmm":
        return None
    seen.add(bmm2)
    sm = _through_views(bmm2.args[0], seen)
    v = _upcast_input(traced, _through_views(bmm2.args[1], seen), seen)
    if not isinstance(sm, torch.fx.Node) or op_name(sm) not in _SOFTMAX:
        return None
    sa = schema_args(sm)
    sm_in = meta(sm)
    if sm_in is None or sa.get("dim") % sm_in.dim() != sm_in.dim() - 1 or sa.get("half_to_float") or \
            sa.get("dtype") is not None:
        return None
    seen.add(sm)
    if v is None:
        raise Unmatched(f"{what}: its value operand is not a forward input read as it is (broadcast key/value "
                        f"heads, or computed); {LLM_HINT}")
    s = sa["self"]
    causal = False
    if isinstance(s, torch.fx.Node) and op_name(s) == "add":
        a = schema_args(s)
        m = meta(s)
        if a.get("alpha", 1) != 1 or m is None or m.dim() < 2 or \
                not _causal_mask(a.get("other"), int(m.shape[-2]), int(m.shape[-1]), seen):
            raise Unmatched(f"{what} with an attention mask (attn_mask): the offline attention kernels compute "
                            f"the causal mask only; {LLM_HINT}")
        causal = True
        seen.add(s)
        s = a["self"]
    s, post = _scaled(s, seen)
    bmm1 = _through_views(s, seen)
    if not isinstance(bmm1, torch.fx.Node) or op_name(bmm1) != "bmm":
        return None
    seen.add(bmm1)
    qn, q_scale = _scaled(_through_views(bmm1.args[0], seen), seen)
    kt, k_scale = _scaled(_through_views(bmm1.args[1], seen), seen)
    if not isinstance(kt, torch.fx.Node) or op_name(kt) not in ("transpose", "permute", "t") or \
            not _last_two_swapped(kt):
        return None
    seen.add(kt)
    kn, k_scale2 = _scaled(kt.args[0], seen)
    q, k = _upcast_input(traced, qn, seen), _upcast_input(traced, kn, seen)
    if q is None or k is None:
        raise Unmatched(f"{what}: its query or key operand is not a forward input read as it is (broadcast "
                        f"key/value heads, or computed); {LLM_HINT}")
    rest = [n for n in traced.ops if n not in seen and n.users]
    if rest:
        return None
    if any(i.kind == "number" for i in traced.inputs):   # a scale forward receives would be baked in
        return None
    if not (q.dtype == k.dtype == v.dtype) or (low is not None and low != q.dtype):
        return None
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if len(qs) < 3 or ks[:-2] != qs[:-2] or vs[:-2] != qs[:-2] or ks[-1] != qs[-1] or vs[-2] != ks[-2]:
        return None
    scale = q_scale * k_scale * k_scale2 * post
    if not math.isfinite(scale):   # sdpa's math path takes sqrt(scale): a negative scale traces as NaN
        return None
    d = qs[-1]
    default_scale = math.isclose(scale, 1.0 / math.sqrt(d), rel_tol=1e-9)
    mask = "causal " if causal else ""
    summary = (f"{mask}attention of q {shape_text(q)}, k {'x'.join(map(str, ks))}, v {'x'.join(map(str, vs))}"
               f"{'' if default_scale else f', scale {scale:.6g}'}")
    forward = ", ".join(traced.forward_args) or "*inputs"
    init = traced.init_source or DEFAULT_INIT
    if len(qs) == 4 and qs == ks == vs and d <= 256 and default_scale:
        body = [f"return attention({q.name}, {k.name}, {v.name}, {causal})"]
        space = adapted_space("flash_attention", traced, body, summary + " (the flash_attention family)",
                              space_module="flash_attention_causal" if causal else None)
        return Match("flash_attention", summary + " (the flash_attention family)", space)
    summary += " (a generated flash kernel over head-dim slices)"
    space = attention_space(q.name, k.name, v.name, causal, None if default_scale else scale, vs[-1],
                            q.dtype.itemsize, forward, init, summary)
    return Match("attention", summary, space)
