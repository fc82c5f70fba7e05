# kernelsearch-space: {"BLOCK": 2048, "ROWS": 1, "SPLIT": 4, "cache_hints": false, "exp2": true, "num_stages": 1, "num_warps": 32, "persistent": false, "programs_per_sm": 1, "stats": "lane", "variant": "pipelined"}
import os

import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # jit code may only read constexpr globals


@triton.jit
def _softmax_pipelined_kernel(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    # Persistent, each program's rows whole in registers in turn, software-pipelined by one row: the next
    # row's loads are issued (in x's own dtype, half the registers of fp32 for bf16) before this row's max,
    # exponentials, sum and store, so they are in flight while this row is reduced. With one 1024-thread
    # program per SM (all a 64 KB row in registers allows) the `single` variant's loads stop at every row's
    # reductions; here a row's reductions overlap the next row's 64 KB on its way.
    cols = tl.arange(0, BLOCK)
    cmask = cols < n_cols
    step = tl.num_programs(0)
    first = tl.program_id(0)
    nxt = tl.load(x_ptr + tl.cast(first, tl.int64) * x_stride + cols, mask=cmask & (first < n_rows),
                  other=float("-inf"))
    for row in range(first, n_rows, step):
        x = nxt.to(tl.float32)
        after = row + step
        nxt = tl.load(x_ptr + tl.cast(after, tl.int64) * x_stride + cols, mask=cmask & (after < n_rows),
                      other=float("-inf"))
        m = tl.max(x, axis=0)
        e = tl.exp2((x - m) * LOG2E)
        e = tl.where(cmask, e, 0.0)
        y = e * (1.0 / tl.sum(e, axis=0))
        tl.store(y_ptr + tl.cast(row, tl.int64) * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=cmask)


def _launch(x, y, n_rows, n_cols):
    block = max(triton.next_power_of_2(n_cols), 16)
    if block > 32768:   # two rows' worth of registers a program: past 32K columns it spills
        raise ValueError(f"softmax pipelined: a row of {n_cols} and the next one do not fit in one program's "
                         f"registers; use the coop or online variant")
    grid = (min(n_rows, _num_programs(x)),)
    _softmax_pipelined_kernel[grid](x, y, n_rows, n_cols, x.stride(0), y.stride(0), BLOCK=block,
                                    num_warps=32)


_SMS = {}


def _num_programs(x):
    # persistent grids: a few programs per SM (the interpreter has no SMs; 4 keeps it quick)
    if x.device.type != "cuda":
        return 4
    idx = x.device.index or 0
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * 1


def softmax(x: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"softmax kernel: unsupported dtype {x.dtype}")
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows, n_cols = x2.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        _launch(x2, y, n_rows, n_cols)
    return y.reshape(shape)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x)
