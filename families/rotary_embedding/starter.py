# kernelsearch-space: {"BLOCK_S": 8, "HEADS": 4, "cache_hints": false, "num_stages": 2, "num_warps": 4, "variant": "permuted"}
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_permuted_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, seq, half, bh_stride, s_stride, cs_stride,
                          BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    # Whole rows: x and its rotated partner (index i +- half, sign -1 on the first half); the partner load
    # touches the same cache lines as the first, so it is served by L1, and the store is one contiguous row.
    s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    d = tl.arange(0, BLOCK_D)
    first = d < half
    partner = tl.where(first, d + half, d - half)
    mask = (s[:, None] < seq) & (d[None, :] < 2 * half)
    cs_off = s[:, None] * cs_stride + d[None, :]
    c = tl.load(cos_ptr + cs_off, mask=mask, other=0.0).to(tl.float32)
    sn = tl.load(sin_ptr + cs_off, mask=mask, other=0.0).to(tl.float32)
    sn = tl.where(first[None, :], -sn, sn)
    row = tl.program_id(1).to(tl.int64) * bh_stride + s[:, None].to(tl.int64) * s_stride
    x = tl.load(x_ptr + row + d[None, :], mask=mask, other=0.0).to(tl.float32)
    xp = tl.load(x_ptr + row + partner[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row + d[None, :], (x * c + xp * sn).to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, cos, sin, y, bh, seq, half):
    grid = (triton.cdiv(seq, 8), bh)
    _rope_permuted_kernel[grid](x, cos, sin, y, seq, half, x.stride(1), x.stride(2), cos.stride(0),
                                BLOCK_S=8, BLOCK_D=triton.next_power_of_2(2 * half),
                                num_warps=4)


def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """NeoX-style rotary embedding of x (batch, heads, seq, head_dim) with cos, sin of (seq, head_dim)."""
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"rotary kernel: unsupported dtype {x.dtype}")
    if x.dim() != 4 or x.shape[-1] % 2:
        raise ValueError(f"rotary kernel: x of shape {tuple(x.shape)}; expected (batch, heads, seq, even dim)")
    batch, heads, seq, dim = x.shape
    if cos.numel() != seq * dim or sin.numel() != seq * dim:
        raise ValueError(f"rotary kernel: cos {tuple(cos.shape)}, sin {tuple(sin.shape)} for seq {seq}, dim {dim}")
    cos = cos.reshape(seq, dim).contiguous()
    sin = sin.reshape(seq, dim).contiguous()
    if not x.is_contiguous():
        x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        _launch(x, cos, sin, y, batch * heads, seq, dim // 2)
    return y


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return rotary_embedding(x, cos, sin)
