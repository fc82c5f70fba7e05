"""A generated kernel family: max and average pooling over the last 1, 2 or 3 dims (nn.MaxPool1d/2d/3d,
nn.AvgPool1d/2d/3d, F.max_pool*/avg_pool*), values only.

One Triton kernel renders every form: the input read as (NC, D, H, W) with size-1 leading spatial dims for the 1-D
and 2-D forms (Triton specialises a size of 1, so their index math folds away), the output flattened; each program
computes BLOCK outputs, the window unrolled (`tl.static_range` over the kernel size: every load of a window is
independent and in flight at once), padding masked (max: -inf; average: 0, divided per count_include_pad /
divisor_override, a constant where every window is whole). Bytes: one read of x (windows overlap in L1/L2), one
write of the output. Offsets are 64-bit only where a tensor passes 2**31 elements (KernelBench's 2-D average pooling
input is 16x64x2048x2048 = 2**32).

The pooling arguments are the candidate's own constructor's: the reference's `nn.XxxPoolNd(...)` call is kept as
the call of a helper that normalises them as torch does, so a case that builds the model with another kernel size
(KernelBench's derived cases do) pools with that one; a functional call in forward has the traced values baked in.

The space: BLOCK, num_warps, which output dim is innermost in a program (`TILE_W` 0: BLOCK consecutive outputs of
the flattened output; else a (BLOCK / TILE_W) x TILE_W tile, TILE_W consecutive outputs of the last dim a row, so
the row's index math is done once a row and stride-1 loads can be vectorised) and how much of the window is
unrolled.
"""
from __future__ import annotations

import ast
import math
import re

import torch

from kernelsearch.families.space import Move, SearchSpace, fill
from kernelsearch.generators.common import LLM_HINT, Match, Unmatched
from kernelsearch.generators.trace import Traced, meta, op_name, schema_args
from kernelsearch.judge.problem import Case

_TEMPLATE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _span(o, I, S: tl.constexpr, P: tl.constexpr, K: tl.constexpr, COUNT_PAD: tl.constexpr):
    # the elements of output o's window along one dim that the average divides by (torch's rule: the window is
    # cut at I + P; without count_include_pad the padding is not counted either)
    start = o * S - P
    end = tl.minimum(start + K, I + P)
    if not COUNT_PAD:
        start = tl.maximum(start, 0)
        end = tl.minimum(end, I)
    return end - start


@triton.jit
def _pool_kernel(x_ptr, y_ptr, n_out, n_rows, ID, IH, IW, OD, OH, OW,
                 KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
                 SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, LD: tl.constexpr,
                 LH: tl.constexpr, LW: tl.constexpr, COUNT_PAD: tl.constexpr, DIVISOR: tl.constexpr,
                 OUT64: tl.constexpr, IN64: tl.constexpr, BLOCK: tl.constexpr):
    # $WHAT
    pid = tl.program_id(0)
    if OUT64:   # past 2**31 outputs the flat index needs 64 bits
        pid = tl.cast(pid, tl.int64)
    $INDEX
    oh = r % OH
    t = r // OH
    od = t % OD
    nc = t // OD
    if IN64:    # past 2**31 input elements a plane's base needs 64 bits (the offsets inside a plane do not)
        nc = tl.cast(nc, tl.int64)
    base = nc * ID * IH * IW
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    acc = $ACC
    for kd in $LOOP(KD):
        d = d0 + kd * LD
        md = mask & (d >= 0) & (d < ID)
        for kh in $LOOP(KH):
            h = h0 + kh * LH
            mh = md & (h >= 0) & (h < IH)
            row = base + (d * IH + h) * IW
            for kw in tl.static_range(KW):
                w = w0 + kw * LW
                m = mh & (w >= 0) & (w < IW)
                v = tl.load(x_ptr + row + w, mask=m, other=$PAD)
                acc = $COMBINE
    $FINISH
    tl.store(y_ptr + out, res.to(y_ptr.dtype.element_ty), mask=mask)


def _tuple(v, n):
    return tuple(int(e) for e in v) if isinstance(v, (tuple, list)) else (int(v),) * n


def _pool_args(kernel_size, stride, padding, dilation, ceil_mode, count_include_pad, divisor_override):
    # nn.XxxPool${DIMS}d's arguments as torch normalises them: one value per pooled dim, stride defaulting to the kernel
    k = _tuple(kernel_size, ${DIMS})
    s = _tuple(stride, ${DIMS}) if stride is not None and stride != [] and stride != () else k
    return (k, s, _tuple(padding, ${DIMS}), _tuple(dilation, ${DIMS}), bool(ceil_mode), bool(count_include_pad),
            divisor_override)


$PARAMS_HELPER


def _out_size(n, k, s, p, d, ceil_mode):
    # torch's pooling output size: floor (or ceil) of the strided windows, a ceil window starting in the right
    # padding dropped
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def pool(x, args):
    k, s, p, dil, ceil_mode, count_include_pad, divisor_override = args
    n = len(k)
    if x.dim() not in (n + 1, n + 2):
        raise ValueError(f"$OP pooling over {n} dims takes a {n + 1}-D or {n + 2}-D input, not {x.dim()}-D")
    x = x.contiguous()
    ins = tuple(x.shape[-n:])
    outs = tuple(_out_size(i, *a, ceil_mode) for i, *a in zip(ins, k, s, p, dil))
    y = torch.empty(x.shape[:-n] + outs, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    pad = 3 - n   # the leading spatial dims the kernel takes as size 1
    ID, IH, IW = (1,) * pad + ins
    OD, OH, OW = (1,) * pad + outs
    (KD, KH, KW), (SD, SH, SW) = (1,) * pad + k, (1,) * pad + s
    (PD, PH, PW), (LD, LH, LW) = (0,) * pad + p, (1,) * pad + dil
    whole = not ceil_mode and count_include_pad   # every window ends inside the padding: k elements each
    divisor = divisor_override or (KD * KH * KW if whole else 0)
    n_rows = y.numel() // OW
    if ID * IH * IW >= 2**31:
        raise ValueError(f"one plane of {ID * IH * IW} elements: this kernel's in-plane offsets are 32-bit")
    grid = $GRID
    _pool_kernel[grid](x, y, y.numel(), n_rows, ID, IH, IW, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW, LD, LH, LW,
                       COUNT_PAD=bool(count_include_pad), DIVISOR=int(divisor), OUT64=y.numel() + $BLOCK >= 2**31,
                       IN64=x.numel() >= 2**31, BLOCK=$BLOCK, num_warps=$num_warps)
    return y


import math  # noqa: E402,F401 - what the reference's constructor may use
import torch.nn as nn  # noqa: E402,F401


class ModelNew(torch.nn.Module):
    $INIT_SOURCE

    def forward(self, $FORWARD):
        return pool($X, self._pool)
'''

# each program: BLOCK consecutive outputs of the flattened output (r: the flattened row, ow: the last dim's index)
_FLAT = '''
o = pid * BLOCK + tl.arange(0, BLOCK)
mask = o < n_out
ow = o % OW
r = o // OW
out = o
'''

# each program: a (BLOCK / TILE_W) x TILE_W tile, TILE_W consecutive outputs of the last dim in each of its rows
_TILE = '''
n_wb = tl.cdiv(OW, $TILE_W)
r = (pid // n_wb) * $ROWS + tl.arange(0, $ROWS)[:, None]
ow = (pid % n_wb) * $TILE_W + tl.arange(0, $TILE_W)[None, :]
mask = (r < n_rows) & (ow < OW)
out = r * OW + ow
'''

_MAX = {"ACC": 'tl.full(mask.shape, float("-inf"), tl.float32)', "PAD": 'float("-inf")',
        "COMBINE": "tl.maximum(acc, v.to(tl.float32), propagate_nan=tl.PropagateNan.ALL)",
        "FINISH": "res = acc"}
_AVG = {"ACC": "tl.zeros(mask.shape, tl.float32)", "PAD": "0.0", "COMBINE": "acc + v.to(tl.float32)",
        "FINISH": """
if DIVISOR:
    res = acc / DIVISOR
else:
    res = acc / (_span(od, ID, SD, PD, KD, COUNT_PAD) * _span(oh, IH, SH, PH, KH, COUNT_PAD)
                 * _span(ow, IW, SW, PW, KW, COUNT_PAD)).to(tl.float32)
"""}

# the constructor's signatures (torch.nn), mapped onto _pool_args
_HELPERS = {
    "max": '''
def _pool_params(kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
    # nn.MaxPool's signature (the indices are not returned: the reference's output is the values)
    return _pool_args(kernel_size, stride, padding, dilation, ceil_mode, True, None)
''',
    "avg": '''
def _pool_params(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    # nn.AvgPool's signature
    return _pool_args(kernel_size, stride, padding, 1, ceil_mode, count_include_pad, divisor_override)
''',
}

PARAMS = {"BLOCK": [128, 256, 512, 1024, 2048, 4096],
          "TILE_W": [0, 8, 16, 32, 64, 128, 256, 512],
          "num_warps": [1, 2, 4, 8, 16],
          "UNROLL": ["window", "row"]}

DEFAULT = {"BLOCK": 1024, "TILE_W": 0, "num_warps": 4, "UNROLL": "window"}

# Registers (sm_90 compiles at KernelBench's shapes): ptxas hoists a thread's window loads ahead of their use, so
# what a thread holds grows with outputs a thread x window elements. 8 x 121 (2-D average
# 11x11) spilled 1072 B at 255 registers (376 B with only the window's rows unrolled), 4 x 121 took 147 registers
# and 2 x 121 60, no spill; 16 outputs a thread spilled at 3x3x3 (960 B) and 4x4 (352 B) windows; 8 x 27 took 193.
MAX_PER_THREAD = 8       # outputs a thread
MAX_THREAD_LOADS = 512   # outputs a thread x window elements
START_THREAD_LOADS = 256  # the starter's: 8 outputs a thread up to a 32-element window, 2 at 11x11
MAX_UNROLLED = 512       # window elements unrolled whole at most


class Pooling:
    """One pooling op as traced: op ("max" | "avg"), the pooled dims' arguments at the problem's own case."""

    def __init__(self, op, kernel, stride, padding, dilation, ceil_mode, count_include_pad, divisor_override,
                 in_shape, out_shape, dtype):
        self.op, self.kernel, self.stride, self.padding, self.dilation = op, kernel, stride, padding, dilation
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, divisor_override
        self.in_shape, self.out_shape, self.dtype = in_shape, out_shape, dtype

    @property
    def dims(self) -> int:
        return len(self.kernel)

    def args(self) -> tuple:
        return (self.kernel, self.stride, self.padding, self.dilation, self.ceil_mode, self.count_include_pad,
                self.divisor_override)

    def describe(self) -> str:
        def one(v):
            return str(v[0]) if len(set(v)) == 1 else "x".join(map(str, v))

        parts = [f"kernel {one(self.kernel)}", f"stride {one(self.stride)}", f"padding {one(self.padding)}"]
        if self.op == "max":
            parts.append(f"dilation {one(self.dilation)}")
        if self.ceil_mode:
            parts.append("ceil_mode")
        if self.op == "avg" and not self.count_include_pad:
            parts.append("count_include_pad=False")
        if self.divisor_override:
            parts.append(f"divisor {self.divisor_override}")
        return (f"{self.op} pooling {self.dims}-D of {'x'.join(map(str, self.in_shape))} "
                f"{str(self.dtype).removeprefix('torch.')} ({', '.join(parts)}) -> "
                f"{'x'.join(map(str, self.out_shape))}")


def render(pool: Pooling, p: dict, init: str, forward: str, x_name: str) -> str:
    tile = p["TILE_W"]
    index = _FLAT if not tile else fill(_TILE, {"TILE_W": tile, "ROWS": p["BLOCK"] // tile})
    op = _MAX if pool.op == "max" else _AVG
    per_thread = max(1, p["BLOCK"] // (32 * p["num_warps"]))
    layout = "flat outputs" if not tile else f"{p['BLOCK'] // tile} x {tile} tiles of outputs"
    grid = "(triton.cdiv(y.numel(), BLOCK),)" if not tile else \
        f"(triton.cdiv(n_rows, {p['BLOCK'] // tile}) * triton.cdiv(OW, {tile}),)"
    return fill(_TEMPLATE, {
        "WHAT": f"{pool.describe()}; {layout}, {per_thread} a thread",
        "INDEX": index, "LOOP": "tl.static_range" if p["UNROLL"] == "window" else "range",
        "GRID": grid.replace("BLOCK", str(p["BLOCK"])), "BLOCK": p["BLOCK"], "num_warps": p["num_warps"],
        "DIMS": pool.dims, "OP": pool.op, "PARAMS_HELPER": _HELPERS[pool.op], "INIT_SOURCE": init,
        "FORWARD": forward, "X": x_name, **op,
    })


def pooling_space(pool: Pooling, init: str, forward: str, x_name: str) -> SearchSpace:
    """The space of one pooling op: `init` the candidate's constructor (setting self._pool), forward's
    parameters `forward` and its pooled input `x_name`."""
    window = math.prod(pool.kernel)
    ow = pool.out_shape[-1]

    def limits(p: dict, case) -> str | None:
        threads = 32 * p["num_warps"]
        if p["BLOCK"] < threads:
            return f"BLOCK {p['BLOCK']} leaves threads of {p['num_warps']} warps idle"
        per = p["BLOCK"] // threads
        if per > MAX_PER_THREAD:
            return f"{per} outputs a thread (at most {MAX_PER_THREAD}: registers)"
        if per * window > MAX_THREAD_LOADS:
            return (f"{per} outputs a thread x a {window}-element window: {per * window} loads a thread "
                    f"(at most {MAX_THREAD_LOADS}: they spill)")
        if p["TILE_W"] > p["BLOCK"]:
            return f"a row of {p['TILE_W']} outputs is more than the program's BLOCK {p['BLOCK']}"
        if p["TILE_W"] >= 2 * ow and p["TILE_W"] > 8:
            return f"a row of {p['TILE_W']} outputs is over twice the last dim's {ow}: most of it masked"
        if p["UNROLL"] == "window" and window > MAX_UNROLLED:
            return f"a {window}-element window unrolled whole (at most {MAX_UNROLLED})"
        return None

    default = dict(DEFAULT)
    per = next((n for n in (8, 4, 2) if n * window <= START_THREAD_LOADS), 1)
    default["BLOCK"] = 32 * default["num_warps"] * per
    if window > MAX_UNROLLED:
        default["UNROLL"] = "row"
    moves = [Move("flat outputs", "Each program computes BLOCK consecutive outputs of the flattened output "
                  "(rows of the last dim run into each other: no masked lanes at a short last dim).", {"TILE_W": 0})]
    for t in PARAMS["TILE_W"][1:]:
        moves.append(Move(f"rows of {t}", f"Each program computes a tile of BLOCK / {t} rows of {t} consecutive "
                          f"outputs of the last dim: the row's index math once a row, and stride-1 loads along the "
                          f"row can be vectorised.", {"TILE_W": t}))
    moves.append(Move("unroll the whole window", "Unroll every dim of the window, so all its loads are independent "
                      "and in flight at once.", {"UNROLL": "window"}))
    moves.append(Move("unroll one row of the window", "Unroll only the window's last dim and loop over the others "
                      "(less code and fewer registers for a large window).", {"UNROLL": "row"}))
    for b in PARAMS["BLOCK"]:
        for w in PARAMS["num_warps"]:
            per = b // (32 * w)
            if per in (1, 2, 4, 8, 16):
                moves.append(Move(f"BLOCK {b} with {w} warps", f"{b} outputs a program over {w} warps: {per} "
                                  f"output{'s' if per > 1 else ''} a thread.", {"BLOCK": b, "num_warps": w}))
    return SearchSpace(params=PARAMS, default=default, template=lambda p: render(pool, p, init, forward, x_name),
                       moves=moves, tuning=["BLOCK", "num_warps", "TILE_W"],
                       cases=(Case("pooling", {}, timed=True),), limits=limits)


# -- the matcher ------------------------------------------------------------------------------------------------

_POOL_OPS = {"max_pool2d_with_indices": ("max", 2), "max_pool3d_with_indices": ("max", 3),
             "avg_pool2d": ("avg", 2), "avg_pool3d": ("avg", 3)}
_PASS = ("getitem", "clone", "alias", "detach", "unsqueeze", "squeeze")
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _n(v, nd: int) -> tuple:
    v = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return tuple(int(e) for e in (v * nd if len(v) == 1 else v))


def _constructor_call(source: str | None, op: str, dims: int) -> ast.Call | None:
    """The reference Model's __init__'s one `nn.MaxPool{dims}d(...)` / `nn.AvgPool{dims}d(...)` call, or None."""
    try:
        tree = ast.parse(source or "")
    except SyntaxError:
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None) \
        if cls is not None else None
    if init is None:
        return None
    want = f"{'Max' if op == 'max' else 'Avg'}Pool{dims}d"
    calls = [n for n in ast.walk(init) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == want and ast.unparse(n.func.value) in ("nn", "torch.nn")]
    pools = [n for n in ast.walk(init) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and re.fullmatch(r"(Max|Avg)Pool\dd", n.func.attr)]
    return calls[0] if len(calls) == 1 and len(pools) == 1 else None


def match_pooling(traced: Traced):
    """Max or average pooling of one forward argument over its last 1-3 dims (the values; 1-D pooling traces as
    unsqueeze -> 2-D pooling -> squeeze): the generated pooling family. A reference returning max pooling's indices
    is refused in one line (Unmatched)."""
    from kernelsearch.generators.pointwise import DEFAULT_INIT

    pools = [n for n in traced.ops if op_name(n) in _POOL_OPS]
    if len(pools) != 1 or any(op_name(n) not in _PASS and n is not pools[0] for n in traced.ops):
        return None
    node = pools[0]
    op, nd = _POOL_OPS[op_name(node)]
    a = schema_args(node)
    out = traced.output
    chain = [out]
    while op_name(chain[-1]) in ("clone", "alias", "detach", "squeeze", "getitem") and chain[-1] is not node:
        if op_name(chain[-1]) == "getitem" and chain[-1].args[1] != 0:
            raise Unmatched(f"the reference returns the indices of max pooling ({op_name(node)}); the offline "
                            f"pooling family computes the values only; {LLM_HINT}")
        chain.append(chain[-1].args[0])
    if chain[-1] is not node or (op == "max") != any(op_name(n) == "getitem" for n in chain):
        return None
    squeezes = [n for n in chain if op_name(n) == "squeeze"]
    src = a["self"]
    k, s = _n(a["kernel_size"], nd), _n(a.get("stride") or a["kernel_size"], nd)
    p, d = _n(a.get("padding", 0), nd), _n(a.get("dilation", 1) if op == "max" else 1, nd)
    dims = nd
    if isinstance(src, torch.fx.Node) and op_name(src) == "unsqueeze":   # 1-D pooling: (.., 1, L) pooled 2-D
        m, sm = meta(src), meta(squeezes[0]) if len(squeezes) == 1 else None
        if m is None or sm is None or src.args[1] % m.dim() != m.dim() - 2 or \
                len(squeezes[0].args) < 2 or squeezes[0].args[1] % (sm.dim() + 1) != sm.dim() - 1 or \
                nd != 2 or (k[0], s[0], p[0], d[0]) != (1, 1, 0, 1):
            return None
        src, dims = src.args[0], 1
        k, s, p, d = k[1:], s[1:], p[1:], d[1:]
    elif squeezes:
        return None
    x = traced.input_of(src) if isinstance(src, torch.fx.Node) else None
    y = meta(out)
    if x is None or x.kind != "tensor" or x.dtype not in _FLOATS or len(x.shape) not in (dims + 1, dims + 2) or \
            y is None or y.dtype != x.dtype:
        return None
    ceil = bool(a.get("ceil_mode", False))
    cip = bool(a.get("count_include_pad", True)) if op == "avg" else True
    div = a.get("divisor_override") if op == "avg" else None
    pool = Pooling(op, k, s, p, d, ceil, cip, div, tuple(x.shape), tuple(y.shape), x.dtype)
    call = _constructor_call(traced.reference_source, op, dims)
    if call is not None and traced.init_source:   # the constructor's own arguments, read when the model is built
        args = [ast.unparse(e) for e in call.args] + [ast.unparse(kw) for kw in call.keywords]
        init = traced.init_source.rstrip("\n") + f"\n        self._pool = _pool_params({', '.join(args)})"
    else:   # a functional call: the values traced at the problem's own case
        init = (traced.init_source or DEFAULT_INIT).rstrip("\n") + f"\n        self._pool = {pool.args()!r}"
    summary = pool.describe()
    space = pooling_space(pool, init, ", ".join(traced.forward_args) or "*inputs", x.name)
    return Match("pooling", summary, space)
