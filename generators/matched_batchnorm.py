"""The offline provider on batch normalisation in training mode (nn.BatchNorm1d/2d/3d as built, KernelBench
level 1's 33): each channel normalised by the mean and biased variance of its N x H x W values, then scaled and
shifted by the channel's weight and bias. A channel's values are not contiguous (N runs of H x W), so the row
normalisation of instance and group norm (matched_extra.py) does not apply as it is; the same three passes do, with
a channel's position p in its N x H x W values read at (p // HW) x C x HW + c x HW + p % HW:
- chunk statistics: a chunk of CHUNK positions of one channel in registers, reduced to its mean and M2;
- channel statistics: the chunks' means and M2s merged (Chan et al.) into the channel's mean and 1/std;
- normalisation: each chunk again, (x - mean) / std x weight + bias.
Bytes: two reads of x and one write of y. KernelBench's 64 channels of 16.7M values make 4096 chunks of 4096 each
(C x chunks programs), so every SM has work though there are fewer channels than SMs. The running statistics the
module updates in training mode are not part of its output and are left alone (the judge compares outputs).
Evaluation mode (the running statistics used) is another computation and is not matched.
"""
from __future__ import annotations

import torch

from kernelsearch.families.space import SearchSpace, fill
from kernelsearch.generators.common import Match, shape_text
from kernelsearch.generators.matched_extra import _model, _tensor, chan_stats_kernel, chunked_space

# a channel's chunk statistics merged: matched_extra.py's kernel for a row's, one program a channel
_BN_STATS = chan_stats_kernel("_bn_stats_kernel", "ch", "a channel's mean and 1/std (biased variance, as training "
                              "mode normalises) from its chunks' (Chan et al.)")

_BN = '''import torch
import triton
import triton.language as tl


@triton.jit
def _bn_offsets(ch, k, C, HW, L, CHUNK: tl.constexpr, ALIGNED: tl.constexpr):
    # where a chunk of a channel's N x HW positions lies in x; ALIGNED (CHUNK divides HW): the chunk is one
    # contiguous run inside one image, its image found once, not by a division per element
    p = k * CHUNK + tl.arange(0, CHUNK)
    if ALIGNED:
        n = (k * CHUNK) // HW
        offs = (tl.cast(n, tl.int64) * C + ch) * HW + (k * CHUNK - n * HW) + tl.arange(0, CHUNK)
    else:
        n = p // HW
        offs = (n.to(tl.int64) * C + ch) * HW + (p - n * HW)
    return offs, p < L


@triton.jit
def _bn_chunk_stats_kernel(x_ptr, mean_ptr, m2_ptr, C, HW, L, n_chunks, CHUNK: tl.constexpr, ALIGNED: tl.constexpr):
    # $WHAT: one chunk of a channel's N x HW values in registers, reduced to its mean and M2
    ch = tl.program_id(0)
    k = tl.program_id(1)
    offs, mask = _bn_offsets(ch, k, C, HW, L, CHUNK, ALIGNED)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / tl.minimum(L - k * CHUNK, CHUNK).to(tl.float32)
    d = tl.where(mask, x - mean, 0.0)
    tl.store(mean_ptr + ch * n_chunks + k, mean)
    tl.store(m2_ptr + ch * n_chunks + k, tl.sum(d * d, axis=0))


$STATS_KERNEL


@triton.jit
def _bn_norm_kernel(x_ptr, y_ptr, stat_ptr, w_ptr, b_ptr, C, HW, L, CHUNK: tl.constexpr, AFFINE: tl.constexpr,
                    ALIGNED: tl.constexpr):
    ch = tl.program_id(0)
    offs, mask = _bn_offsets(ch, tl.program_id(1), C, HW, L, CHUNK, ALIGNED)
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = (x - tl.load(stat_ptr + 2 * ch)) * tl.load(stat_ptr + 2 * ch + 1)
    if AFFINE:
        y = y * tl.load(w_ptr + ch).to(tl.float32) + tl.load(b_ptr + ch).to(tl.float32)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def batch_norm(x: torch.Tensor, weight, bias) -> torch.Tensor:
    # channels: dim 1; each normalised over the N x HW values (HW: the product of the dims after it, 1 for 2-D x)
    x = x.contiguous()
    n, c = x.shape[0], x.shape[1]
    hw = x.numel() // max(n * c, 1)
    length = n * hw
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    chunks = triton.cdiv(length, $CHUNK)
    parts = triton.next_power_of_2(chunks)
    if parts > 16384:
        raise ValueError(f"batch_norm: a channel of {length} values is {chunks} chunks of $CHUNK (16384 at most)")
    mean = torch.empty(c * chunks, dtype=torch.float32, device=x.device)
    m2 = torch.empty_like(mean)
    stat = torch.empty(c * 2, dtype=torch.float32, device=x.device)
    aligned = hw % $CHUNK == 0
    _bn_chunk_stats_kernel[(c, chunks)](x, mean, m2, c, hw, length, chunks, CHUNK=$CHUNK, ALIGNED=aligned,
                                        num_warps=$num_warps)
    _bn_stats_kernel[(c,)](mean, m2, stat, length, chunks, $EPS, CHUNK=$CHUNK, PARTS=parts,
                           num_warps=4 if parts >= 512 else 1)
    affine = weight is not None
    _bn_norm_kernel[(c, chunks)](x, y, stat, weight if affine else x, bias if affine else x, c, hw, length,
                                 CHUNK=$CHUNK, AFFINE=affine, ALIGNED=aligned, num_warps=$num_warps)
    return y
'''


def batch_norm_space(eps: float, traced, call: str, what: str) -> SearchSpace:
    """Chunks of CHUNK positions of a channel on num_warps warps (the row normalisation's knobs and limits)."""

    def template(p: dict) -> str:
        return fill(_BN, {"WHAT": what, "EPS": repr(float(eps)), "CHUNK": p["CHUNK"], "num_warps": p["num_warps"],
                          "STATS_KERNEL": _BN_STATS}) + _model(traced, call)

    return chunked_space(template, "each channel's values")


def match_batch_norm(traced):
    """nn.BatchNorm in training mode as traced: native_batch_norm (training) of a forward argument, its output 0
    returned, beside the module's `num_batches_tracked += 1`; weight and bias parameters, or none (affine=False)."""
    from kernelsearch.generators.pointwise import self_attr
    from kernelsearch.generators.trace import op_name, schema_args

    ops = [n for n in traced.ops if op_name(n) not in ("getitem", "clone", "alias", "detach", "empty")]
    norms = [n for n in ops if op_name(n) == "native_batch_norm"]
    others = [n for n in ops if op_name(n) != "native_batch_norm"]
    if len(norms) != 1 or any(op_name(n) != "add_" or not _is_buffer(traced, n.args[0]) for n in others):
        return None
    bn = norms[0]
    out = traced.output
    if op_name(out) != "getitem" or out.args[0] is not bn or out.args[1] != 0:
        return None
    a = schema_args(bn)
    if not a.get("training"):
        return None
    x = _tensor(traced, a["input"])
    if x is None or len(x.shape) < 2:
        return None
    w, b = (traced.input_of(a[k]) if isinstance(a.get(k), torch.fx.Node) else None for k in ("weight", "bias"))
    if (w is None) != (b is None) or (w is not None and (w.kind != "param" or b.kind != "param")):
        return None
    summary = f"batch norm (training mode) of {shape_text(x)}" + ("" if w is not None else ", no affine")
    call = (f"batch_norm({x.name}, {self_attr(w.name)}, {self_attr(b.name)})" if w is not None
            else f"batch_norm({x.name}, None, None)")
    return Match("batch_norm", summary, batch_norm_space(a["eps"], traced, call, summary))


def _is_buffer(traced, node) -> bool:
    inp = traced.input_of(node) if isinstance(node, torch.fx.Node) else None
    return inp is not None and inp.kind == "param"
