"""WRONG: split-K whose reduction sums the first SPLITS - 1 partials and drops the last K range's.

K is cut into two ranges wherever it is longer than one BK step; each program writes its fp32 partial tile to a
workspace, and the reduction stops one partial short. Right only where K fits one step (the 1 x 1 x 1 case).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _partial_kernel(a_ptr, b_ptr, ws_ptr, M, N, K, K_SPLIT, s_am, s_bk,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    k_start = tl.program_id(2) * K_SPLIT
    k_end = tl.minimum(K, k_start + K_SPLIT)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(k_start, k_end, BK):
        kk = k + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * s_am + kk[None, :], mask=(offs_m[:, None] < M) & (kk[None, :] < k_end),
                    other=0.0)
        b = tl.load(b_ptr + kk[:, None] * s_bk + offs_n[None, :], mask=(kk[:, None] < k_end) & (offs_n[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    ws = ws_ptr + tl.program_id(2) * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(ws, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _reduce_kernel(ws_ptr, c_ptr, MN, SPLITS, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, tl.maximum(SPLITS - 1, 1)):   # the bug: the last partial is never added
        acc += tl.load(ws_ptr + s * MN + offs, mask=offs < MN, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=offs < MN)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        BM, BN, BK = 32, 32, 16
        steps = triton.cdiv(K, BK)
        chunk = triton.cdiv(steps, 2 if steps > 1 else 1) * BK
        splits = triton.cdiv(K, chunk)
        ws = torch.empty((splits, M, N), dtype=torch.float32, device=a.device)
        _partial_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN), splits)](a, b, ws, M, N, K, chunk, a.stride(0),
                                                                        b.stride(0), BM=BM, BN=BN, BK=BK)
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
        _reduce_kernel[(triton.cdiv(M * N, 1024),)](ws, c, M * N, splits, BLOCK=1024)
        return c
