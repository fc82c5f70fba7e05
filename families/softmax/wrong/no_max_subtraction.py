"""WRONG: softmax as exp(x) / sum(exp(x)), without subtracting the row max first.

Mathematically the same; in fp32 exp() overflows to inf once an input passes about 88 and the row becomes
inf / inf = NaN. The spec's `large` case (inputs of scale 50) reaches that; ordinary inputs never do.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x)  # the bug: no max subtracted
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        _softmax_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), y.stride(0),
                                        BLOCK=max(triton.next_power_of_2(x2.shape[1]), 16))
        return y.reshape(x.shape)
