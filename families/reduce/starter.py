# kernelsearch-space: {"BLOCK": 2048, "ROWS": 1, "SPLIT": 16, "cache_hints": false, "num_stages": 3, "num_warps": 8, "variant": "chunked"}
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _sum_chunked_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    # A ROWS x BLOCK tile slides along the rows adding into an fp32 accumulator; one tree reduction at the
    # end. x is read once; the loop's loads are pipelined num_stages deep.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows[:, None] < n_rows
    base = x_ptr + rows.to(tl.int64)[:, None] * x_stride
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in tl.range(0, n_cols, BLOCK, num_stages=3):
        cols = start + offs
        acc += tl.load(base + cols[None, :], mask=row_ok & (cols[None, :] < n_cols), other=0.0).to(tl.float32)
    tl.store(y_ptr + rows, tl.sum(acc, axis=1).to(y_ptr.dtype.element_ty), mask=rows < n_rows)


def _launch(x, y, n_rows, n_cols):
    _sum_chunked_kernel[(triton.cdiv(n_rows, 1),)](x, y, n_rows, n_cols, x.stride(0), BLOCK=2048,
                                                       ROWS=1, num_warps=8)


def sum_last_dim(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"sum kernel: unsupported dtype {x.dtype}")
    if x.dim() == 0:
        raise ValueError("sum kernel: a 0-d tensor has no last dimension")
    shape = x.shape
    n_cols = shape[-1]
    n_rows = math.prod(shape[:-1])
    y = torch.empty(n_rows, dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        x2 = x.reshape(n_rows, n_cols)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        _launch(x2, y, n_rows, n_cols)
    elif n_rows:
        y.zero_()  # the sum over an empty dimension
    return y.reshape(shape[:-1])


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_last_dim(x)
