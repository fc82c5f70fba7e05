"""WRONG: the one-sweep variance E[x^2] - E[x]^2 in fp32.

Fine for zero-mean rows; when the mean is large next to the spread (the spec's `offset` cases) the two terms
are nearly equal and their difference keeps only a few correct digits, so the output is off by far more than
1e-4 relative. Looks attractive because it needs a single sweep over the row.
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
    var = tl.sum(x * x, axis=0) / n_cols - mean * mean  # the bug: catastrophic cancellation
    rstd = tl.rsqrt(tl.maximum(var, 0.0) + eps)
    tl.store(y_ptr + row * stride + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


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
