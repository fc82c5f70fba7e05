"""WRONG: the padding lanes of the block enter the variance.

Padded lanes load 0, so x - mean there is -mean, and its square is summed with the row's: the variance is too
large by mean^2 * (BLOCK - width) / width. Right for power-of-two widths; wrong for every other width as soon
as the mean is not zero.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = x - mean  # the bug: no tl.where(mask, ..., 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * stride + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=getattr(torch, dtype)))
        self.bias = torch.nn.Parameter(torch.zeros(hidden_size, dtype=getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        _layernorm_kernel[(x2.shape[0],)](x2, self.weight, self.bias, y, x2.shape[1], x2.stride(0), self.eps,
                                          BLOCK=triton.next_power_of_2(x2.shape[1]))
        return y.reshape(x.shape)
