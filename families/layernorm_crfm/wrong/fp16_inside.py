"""WRONG: normalizes in fp16 for speed: x - mean, rstd and the weight are rounded to fp16 before scaling.

Statistics are fp32 and right; the output carries fp16's 3 to 4 significant digits (relative 5e-4), outside the
fp32 tolerance of the CRFM problem (about 1e-4 relative), which is the point of holding fp32 problems to fp32."""

import torch
import triton
import triton.language as tl


@triton.jit
def _stats_kernel(x_ptr, stats_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        acc += tl.load(x_ptr + row * n_cols + start + offs, mask=start + offs < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + offs, mask=start + offs < n_cols, other=0.0)
        d = tl.where(start + offs < n_cols, x - mean, 0.0)
        acc += d * d
    tl.store(stats_ptr + row * 2, mean)
    tl.store(stats_ptr + row * 2 + 1, tl.rsqrt(tl.sum(acc, axis=0) / n_cols + 1e-5))


@triton.jit
def _apply_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stats_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < n_cols
    mean = tl.load(stats_ptr + row * 2)
    rstd = tl.load(stats_ptr + row * 2 + 1)
    x = tl.load(x_ptr + row * n_cols + cols, mask=ok, other=0.0)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0)
    b = tl.load(b_ptr + cols, mask=ok, other=0.0)
    d = (x - mean).to(tl.float16)  # the bug: an fp16 intermediate
    y = (d * rstd.to(tl.float16) * w.to(tl.float16)).to(tl.float32) + b
    tl.store(y_ptr + row * n_cols + cols, y, mask=ok)


class _Affine(torch.nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(shape))
        self.bias = torch.nn.Parameter(torch.zeros(shape))


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = _Affine(tuple(normalized_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = self.ln.weight.numel()
        x2 = x.reshape(-1, n_cols).contiguous()
        y = torch.empty_like(x2)
        stats = torch.empty((x2.shape[0], 2), dtype=torch.float32, device=x.device)
        _stats_kernel[(x2.shape[0],)](x2, stats, n_cols, BLOCK=1024)
        w = self.ln.weight.reshape(-1).contiguous()
        b = self.ln.bias.reshape(-1).contiguous()
        if w.numel() != n_cols:  # the affine shape follows the normalized shape the kernel used
            w = w.reshape(-1, n_cols)[0].contiguous()
            b = b.reshape(-1, n_cols)[0].contiguous()
        _apply_kernel[(triton.cdiv(n_cols, 1024), x2.shape[0])](x2, w, b, y, stats, n_cols, BLOCK=1024)
        return y.reshape(x.shape)
