"""WRONG: assumes the row width is a power of two.

The block is the largest power of two that fits in the row, loaded without a mask (so no access is out of
bounds): for a power-of-two width that is the whole row and the result is exact; for any other width the tail
is neither counted in the sum nor written.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + cols).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        n = x2.shape[1]
        block = 1 << (n.bit_length() - 1)  # the bug: the width is taken to be a power of two
        _softmax_kernel[(x2.shape[0],)](x2, y, x2.stride(0), y.stride(0), BLOCK=block)
        return y.reshape(x.shape)
