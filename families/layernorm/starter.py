# kernelsearch-space: {"APPLY_ROWS": 16, "BLOCK": 2048, "PART": 32768, "ROWS": 2, "SPLIT_CHUNK": 65536, "cache_hints": true, "num_stages": 2, "num_warps": 8, "persistent": false, "programs_per_sm": 4, "variant": "single"}
import math
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                           BLOCK: tl.constexpr, ROWS: tl.constexpr, PERSISTENT: tl.constexpr):
    # ROWS rows per step, each whole in registers: x read once, y written once (2 * n_cols * size bytes a
    # row); weight and bias loaded once per program. The variance is taken of x - mean, on registers.
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    n_groups = tl.cdiv(n_rows, ROWS)
    step = tl.num_programs(0) if PERSISTENT else n_groups
    for g in range(tl.program_id(0), n_groups, step):
        rows = g * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < n_rows) & col_ok[None, :]
        rows64 = rows.to(tl.int64)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first")
        x = x.to(tl.float32)
        mean = tl.sum(x, axis=1) / n_cols
        d = tl.where(mask, x - mean[:, None], 0.0)
        rstd = tl.rsqrt(tl.sum(d * d, axis=1) / n_cols + eps)
        y = d * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_ptr + rows64[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, w, b, y, n_rows, n_cols, eps):
    block = max(triton.next_power_of_2(n_cols), 16)
    rows = 2
    if block * rows > 65536:
        raise ValueError(f"layernorm: {rows} rows of {n_cols} do not fit in one program's registers; use fewer "
                         f"rows per program or a chunked variant")
    warps = 8
    while warps < 32 and block * rows > 64 * 32 * warps:   # rows far wider than the warps were picked for (the
        warps *= 2                                         # 16384-wide correctness case): 64 values a thread
    groups = triton.cdiv(n_rows, rows)
    grid = (min(groups, _num_programs(x)),) if False else (groups,)
    _layernorm_rows_kernel[grid](x, w, b, y, n_rows, n_cols, x.stride(0), y.stride(0), eps,
                                 BLOCK=block, ROWS=rows, PERSISTENT=False,
                                 num_warps=warps, num_stages=2)


_SMS = {}


def _num_programs(x):
    # persistent grids: a few programs per SM (the interpreter has no SMs; 4 keeps it quick)
    if x.device.type != "cuda":
        return 4
    idx = x.device.index or 0
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * 4


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float, n_dims: int = 1):
    """LayerNorm over the last `n_dims` dimensions of x, with an elementwise weight and bias of that shape."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"layernorm kernel: unsupported dtype {x.dtype}")
    shape = x.shape
    norm_shape = tuple(shape[len(shape) - n_dims:])
    if tuple(weight.shape) != norm_shape or tuple(bias.shape) != norm_shape:
        raise ValueError(f"layernorm kernel: weight {tuple(weight.shape)} and bias {tuple(bias.shape)} "
                         f"for normalized shape {norm_shape}")
    n_cols = math.prod(norm_shape)
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows = x2.shape[0]
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        _launch(x2, weight.reshape(-1).contiguous(), bias.reshape(-1).contiguous(), y, n_rows, n_cols, eps)
    return y.reshape(shape)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=getattr(torch, dtype)))
        self.bias = torch.nn.Parameter(torch.zeros(hidden_size, dtype=getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)
