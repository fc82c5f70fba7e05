"""WRONG: ignored targets add no loss, but the mean divides by every row instead of the rows kept.

Right when no target is ignored; with padding the loss comes out too small by the fraction ignored.
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
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    t = tl.load(t_ptr + row)
    valid = t != ignore_index
    x_t = tl.load(x_row + t, mask=valid & (t >= 0) & (t < n_cols), other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - x_t, 0.0))


@triton.jit
def _mean_kernel(loss_ptr, out_ptr, n_rows, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    total = tl.sum(tl.load(loss_ptr + rows, mask=rows < n_rows, other=0.0), axis=0)
    tl.store(out_ptr, (total / n_rows).to(out_ptr.dtype.element_ty))  # the bug: n_rows, not rows kept


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
        _mean_kernel[(1,)](loss, out, n_rows, BLOCK=triton.next_power_of_2(n_rows))
        return out
