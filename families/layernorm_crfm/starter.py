# kernelsearch-space: {"APPLY_ROWS": 16, "BLOCK": 2048, "PART": 32768, "ROWS": 2, "SPLIT_CHUNK": 16384, "cache_hints": true, "num_stages": 2, "num_warps": 8, "persistent": false, "programs_per_sm": 4, "variant": "split"}
import math
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_partial_kernel(x_ptr, part_ptr, n_cols, n_chunks, x_stride,
                              CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    # One program per (row, CHUNK-slice): (count, mean, M2) of the slice, BLOCK elements at a time, each block
    # reduced two-pass on registers and merged with Chan's formula. Reads the row once across programs.
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
    offs = tl.arange(0, BLOCK)
    lo = chunk * CHUNK
    hi = tl.minimum(lo + CHUNK, n_cols)
    n = 0.0
    mean = 0.0
    m2 = 0.0
    for start in tl.range(lo, hi, BLOCK, num_stages=2):
        cols = start + offs
        ok = cols < hi
        x = tl.load(x_row + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        c = tl.minimum(hi - start, BLOCK).to(tl.float32)
        bmean = tl.sum(x, axis=0) / c
        d = tl.where(ok, x - bmean, 0.0)
        bm2 = tl.sum(d * d, axis=0)
        n_new = n + c
        delta = bmean - mean
        mean += delta * (c / n_new)
        m2 += bm2 + delta * delta * (n * c / n_new)
        n = n_new
    out = part_ptr + (tl.cast(row, tl.int64) * n_chunks + chunk) * 3
    tl.store(out, n)
    tl.store(out + 1, mean)
    tl.store(out + 2, m2)


@triton.jit
def _layernorm_merge_kernel(part_ptr, stats_ptr, n_chunks, n_cols, eps, PBLOCK: tl.constexpr):
    # One program per row merges its slices' (count, mean, M2) with Chan's formula: mean and rstd.
    row = tl.program_id(0)
    base = part_ptr + tl.cast(row, tl.int64) * n_chunks * 3
    offs = tl.arange(0, PBLOCK)
    n = 0.0
    mean = 0.0
    m2 = 0.0
    for start in range(0, n_chunks, PBLOCK):
        idx = start + offs
        ok = idx < n_chunks
        pn = tl.load(base + idx * 3, mask=ok, other=0.0)
        pmean = tl.load(base + idx * 3 + 1, mask=ok, other=0.0)
        pm2 = tl.load(base + idx * 3 + 2, mask=ok, other=0.0)
        c = tl.sum(pn, axis=0)
        bmean = tl.sum(pn * pmean, axis=0) / c
        d = tl.where(ok, pmean - bmean, 0.0)
        bm2 = tl.sum(pm2 + pn * d * d, axis=0)
        n_new = n + c
        delta = bmean - mean
        mean += delta * (c / n_new)
        m2 += bm2 + delta * delta * (n * c / n_new)
        n = n_new
    tl.store(stats_ptr + row * 2, mean)
    tl.store(stats_ptr + row * 2 + 1, tl.rsqrt(m2 / n_cols + eps))


@triton.jit
def _layernorm_apply_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stats_ptr, n_rows, n_cols, x_stride, y_stride,
                            BLOCK: tl.constexpr, APPLY_ROWS: tl.constexpr):
    # A column block of the weight and bias is loaded once and applied to APPLY_ROWS rows: the affine
    # parameters cross DRAM once per APPLY_ROWS rows; x is read (its second time) and y written once.
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < n_cols
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    row0 = tl.program_id(1) * APPLY_ROWS
    for r in range(row0, tl.minimum(row0 + APPLY_ROWS, n_rows)):
        mean = tl.load(stats_ptr + r * 2)
        rstd = tl.load(stats_ptr + r * 2 + 1)
        r64 = tl.cast(r, tl.int64)
        x = tl.load(x_ptr + r64 * x_stride + cols, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        tl.store(y_ptr + r64 * y_stride + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)


def _launch(x, w, b, y, n_rows, n_cols, eps):
    chunk = max(min(16384, triton.next_power_of_2(n_cols)), 2048)
    n_chunks = triton.cdiv(n_cols, chunk)
    part = torch.empty((n_rows, n_chunks, 3), dtype=torch.float32, device=x.device)
    stats = torch.empty((n_rows, 2), dtype=torch.float32, device=x.device)
    _layernorm_partial_kernel[(n_rows, n_chunks)](x, part, n_cols, n_chunks, x.stride(0), CHUNK=chunk,
                                                  BLOCK=2048, num_warps=8)
    pblock = min(max(triton.next_power_of_2(n_chunks), 16), 1024)
    _layernorm_merge_kernel[(n_rows,)](part, stats, n_chunks, n_cols, eps, PBLOCK=pblock, num_warps=4)
    grid = (triton.cdiv(n_cols, 2048), triton.cdiv(n_rows, 16))
    _layernorm_apply_kernel[grid](x, w, b, y, stats, n_rows, n_cols, x.stride(0), y.stride(0),
                                  BLOCK=2048, APPLY_ROWS=16, num_warps=8)


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


class _Affine(torch.nn.Module):
    # holds the parameters under the reference's names (ln.weight, ln.bias)
    def __init__(self, shape):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(shape))
        self.bias = torch.nn.Parameter(torch.zeros(shape))


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = _Affine(tuple(normalized_shape))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.ln.weight, self.ln.bias, self.eps, self.ln.weight.dim())
