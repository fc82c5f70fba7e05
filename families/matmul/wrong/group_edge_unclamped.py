"""WRONG: the grouped tile order assumes every group is GROUP_M tiles tall.

When the number of tile rows is not a multiple of GROUP_M, the last group's tiles are mapped to rows past the
end (their stores are masked away) and some tiles of C are never written. Right when GROUP_M divides
cdiv(M, BM), as it does for 4096 / 128.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_bk, s_cm,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    num_pid_n = tl.cdiv(N, BN)
    pid = tl.program_id(0)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    pid_m = first_m + (pid % in_group) % GROUP_M  # the bug: GROUP_M, not min(num_pid_m - first_m, GROUP_M)
    pid_n = (pid % in_group) // GROUP_M
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + offs_k
        a = tl.load(a_ptr + (offs_m[:, None] % M) * s_am + kk[None, :], mask=kk[None, :] < K, other=0.0)
        b = tl.load(b_ptr + kk[:, None] * s_bk + (offs_n[None, :] % N), mask=kk[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + offs_m[:, None] * s_cm + offs_n[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.zeros((M, N), dtype=a.dtype, device=a.device)
        grid = (triton.cdiv(M, 16) * triton.cdiv(N, 16),)
        _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BM=16, BN=16, BK=16,
                             GROUP_M=4)
        return c
