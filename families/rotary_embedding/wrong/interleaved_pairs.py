"""WRONG: GPT-J style rotation of adjacent pairs (2i, 2i+1) instead of NeoX halves (i, i + head_dim/2).

Both are "rotary embeddings" and both keep norms; they agree only where the angle is zero. Using the
interleaved form on a model trained with halves (Llama, NeoX) silently scrambles positions.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, seq, half, BLOCK_H: tl.constexpr):
    s = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    i = tl.arange(0, BLOCK_H)
    mask = i < half
    row = (bh * seq + s) * 2 * half
    xe = tl.load(x_ptr + row + 2 * i, mask=mask, other=0.0).to(tl.float32)
    xo = tl.load(x_ptr + row + 2 * i + 1, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + s * 2 * half + i, mask=mask, other=0.0).to(tl.float32)
    sn = tl.load(sin_ptr + s * 2 * half + i, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + 2 * i, (xe * c - xo * sn).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + row + 2 * i + 1, (xo * c + xe * sn).to(y_ptr.dtype.element_ty), mask=mask)


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
