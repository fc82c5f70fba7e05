# kernelsearch-space: {"BLOCK": 2048, "ROWS": 1, "cache_hints": true, "num_stages": 2, "num_warps": 8, "persistent": false, "programs_per_sm": 4, "variant": "single"}
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                         BLOCK: tl.constexpr, ROWS: tl.constexpr, PERSISTENT: tl.constexpr):
    # ROWS rows per step, each whole in registers: x is read once and y written once (2 * n_cols * size
    # bytes a row); the weight is loaded once per program and reused for every row it handles.
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    n_groups = tl.cdiv(n_rows, ROWS)
    step = tl.num_programs(0) if PERSISTENT else n_groups
    for g in range(tl.program_id(0), n_groups, step):
        rows = g * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < n_rows) & col_ok[None, :]
        rows64 = rows.to(tl.int64)
        x = tl.load(x_ptr + rows64[:, None] * x_stride + cols[None, :], mask=mask, other=0.0, eviction_policy="evict_first")
        x = x.to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + rows64[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, w, y, n_rows, n_cols, eps):
    block = max(triton.next_power_of_2(n_cols), 16)
    rows = 1
    if block * rows > 65536:
        raise ValueError(f"rmsnorm: {rows} rows of {n_cols} do not fit in one program's registers; use fewer "
                         f"rows per program or the chunked variant")
    groups = triton.cdiv(n_rows, rows)
    grid = (min(groups, _num_programs(x)),) if False else (groups,)
    _rmsnorm_rows_kernel[grid](x, w, y, n_rows, n_cols, x.stride(0), y.stride(0), eps,
                               BLOCK=block, ROWS=rows, PERSISTENT=False,
                               num_warps=8, num_stages=2)


_SMS = {}


def _num_programs(x):
    # persistent grids: a few programs per SM (the interpreter has no SMs; 4 keeps it quick)
    if x.device.type != "cuda":
        return 4
    idx = x.device.index or 0
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * 4


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"rmsnorm kernel: unsupported dtype {x.dtype}")
    if weight.shape != (x.shape[-1],):
        raise ValueError(f"rmsnorm kernel: weight of shape {tuple(weight.shape)} for rows of {x.shape[-1]}")
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows, n_cols = x2.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows and n_cols:
        _launch(x2, weight.contiguous(), y, n_rows, n_cols, eps)
    return y.reshape(shape)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)
