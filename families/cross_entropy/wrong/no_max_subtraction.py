"""WRONG: log(sum(exp(x))) without subtracting the row max first.

Mathematically the same; in fp32 exp() overflows to inf once a logit passes about 88, which the spec's
`large-logits` case reaches, and the loss becomes inf. Every ordinary case passes.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _ce_row_kernel(x_ptr, t_ptr, loss_ptr, n_cols, stride, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
    lse = tl.log(tl.sum(tl.exp(x), axis=0))  # the bug: no max subtracted
    t = tl.load(t_ptr + row)
    valid = t != ignore_index
    x_t = tl.load(x_row + t, mask=valid & (t >= 0) & (t < n_cols), other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - x_t, 0.0))


@triton.jit
def _mean_kernel(loss_ptr, t_ptr, out_ptr, n_rows, ignore_index, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    ok = rows < n_rows
    total = tl.sum(tl.load(loss_ptr + rows, mask=ok, other=0.0), axis=0)
    t = tl.load(t_ptr + rows, mask=ok, other=ignore_index)
    count = tl.sum(tl.where(ok & (t != ignore_index), 1.0, 0.0), axis=0)
    tl.store(out_ptr, (total / count).to(out_ptr.dtype.element_ty))


class ModelNew(torch.nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = logits.shape
        loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        out = torch.empty((), dtype=logits.dtype, device=logits.device)
        _ce_row_kernel[(n_rows,)](logits, targets, loss, n_cols, logits.stride(0), self.ignore_index,
                                  BLOCK=triton.next_power_of_2(n_cols))
        _mean_kernel[(1,)](loss, targets, out, n_rows, self.ignore_index, BLOCK=triton.next_power_of_2(n_rows))
        return out
