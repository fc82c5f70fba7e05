"""A generated kernel family: convolution, 1-D, 2-D and 3-D, strided, padded, dilated, grouped (depthwise
included) and transposed (nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d, F.conv*), with its bias, as Triton kernels
that accumulate in fp32.

Every form is one kernel read as 3-D: the input as (N, C, D, H, W) with size-1 leading spatial dims for the 1-D and
2-D forms (Triton specialises a size of 1, so their index math folds away). Two variants:
- `igemm`, an implicit GEMM per group: M = N x the output's pixels, N = the group's output channels, K = the group's
  input channels x the kernel's taps. A program holds a BLOCK_M x BLOCK_N tile of outputs in fp32 and walks K in
  BLOCK_K steps, gathering the input tile (the taps that fall in the padding, or for a transposed convolution
  between strides, masked to 0) and loading the weight tile, and multiplies them with `tl.dot` (fp32 operands:
  `ieee` fp32 FMAs as cuDNN computes with TF32 off, or `tf32x3`, three TF32 products on the tensor cores).
  Bytes: each input element is read once per output tile of channels it feeds (OC / BLOCK_N times, mostly from
  L2), the weight once per pixel tile, the output written once.
- `direct`, for few output channels a group (depthwise: one): a program computes BLOCK output pixels of one
  (batch, output channel), summing its group's input channels x taps with the weight as scalars; no tile of
  channels is wasted on a group of one.
A transposed convolution is the same sum read backwards: output o takes input i = (o + P - k L) / S where that is a
whole number in range, weights laid out (C, OC / G, taps).

The convolution's arguments are the candidate's own module's (stride, padding, dilation, groups, output_padding
read from its nn.ConvNd when forward runs), so a case that builds the model with another stride convolves with that
one; a functional call has the traced values baked in. The space: the variant, its tiles, warps and stages, the
fp32 product's precision, and whether the taps are unrolled.
"""
from __future__ import annotations

import math

from kernelsearch.families.space import Move, SearchSpace, fill
from kernelsearch.judge.problem import Case

_TEMPLATE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _tap(o, k, S: tl.constexpr, P: tl.constexpr, L: tl.constexpr, I, TRANSPOSED: tl.constexpr):
    # the input index that output index o reads at tap k along one dim, and whether it is inside the input
    if TRANSPOSED:   # o = i * S - P + k * L, read backwards: i is whole only where S divides o + P - k * L
        t = o + P - k * L
        i = tl.where(t >= 0, t, 0) // S
        ok = (t >= 0) & (t - i * S == 0) & (i < I)
    else:
        i = o * S - P + k * L
        ok = (i >= 0) & (i < I)
    return i, ok


@triton.jit
def _conv_igemm(x_ptr, w_ptr, b_ptr, y_ptr, M, C, CG, OCG, ID, IH, IW, OD, OH, OW,
                KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
                SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, LD: tl.constexpr,
                LH: tl.constexpr, LW: tl.constexpr, TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                IDX64: tl.constexpr, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):
    # $WHAT
    pid_m = tl.program_id(0)
    g = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)   # output pixels, flattened (n, od, oh, ow)
    if IDX64:   # past 2**31 elements an offset needs 64 bits
        offs_m = offs_m.to(tl.int64)
    m_ok = offs_m < M
    ow = offs_m % OW
    t = offs_m // OW
    oh = t % OH
    t = t // OH
    od = t % OD
    n = t // OD
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)   # output channels of group g
    n_ok = offs_n < OCG
    oc = g * OCG + offs_n
    KK: tl.constexpr = KD * KH * KW
    K = CG * KK
    plane = ID * IH * IW
    x_base = (n * C + g * CG) * plane
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)   # (input channel of the group, kd, kh, kw), flattened
        k_ok = offs_k < K
        kk = offs_k % KK
        c = offs_k // KK
        kw = kk % KW
        kh = (kk // KW) % KH
        kd = kk // (KW * KH)
        d, d_ok = _tap(od[:, None], kd[None, :], SD, PD, LD, ID, TRANSPOSED)
        h, h_ok = _tap(oh[:, None], kh[None, :], SH, PH, LH, IH, TRANSPOSED)
        w, w_ok = _tap(ow[:, None], kw[None, :], SW, PW, LW, IW, TRANSPOSED)
        ok = m_ok[:, None] & k_ok[None, :] & d_ok & h_ok & w_ok
        a = tl.load(x_ptr + x_base[:, None] + c[None, :] * plane + (d * IH + h) * IW + w, mask=ok, other=0.0)
        if TRANSPOSED:   # weight (C, OCG, KD, KH, KW)
            w_off = (g * CG + c[:, None]) * (OCG * KK) + offs_n[None, :] * KK + kk[:, None]
        else:            # weight (OC, CG, KD, KH, KW): a row of K contiguous values per output channel
            w_off = oc[None, :] * K + offs_k[:, None]
        b = tl.load(w_ptr + w_off, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(b_ptr + oc, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    OC = OCG * tl.num_programs(2)
    y_off = (n[:, None] * OC + oc[None, :]) * (OD * OH * OW) + ((od * OH + oh) * OW + ow)[:, None]
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def _conv_direct(x_ptr, w_ptr, b_ptr, y_ptr, C, CG, OCG, OC, ID, IH, IW, OD, OH, OW,
                 KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
                 SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, LD: tl.constexpr,
                 LH: tl.constexpr, LW: tl.constexpr, TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                 IDX64: tl.constexpr, BLOCK: tl.constexpr):
    # $WHAT
    pid = tl.program_id(0)
    nc = tl.program_id(1)   # (batch, output channel)
    if IDX64:
        nc = nc.to(tl.int64)
    n = nc // OC
    oc = nc % OC
    g = oc // OCG
    j = oc % OCG
    offs = pid * BLOCK + tl.arange(0, BLOCK)   # output pixels of this (batch, channel)
    ok = offs < OD * OH * OW
    ow = offs % OW
    oh = (offs // OW) % OH
    od = offs // (OW * OH)
    KK: tl.constexpr = KD * KH * KW
    plane = ID * IH * IW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for ci in range(CG):
        x_base = (n * C + g * CG + ci) * plane
        if TRANSPOSED:
            w_base = ((g * CG + ci) * OCG + j) * KK
        else:
            w_base = (oc * CG + ci) * KK
        for kd in $LOOP(KD):
            d, d_ok = _tap(od, kd, SD, PD, LD, ID, TRANSPOSED)
            for kh in $LOOP(KH):
                h, h_ok = _tap(oh, kh, SH, PH, LH, IH, TRANSPOSED)
                for kw in tl.static_range(KW):
                    w, w_ok = _tap(ow, kw, SW, PW, LW, IW, TRANSPOSED)
                    v = tl.load(x_ptr + x_base + (d * IH + h) * IW + w, mask=ok & d_ok & h_ok & w_ok, other=0.0)
                    wt = tl.load(w_ptr + w_base + (kd * KH + kh) * KW + kw)
                    acc += v.to(tl.float32) * wt.to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + oc).to(tl.float32)
    tl.store(y_ptr + nc * (OD * OH * OW) + offs, acc.to(y_ptr.dtype.element_ty), mask=ok)


def _tuple(v, n):
    return tuple(int(e) for e in v) if isinstance(v, (tuple, list)) else (int(v),) * n


def _conv_params(module):
    # an nn.ConvNd's or nn.ConvTransposeNd's arguments, read when forward runs (the candidate's own constructor's)
    n = module.weight.dim() - 2
    padding = module.padding
    if isinstance(padding, str):
        if padding != "valid":
            raise ValueError(f"padding={padding!r} is not supported by this kernel")
        padding = 0
    transposed = bool(getattr(module, "transposed", False))
    return (_tuple(module.stride, n), _tuple(padding, n), _tuple(module.dilation, n), int(module.groups),
            transposed, _tuple(getattr(module, "output_padding", 0), n))


def conv(x, weight, bias, params):
    stride, padding, dilation, groups, transposed, output_padding = params
    n = len(stride)
    if x.dim() != n + 2 or weight.dim() != n + 2:
        raise ValueError(f"a {n}-D convolution takes a {n + 2}-D input and weight, not {x.dim()}-D and "
                         f"{weight.dim()}-D")
    x = x.contiguous()
    weight = weight.contiguous()
    N, C = x.shape[:2]
    ins, ks = tuple(x.shape[2:]), tuple(weight.shape[2:])
    if transposed:
        OC = weight.shape[1] * groups
        outs = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                     for i, s, p, d, k, op in zip(ins, stride, padding, dilation, ks, output_padding))
    else:
        OC = weight.shape[0]
        outs = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1
                     for i, s, p, d, k in zip(ins, stride, padding, dilation, ks))
    if C % groups or OC % groups:
        raise ValueError(f"{C} input and {OC} output channels do not split into {groups} groups")
    y = torch.empty((N, OC) + outs, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    pad = 3 - n   # the leading spatial dims the kernel takes as size 1
    ID, IH, IW = (1,) * pad + ins
    OD, OH, OW = (1,) * pad + outs
    (KD, KH, KW), (SD, SH, SW) = (1,) * pad + ks, (1,) * pad + stride
    (PD, PH, PW), (LD, LH, LW) = (0,) * pad + padding, (1,) * pad + dilation
    CG, OCG = C // groups, OC // groups
    idx64 = max(x.numel(), y.numel(), weight.numel()) + 4096 >= 2**31
    b = bias if bias is not None else weight
    geometry = (ID, IH, IW, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW, LD, LH, LW)
    $LAUNCH
    return y
'''

_IGEMM = '''
M = N * OD * OH * OW
grid = (triton.cdiv(M, $BLOCK_M), triton.cdiv(OCG, $BLOCK_N), groups)
_conv_igemm[grid](x, weight, b, y, M, C, CG, OCG, *geometry, TRANSPOSED=transposed, HAS_BIAS=bias is not None,
                  IDX64=idx64, PRECISION="$PRECISION" if x.dtype == torch.float32 else "tf32", BLOCK_M=$BLOCK_M,
                  BLOCK_N=$BLOCK_N, BLOCK_K=$BLOCK_K, num_warps=$num_warps, num_stages=$num_stages)
'''

_DIRECT = '''
grid = (triton.cdiv(OD * OH * OW, $BLOCK), N * OC)
_conv_direct[grid](x, weight, b, y, C, CG, OCG, OC, *geometry, TRANSPOSED=transposed, HAS_BIAS=bias is not None,
                   IDX64=idx64, BLOCK=$BLOCK, num_warps=$num_warps)
'''

_MODEL = '''
$HELPER

import math  # noqa: E402,F401 - what the reference's constructor may use
import torch.nn as nn  # noqa: E402,F401


class ModelNew(torch.nn.Module):
    $INIT_SOURCE

    def forward(self, $FORWARD):
        $BODY
'''

PARAMS = {"variant": ["igemm", "direct"],
          "BLOCK_M": [16, 32, 64, 128, 256],
          "BLOCK_N": [16, 32, 64, 128, 256],
          "BLOCK_K": [16, 32, 64, 128],
          "num_stages": [1, 2, 3, 4],
          "precision": ["ieee", "tf32x3"],
          "BLOCK": [64, 128, 256, 512, 1024],
          "num_warps": [1, 2, 4, 8],
          "UNROLL": ["taps", "row"]}

DEFAULT = {"variant": "igemm", "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 2, "precision": "ieee",
           "BLOCK": 256, "num_warps": 4, "UNROLL": "taps"}

MAX_ACC_PER_THREAD = 128     # fp32 accumulators a thread holds in the igemm tile (more spills on sm_90)
SMEM_BYTES = 200 * 1024      # what the stages of the igemm's operand tiles may take of sm_90's 227 KB
MAX_UNROLLED = 343           # taps unrolled whole at most (a 7x7x7 kernel)


class Conv:
    """One convolution as traced: its arguments at the problem's own case, and the shapes."""

    def __init__(self, dims, stride, padding, dilation, groups, transposed, output_padding, in_shape, w_shape,
                 out_shape, dtype, bias: bool):
        self.dims, self.stride, self.padding, self.dilation, self.groups = dims, stride, padding, dilation, groups
        self.transposed, self.output_padding = transposed, output_padding
        self.in_shape, self.w_shape, self.out_shape, self.dtype, self.bias = in_shape, w_shape, out_shape, dtype, bias

    @property
    def channels(self) -> tuple[int, int]:
        """(input channels, output channels) of one group."""
        c, oc = self.in_shape[1], self.out_shape[1]
        return c // self.groups, oc // self.groups

    @property
    def taps(self) -> int:
        return math.prod(self.w_shape[2:])

    def args(self) -> tuple:
        return (self.stride, self.padding, self.dilation, self.groups, self.transposed, self.output_padding)

    def describe(self) -> str:
        def one(v):
            return str(v[0]) if len(set(v)) == 1 else "x".join(map(str, v))

        cg, ocg = self.channels
        kind = "transposed convolution" if self.transposed else "convolution"
        parts = [f"kernel {one(self.w_shape[2:])}", f"stride {one(self.stride)}", f"padding {one(self.padding)}"]
        if any(d != 1 for d in self.dilation):
            parts.append(f"dilation {one(self.dilation)}")
        if self.groups > 1:
            parts.append("depthwise" if cg == 1 and ocg == 1 else f"groups {self.groups}")
        if self.transposed and any(self.output_padding):
            parts.append(f"output_padding {one(self.output_padding)}")
        if self.bias:
            parts.append("bias")
        return (f"{kind} {self.dims}-D of {'x'.join(map(str, self.in_shape))} "
                f"{str(self.dtype).removeprefix('torch.')} ({', '.join(parts)}) -> "
                f"{'x'.join(map(str, self.out_shape))}")


def render(cv: Conv, p: dict, init: str, forward: str, body: str, helper: str = "") -> str:
    if p["variant"] == "igemm":
        launch = fill(_IGEMM, {k: p[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")}
                      | {"PRECISION": p["precision"]})
        what = (f"{cv.describe()}; implicit GEMM, {p['BLOCK_M']} pixels x {p['BLOCK_N']} channels a program, K in "
                f"steps of {p['BLOCK_K']}, fp32 products {p['precision']}")
    else:
        launch = fill(_DIRECT, {"BLOCK": p["BLOCK"], "num_warps": p["num_warps"]})
        what = f"{cv.describe()}; direct, {p['BLOCK']} pixels of one channel a program"
    code = fill(_TEMPLATE, {"WHAT": what, "LAUNCH": launch, "LOOP": "tl.static_range" if p["UNROLL"] == "taps"
                            else "range"})
    return code + fill(_MODEL, {"INIT_SOURCE": init, "FORWARD": forward, "BODY": body,
                                "HELPER": "\n\n" + helper if helper else ""})


def start_point(cv: Conv) -> dict:
    """Where the search starts at this convolution's shape: `direct` for few output channels a group (depthwise),
    else an implicit GEMM whose channel tile covers the group's channels (up to 128), whose K step fits K, with
    3xTF32 products for fp32 where K is 32 or more."""
    cg, ocg = cv.channels
    p = dict(DEFAULT)
    if ocg < 8:
        p["variant"] = "direct"
        p["UNROLL"] = "taps" if cv.taps <= MAX_UNROLLED else "row"
        return p
    p["BLOCK_N"] = min(max(16, 1 << (ocg - 1).bit_length()), 128)
    p["BLOCK_K"] = 16 if cg * cv.taps <= 16 else 32
    pixels = math.prod(cv.out_shape) // max(cv.out_shape[1], 1)
    p["BLOCK_M"] = 128 if pixels >= 1 << 16 and p["BLOCK_N"] <= 64 else 64
    # fp32 with K long enough to fill the tensor cores: 3xTF32 products (near fp32 accuracy; fp32 FMAs top out at a
    # tenth of the TF32 rate on an H100, and the judge times eager with TF32 off). The matmul family starts fp32 there
    # too (families/matmul/space.py TF32X3_START); `ieee` is a move away
    if str(cv.dtype) == "torch.float32" and cg * cv.taps >= 32:
        p["precision"] = "tf32x3"
    return p


def conv_space(cv: Conv, init: str, forward: str, body: str, helper: str = "") -> SearchSpace:
    """The space of one convolution: `init` the candidate's constructor (setting self._conv where its arguments are
    baked), forward's parameters `forward`, the forward's `body` (its statements, calling `conv`), and `helper`
    (an epilogue's kernel) pasted before ModelNew."""
    cg, ocg = cv.channels
    elem = 2 if str(cv.dtype) in ("torch.float16", "torch.bfloat16") else 4

    def limits(p: dict, case) -> str | None:
        threads = 32 * p["num_warps"]
        if p["UNROLL"] == "taps" and cv.taps > MAX_UNROLLED and p["variant"] == "direct":
            return f"{cv.taps} taps unrolled whole (at most {MAX_UNROLLED})"
        if p["variant"] == "direct":
            if p["BLOCK"] < threads:
                return f"BLOCK {p['BLOCK']} leaves threads of {p['num_warps']} warps idle"
            if p["BLOCK"] // threads > 8:
                return f"{p['BLOCK'] // threads} outputs a thread (at most 8)"
            return None
        acc = p["BLOCK_M"] * p["BLOCK_N"] // threads
        if acc > MAX_ACC_PER_THREAD:
            return f"{acc} fp32 accumulators a thread (at most {MAX_ACC_PER_THREAD}: registers)"
        if p["BLOCK_M"] * p["BLOCK_N"] < 16 * threads:
            return f"a {p['BLOCK_M']}x{p['BLOCK_N']} tile leaves {p['num_warps']} warps idle"
        smem = p["num_stages"] * (p["BLOCK_M"] + p["BLOCK_N"]) * p["BLOCK_K"] * elem
        if smem > SMEM_BYTES:
            return f"{p['num_stages']} stages of operand tiles take {smem // 1024} KB of shared memory"
        if p["BLOCK_N"] > 16 and p["BLOCK_N"] >= 2 * ocg:
            return f"a tile of {p['BLOCK_N']} channels is over twice the group's {ocg}: most of it masked"
        if p["BLOCK_K"] > 16 and p["BLOCK_K"] >= 2 * cg * cv.taps:
            return f"a K step of {p['BLOCK_K']} is over twice K = {cg * cv.taps}"
        return None

    moves = [Move("implicit GEMM", "Compute the convolution as an implicit GEMM per group (pixels x output channels, "
                  "K = input channels x taps) with tl.dot on gathered input tiles.", {"variant": "igemm"}),
             Move("direct convolution", "Compute BLOCK output pixels of one output channel a program, summing the "
                  "group's input channels and taps with scalar weights (no channel tile wasted on few channels).",
                  {"variant": "direct"}),
             Move("3xTF32 products", "Multiply fp32 tiles as three TF32 products on the tensor cores (hi*hi + "
                  "hi*lo + lo*hi), near fp32 accuracy at tensor-core rate.", {"precision": "tf32x3"}),
             Move("fp32 FMA products", "Multiply fp32 tiles with fp32 FMAs (input_precision ieee), as eager does "
                  "with TF32 off.", {"precision": "ieee"}),
             Move("unroll every tap", "Unroll the kernel's taps whole, so their loads are all in flight at once.",
                  {"UNROLL": "taps"}),
             Move("unroll one row of taps", "Unroll only the last dim's taps and loop over the others (less code).",
                  {"UNROLL": "row"})]
    for bm in PARAMS["BLOCK_M"]:
        for bn in PARAMS["BLOCK_N"]:
            moves.append(Move(f"tile {bm}x{bn}", f"Each program computes {bm} output pixels x {bn} output channels.",
                              {"BLOCK_M": bm, "BLOCK_N": bn}))
    for bk in PARAMS["BLOCK_K"]:
        moves.append(Move(f"K step {bk}", f"Walk K (input channels x taps) {bk} at a time.", {"BLOCK_K": bk}))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"{s} stages", f"Pipeline the operand loads over {s} stages.", {"num_stages": s}))
    for w in PARAMS["num_warps"]:
        moves.append(Move(f"{w} warps", f"Run each program on {w} warps.", {"num_warps": w}))
    for b in PARAMS["BLOCK"]:
        moves.append(Move(f"direct BLOCK {b}", f"{b} output pixels a program in the direct kernel.", {"BLOCK": b}))
    return SearchSpace(params=PARAMS, default=start_point(cv),
                       template=lambda p: render(cv, p, init, forward, body, helper),
                       moves=moves, tuning=["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "BLOCK"],
                       cases=(Case("conv", {}, timed=True),), limits=limits)
