"""WRONG: computes the exponentials in fp16 to halve register pressure on the 65536-wide rows.

x - max is rounded to fp16 before exp (and exp's result is fp16): the probabilities carry 3 to 4 significant
digits, outside the honest fp32 tolerance (1e-4 relative) of the CRFM problem.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _exp_fp16(z):
    # the bug: the argument and the result rounded to fp16
    return tl.exp(z.to(tl.float16).to(tl.float32)).to(tl.float16).to(tl.float32)


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        m = tl.maximum(m, tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=float("-inf")))
    m_row = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=float("-inf"))
        s += _exp_fp16(x - m_row)
    inv = 1.0 / tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=float("-inf"))
        e = _exp_fp16(x - m_row)
        tl.store(y_ptr + row * y_stride + cols, (e * inv).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        _softmax_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), y.stride(0), BLOCK=1024)
        return y.reshape(x.shape)
