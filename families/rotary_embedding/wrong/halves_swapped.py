"""WRONG: rotate_half with its halves swapped, cat(x2, -x1) instead of cat(-x2, x1).

The output is still a rotation of each pair by the right angle, but in the opposite direction: norms are kept
and position 0 (angle 0) comes out right, so a norm or identity check would not see it.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, seq, half, BLOCK_H: tl.constexpr):
    s = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    d = tl.arange(0, BLOCK_H)
    mask = d < half
    row = (bh * seq + s) * 2 * half
    x1 = tl.load(x_ptr + row + d, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + row + half + d, mask=mask, other=0.0).to(tl.float32)
    c1 = tl.load(cos_ptr + s * 2 * half + d, mask=mask, other=0.0).to(tl.float32)
    c2 = tl.load(cos_ptr + s * 2 * half + half + d, mask=mask, other=0.0).to(tl.float32)
    s1 = tl.load(sin_ptr + s * 2 * half + d, mask=mask, other=0.0).to(tl.float32)
    s2 = tl.load(sin_ptr + s * 2 * half + half + d, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + d, (x1 * c1 + x2 * s1).to(y_ptr.dtype.element_ty), mask=mask)  # the bug: + x2
    tl.store(y_ptr + row + half + d, (x2 * c2 - x1 * s2).to(y_ptr.dtype.element_ty), mask=mask)  # and - x1


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, h, s, d = x.shape
        y = torch.empty_like(x)
        _rope_kernel[(s, b * h)](x, cos.contiguous(), sin.contiguous(), y, s, d // 2,
                                 BLOCK_H=triton.next_power_of_2(d // 2))
        return y
