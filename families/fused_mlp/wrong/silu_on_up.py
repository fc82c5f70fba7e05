"""WRONG: SiLU applied to the up projection instead of the gate: silu(x W_up^T) * (x W_gate^T).

Both projections have the same shape, so nothing fails loudly; the weights simply play each other's part."""
import torch
import triton
import triton.language as tl


@triton.jit
def _gate_up_kernel(x_ptr, wg_ptr, wu_ptr, h_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    g = tl.zeros((BM, BN), tl.float32)
    u = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        kk = k + offs_k
        x = tl.load(x_ptr + offs_m[:, None] * K + kk[None, :], mask=(offs_m[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        w_mask = (offs_n[:, None] < N) & (kk[None, :] < K)
        wg = tl.load(wg_ptr + offs_n[:, None] * K + kk[None, :], mask=w_mask, other=0.0)
        wu = tl.load(wu_ptr + offs_n[:, None] * K + kk[None, :], mask=w_mask, other=0.0)
        g = tl.dot(x, tl.trans(wg), g, input_precision="ieee")
        u = tl.dot(x, tl.trans(wu), u, input_precision="ieee")
    h = u * tl.sigmoid(u) * g  # the bug: silu(up) * gate
    tl.store(h_ptr + offs_m[:, None] * N + offs_n[None, :], h.to(h_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _down_kernel(h_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        kk = k + offs_k
        h = tl.load(h_ptr + offs_m[:, None] * K + kk[None, :], mask=(offs_m[:, None] < M) & (kk[None, :] < K),
                    other=0.0)
        w = tl.load(w_ptr + offs_n[:, None] * K + kk[None, :], mask=(offs_n[:, None] < N) & (kk[None, :] < K),
                    other=0.0)
        acc = tl.dot(h, tl.trans(w), acc, input_precision="ieee")
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, dtype: str = "float32"):
        super().__init__()
        dt = getattr(torch, dtype)
        self.gate_proj = torch.nn.Module()
        self.gate_proj.weight = torch.nn.Parameter(torch.empty(intermediate_size, hidden_size, dtype=dt))
        self.up_proj = torch.nn.Module()
        self.up_proj.weight = torch.nn.Parameter(torch.empty(intermediate_size, hidden_size, dtype=dt))
        self.down_proj = torch.nn.Module()
        self.down_proj.weight = torch.nn.Parameter(torch.empty(hidden_size, intermediate_size, dtype=dt))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1]).contiguous()
        M, H = x.shape
        inter = self.gate_proj.weight.shape[0]
        h = torch.empty((M, inter), dtype=x.dtype, device=x.device)
        _gate_up_kernel[(triton.cdiv(M, 32), triton.cdiv(inter, 32))](
            x, self.gate_proj.weight, self.up_proj.weight, h, M, inter, H, BM=32, BN=32, BK=32)
        y = torch.empty((M, H), dtype=x.dtype, device=x.device)
        _down_kernel[(triton.cdiv(M, 32), triton.cdiv(H, 32))](h, self.down_proj.weight, y, M, H, inter,
                                                               BM=32, BN=32, BK=32)
        return y.reshape(shape)
