"""WRONG: the chunk loop stops at the last full chunk, so the tail of every row whose width is not a multiple
of BLOCK is never added. Right for widths that are multiples of 64 (and for width 64 itself).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _sum_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols - BLOCK + 1, BLOCK):  # the bug: the partial last chunk is skipped
        acc += tl.load(x_ptr + row * stride + start + offs).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty(x2.shape[0], dtype=x.dtype, device=x.device)
        _sum_kernel[(x2.shape[0],)](x2, y, x2.shape[1], x2.stride(0), BLOCK=64)
        return y.reshape(x.shape[:-1])
