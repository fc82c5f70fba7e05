"""WRONG: returns the sums with the reduced dimension kept, shape (..., 1), as torch.sum(keepdim=True) does.

The values are right; the shape is not the reference's (..., ), and broadcasting downstream would silently
turn (n, 1) + (n,) into (n, n).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _sum_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty(x2.shape[0], dtype=x.dtype, device=x.device)
        _sum_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=256)
        return y.reshape(*x.shape[:-1], 1)  # the bug: keepdim
