"""WRONG: ignore_index is not checked; the target is clamped into range and scored like any other.

Right when no target is ignored; with padding every ignored row adds the loss of class 0 and is counted.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _ce_row_kernel(x_ptr, t_ptr, loss_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + tl.cast(row, tl.int64) * stride
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    t = tl.load(t_ptr + row)
    t = tl.minimum(tl.maximum(t, 0), n_cols - 1)  # the bug: -100 becomes class 0
    tl.store(loss_ptr + row, lse - tl.load(x_row + t).to(tl.float32))


@triton.jit
def _mean_kernel(loss_ptr, out_ptr, n_rows, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    total = tl.sum(tl.load(loss_ptr + rows, mask=rows < n_rows, other=0.0), axis=0)
    tl.store(out_ptr, (total / n_rows).to(out_ptr.dtype.element_ty))


class ModelNew(torch.nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = logits.shape
        loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        out = torch.empty((), dtype=logits.dtype, device=logits.device)
        _ce_row_kernel[(n_rows,)](logits, targets, loss, n_cols, logits.stride(0),
                                  BLOCK=triton.next_power_of_2(n_cols))
        _mean_kernel[(1,)](loss, out, n_rows, BLOCK=triton.next_power_of_2(n_rows))
        return out
