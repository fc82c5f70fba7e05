"""Generated kernels for a few level-1 operations no family covers: argmax/argmin along one dim, log-softmax along
one dim, and instance / group normalisation (rows of H*W or C/G*H*W with a per-channel weight and bias).

`match_extra(traced)` tries each pattern in turn and returns a `Match` with its own search space, or None. Each
kernel is one template below (read as code: `$NAME` placeholders filled by space.fill), its launcher and the
problem's `ModelNew`; every kernel computes in fp32 and stores in the output's dtype. The module is long because it
holds three small generated families (template, space and matcher each), kept together as one matcher, and the
chunked normalisation's space and statistics-merge kernel that matched_batchnorm.py shares.
- argmax / argmin: x read as (outer, R, inner), as generators/reduction.py does; a BLOCK_R x BLOCK_I tile slides
  along R, each lane keeping the extreme value it saw first and its index (NaN counts as the extreme, as in torch);
  the lanes are merged at the end taking the smallest index among the extremes: torch's tie rule. One read of x.
- log-softmax: a row whole in registers (ROWS rows a program: one read, one write), or, for rows too wide for
  registers, an online sweep (a running max and sum per lane) then a sweep writing x - max - log(sum) (two reads:
  KernelBench's 393216-wide rows do not stay in L2 between them).
- row normalisation (instance norm, group norm): each row (one (n, c), or one (n, group)) is cut into chunks of
  CHUNK values; a first kernel reduces each chunk in registers to its mean and M2 (two passes over registers, so no
  E[x^2] - E[x]^2 cancellation), a second merges a row's chunk statistics (Chan's formula: `chan_stats_kernel`,
  matched_batchnorm.py's too), a third normalises a chunk, with the channel's weight and bias for group norm.
  Bytes: two reads of x, one write of y; the chunks spread KernelBench's few, very long rows (896 rows of 2M for
  group norm) over every SM.
"""
from __future__ import annotations

import math

import torch

from kernelsearch.families.space import Move, SearchSpace, fill
from kernelsearch.generators.common import Match, shape_text
from kernelsearch.judge.problem import Case

_CASES = (Case("matched", {}, timed=True),)
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)

_MODEL = '''

import torch.nn as nn  # noqa: E402,F401 - what the reference's constructor may use


class ModelNew(torch.nn.Module):
    $INIT_SOURCE

    def forward(self, $FORWARD):
        return $CALL
'''


def _model(traced, call: str) -> str:
    from kernelsearch.generators.pointwise import DEFAULT_INIT

    return fill(_MODEL, {"INIT_SOURCE": traced.init_source or DEFAULT_INIT,
                         "FORWARD": ", ".join(traced.forward_args) or "*inputs", "CALL": call})


def _tensor(traced, node):
    inp = traced.input_of(node) if isinstance(node, torch.fx.Node) else None
    return inp if inp is not None and inp.kind == "tensor" and inp.dtype in _FLOATS and inp.shape else None


def _only(traced, name: str):
    """The graph's one op named `name` (copies aside) when it is the output, else None."""
    from kernelsearch.generators.trace import op_name

    ops = [n for n in traced.ops if op_name(n) not in ("clone", "alias", "detach")]
    return ops[0] if len(ops) == 1 and op_name(ops[0]) == name and ops[0] is traced.output else None


# -- argmax / argmin ------------------------------------------------------------------------------------------------

_ARG = '''import math

import torch
import triton
import triton.language as tl


@triton.jit
def _arg_kernel(x_ptr, y_ptr, R, I, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    # $WHAT: x read as (outer, R, inner); a BLOCK_R x BLOCK_I tile slides along R, each lane keeping the
    # extreme value it saw first (fp32: a float16/bfloat16 value converts exactly) and its row index (int32: R < 2^31)
    o = tl.program_id(0)
    i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = i < I
    base = x_ptr + tl.cast(o, tl.int64) * R * I
    best = tl.full([BLOCK_R, BLOCK_I], $INIT, tl.float32)
    idx = tl.zeros([BLOCK_R, BLOCK_I], tl.int32)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        m = (r[:, None] < R) & imask[None, :]
        v = tl.load(base + r[:, None] * I + i[None, :], mask=m, other=$INIT).to(tl.float32)
        # strictly beyond the lane's best (a tie keeps the earlier index), or the lane's first NaN (torch's
        # argmax/argmin return a NaN's index)
        take = (v $CMP best) | ((v != v) & (best == best))
        best = tl.where(take, v, best)
        idx = tl.where(take, r[:, None], idx)
    # merge the lanes: the smallest index among those holding the extreme (a NaN where any lane holds one)
    nan = best != best
    any_nan = tl.max(nan.to(tl.int32), axis=0)
    ext = $REDUCE(tl.where(nan, $INIT, best), axis=0)
    hit = tl.where(any_nan[None, :] > 0, nan, best == ext[None, :])
    res = tl.min(tl.where(hit, idx, 2147483647), axis=0)
    tl.store(y_ptr + tl.cast(o, tl.int64) * I + i, res.to(tl.int64), mask=imask)


def arg_reduce(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    shape = tuple(x.shape)
    d = $DIM
    outer, r, inner = math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:])
    if r == 0 or r >= 2**31:
        raise ValueError(f"arg_reduce: a dim of {r} (1 to 2^31 - 1 supported)")
    y = torch.empty(shape[:d] + $KEPT + shape[d + 1:], dtype=torch.int64, device=x.device)
    if y.numel():
        _arg_kernel[(outer, triton.cdiv(inner, $BLOCK_I))](x, y, r, inner, BLOCK_R=$BLOCK_R, BLOCK_I=$BLOCK_I,
                                                           num_warps=$num_warps)
    return y
'''

_ARG_OPS = {   # op -> (initial value, strictly-beyond comparison, the lanes' final reduction)
    "argmax": ('float("-inf")', ">", "tl.max"),
    "argmin": ('float("inf")', "<", "tl.min"),
}

ARG_PARAMS = {"BLOCK_R": [1, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048],
              "BLOCK_I": [1, 16, 32, 64, 128, 256],
              "num_warps": [1, 2, 4, 8, 16]}


def arg_space(op: str, dim: int, keepdim: bool, inner: int, traced, x_name: str, what: str) -> SearchSpace:
    """The space of argmax/argmin (`op`) over `dim` of forward's `x_name`; `inner` (the elements after dim) picks
    the starting tile."""
    start, cmp, final = _ARG_OPS[op]

    def template(p: dict) -> str:
        return fill(_ARG, {"WHAT": what, "INIT": start, "CMP": cmp, "REDUCE": final, "DIM": dim,
                           "KEPT": "(1,)" if keepdim else "()", "BLOCK_R": p["BLOCK_R"], "BLOCK_I": p["BLOCK_I"],
                           "num_warps": p["num_warps"]}) + _model(traced, f"arg_reduce({x_name})")

    # inner dims: 128 neighbouring columns (512 B a row of the tile) and 16 rows, 16 values and 16 indices a thread
    # on 4 warps; the last dim: one column, long rows
    default = {"BLOCK_R": 1024, "BLOCK_I": 1, "num_warps": 4} if inner == 1 else \
        {"BLOCK_R": 16, "BLOCK_I": 128, "num_warps": 4}

    def limits(p: dict, case) -> str | None:
        tile = p["BLOCK_R"] * p["BLOCK_I"]
        if tile > 8192:
            return f"a {p['BLOCK_R']} x {p['BLOCK_I']} tile is over 8192 values and indices a program"
        if tile < 32 * p["num_warps"]:
            return f"a {p['BLOCK_R']} x {p['BLOCK_I']} tile leaves threads of {p['num_warps']} warps idle"
        if tile // (32 * p["num_warps"]) > 32:   # sm_90: 64 a thread spilled 200 B on one warp (2048 x 1)
            return f"{tile // (32 * p['num_warps'])} values and indices a thread (32 at most: registers)"
        return None

    moves = []
    for r in ARG_PARAMS["BLOCK_R"]:
        for i in ARG_PARAMS["BLOCK_I"]:
            if 128 <= r * i <= 8192 and (inner > 1 or i == 1):
                moves.append(Move(f"tile {r} x {i}", f"Scan {r} rows of {i} neighbouring columns a step: "
                                  f"{r * i} values a step, {math.ceil(inner / i)} programs along the inner dims.",
                                  {"BLOCK_R": r, "BLOCK_I": i}))
    for w in ARG_PARAMS["num_warps"]:
        moves.append(Move(f"{w} warps", f"{w} warps a program.", {"num_warps": w}))
    return SearchSpace(params=ARG_PARAMS, default=default, template=template, moves=moves,
                       tuning=["BLOCK_R", "num_warps"], cases=_CASES, limits=limits)


def _argminmax(traced):
    from kernelsearch.generators.trace import schema_args

    for op in ("argmax", "argmin"):
        node = _only(traced, op)
        if node is None:
            continue
        a = schema_args(node)
        x = _tensor(traced, a["self"])
        if x is None or a.get("dim") is None:
            return None
        nd = len(x.shape)
        d = a["dim"] % nd
        keep = bool(a.get("keepdim"))
        summary = f"{op} over dim {d} of {shape_text(x)}{' (keepdim)' if keep else ''}"
        return Match("argreduce", summary, arg_space(op, d, keep, math.prod(x.shape[d + 1:]), traced, x.name,
                                                     summary))
    return None


# -- log-softmax ----------------------------------------------------------------------------------------------------

_LSM_HOST = '''


def log_softmax_rows(x: torch.Tensor) -> torch.Tensor:
    # the reduced dim moved last (a copy unless it is already), its rows contiguous
    d = $DIM
    xr = x.movedim(d, -1).contiguous()
    n_cols = xr.shape[-1]
    y = torch.empty_like(xr)
    if y.numel():
        _launch(xr, y, xr.numel() // n_cols, n_cols)
    return y.movedim(-1, d)
'''

_LSM_REGISTERS = '''import torch
import triton
import triton.language as tl


@triton.jit
def _log_softmax_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    # $WHAT: ROWS rows a program, each whole in registers: one read and one write an element
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    m = tl.where(m == float("-inf"), 0.0, m)   # a row of -inf (or padding) stays finite here
    s = tl.sum(tl.where(mask, tl.exp(x - m[:, None]), 0.0), axis=1)
    y = x - (m + tl.log(s))[:, None]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, y, n_rows, n_cols):
    block = max(triton.next_power_of_2(n_cols), 16)
    if block * $ROWS > 16384:
        raise ValueError(f"log_softmax: $ROWS rows of {n_cols} do not fit one program's registers")
    _log_softmax_rows_kernel[(triton.cdiv(n_rows, $ROWS),)](x, y, n_rows, n_cols, BLOCK=block, ROWS=$ROWS,
                                                            num_warps=$num_warps)
'''

_LSM_ONLINE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _log_softmax_online_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # $WHAT: one program a row; sweep 1 keeps a running max and sum of exponentials per lane (the online
    # softmax), sweep 2 writes x - max - log(sum). Two reads and one write an element.
    row = tl.program_id(0)
    x_row = x_ptr + tl.cast(row, tl.int64) * n_cols
    y_row = y_ptr + tl.cast(row, tl.int64) * n_cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")$HINT).to(tl.float32)
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    m_row = tl.max(m, axis=0)
    m_row = tl.where(m_row == float("-inf"), 0.0, m_row)
    lse = m_row + tl.log(tl.sum(s * tl.exp(m - m_row), axis=0))
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0$HINT).to(tl.float32)
        tl.store(y_row + cols, (x - lse).to(y_ptr.dtype.element_ty), mask=cols < n_cols$HINT)


def _launch(x, y, n_rows, n_cols):
    _log_softmax_online_kernel[(n_rows,)](x, y, n_cols, BLOCK=$BLOCK, num_warps=$num_warps)
'''

LSM_PARAMS = {"variant": ["registers", "online"],
              "ROWS": [1, 2, 4, 8],
              "BLOCK": [256, 512, 1024, 2048, 4096, 8192],
              "num_warps": [1, 2, 4, 8, 16],
              "cache_hints": [False, True]}


def log_softmax_space(dim: int, cols: int, traced, x_name: str, what: str) -> SearchSpace:
    """The space of log-softmax over `dim` (`cols` wide) of forward's `x_name`: rows in registers, or the online
    sweep; a row too wide for registers (over 16384 values) starts from the online sweep."""
    block = max(1 << max(cols - 1, 0).bit_length(), 16)

    def template(p: dict) -> str:
        online = p["variant"] == "online"
        body = _LSM_ONLINE if online else _LSM_REGISTERS
        return fill(body + _LSM_HOST, {
            "WHAT": what, "DIM": dim, "num_warps": p["num_warps"], "ROWS": 1 if online else p["ROWS"],
            "BLOCK": p["BLOCK"], "HINT": ', eviction_policy="evict_first"' if p["cache_hints"] else "",
        }) + _model(traced, f"log_softmax_rows({x_name})")

    if block <= 16384:   # whole rows, about 16 values a thread, up to 8 rows a program
        rows = max(1, min(8, 2048 // block))
        default = {"variant": "registers", "ROWS": rows, "BLOCK": 4096,
                   "num_warps": min(16, max(1, block * rows // 512)), "cache_hints": False}
    else:   # 4096 values a step on 8 warps: 16 a thread
        default = {"variant": "online", "ROWS": 1, "BLOCK": 4096, "num_warps": 8, "cache_hints": False}

    def limits(p: dict, case) -> str | None:
        if p["variant"] == "registers":
            held = block * p["ROWS"]
            if held > 16384:
                return f"{p['ROWS']} rows of {cols} are {held} values, over 16384 in one program's registers"
            if held // (32 * p["num_warps"]) > 64:
                return f"{held // (32 * p['num_warps'])} values a thread (64 at most: registers)"
            return None
        per = p["BLOCK"] // (32 * p["num_warps"])
        if not 1 <= per <= 32:
            return f"BLOCK {p['BLOCK']} on {p['num_warps']} warps is {per} values a thread (1 to 32)"
        return None

    registers = lambda p: p["variant"] == "registers"  # noqa: E731
    online = lambda p: p["variant"] == "online"  # noqa: E731
    moves = [Move("rows in registers", "Hold each row whole in registers: one read and one write an element.",
                  {"variant": "registers"}),
             Move("online sweep", "Sweep each row twice in BLOCK chunks: a running max and sum per lane, then the "
                  "write; for rows too wide for registers.", {"variant": "online"}),
             Move("stream past the cache", "Loads and stores with evict_first.", {"cache_hints": True}, when=online),
             Move("default cache policy", "Plain loads and stores.", {"cache_hints": False}, when=online)]
    for r in LSM_PARAMS["ROWS"]:
        moves.append(Move(f"{r} rows a program", f"{r} rows whole in registers a program.",
                          {"variant": "registers", "ROWS": r}, when=registers))
    for b in LSM_PARAMS["BLOCK"]:
        moves.append(Move(f"BLOCK {b}", f"Sweep a row {b} values a step.", {"variant": "online", "BLOCK": b},
                          when=online))
    for w in LSM_PARAMS["num_warps"]:
        moves.append(Move(f"{w} warps", f"{w} warps a program.", {"num_warps": w}))
    return SearchSpace(params=LSM_PARAMS, default=default, template=template, moves=moves,
                       tuning=["BLOCK", "ROWS", "num_warps"], cases=_CASES, limits=limits)


def _log_softmax(traced):
    from kernelsearch.generators.trace import schema_args

    node = _only(traced, "_log_softmax")
    if node is None:
        return None
    a = schema_args(node)
    x = _tensor(traced, a["self"])
    if x is None or a.get("half_to_float"):
        return None
    d = a["dim"] % len(x.shape)
    summary = f"log-softmax over dim {d} of {shape_text(x)}"
    return Match("log_softmax", summary, log_softmax_space(d, x.shape[d], traced, x.name, summary))


# -- instance norm, group norm ---------------------------------------------------------------------------------------

_CHAN_STATS = '''@triton.jit
def $NAME(mean_ptr, m2_ptr, stat_ptr, L, n_chunks, eps, CHUNK: tl.constexpr, PARTS: tl.constexpr):
    # $WHAT
    $UNIT = tl.program_id(0)
    k = tl.arange(0, PARTS)
    km = k < n_chunks
    means = tl.load(mean_ptr + $UNIT * n_chunks + k, mask=km, other=0.0)
    m2s = tl.load(m2_ptr + $UNIT * n_chunks + k, mask=km, other=0.0)
    ns = tl.where(km, tl.minimum(L - k * CHUNK, CHUNK), 0).to(tl.float32)
    mean = tl.sum(ns * means, axis=0) / L
    dm = tl.where(km, means - mean, 0.0)
    var = (tl.sum(m2s, axis=0) + tl.sum(ns * dm * dm, axis=0)) / L
    tl.store(stat_ptr + 2 * $UNIT, mean)
    tl.store(stat_ptr + 2 * $UNIT + 1, tl.rsqrt(var + eps))
'''


def chan_stats_kernel(name: str, unit: str, what: str) -> str:
    """The kernel `name` (a template's `$STATS_KERNEL`) that merges each `unit`'s chunk statistics (a row's here, a
    channel's in matched_batchnorm.py: one program each, PARTS lanes over its n_chunks chunks of CHUNK values, L in
    all) by Chan et al.'s parallel rule, M2 = sum M2_i + sum n_i (mean_i - mean)^2, into its mean and 1/std (biased
    variance), stored at stat[2 unit] and stat[2 unit + 1]; `what` is its comment line."""
    return fill(_CHAN_STATS, {"NAME": name, "UNIT": unit, "WHAT": what})


_ROW_STATS = chan_stats_kernel("_row_stats_kernel", "row", "a row's mean and 1/std from its chunks' (Chan et al.): "
                               "M2 = sum M2_i + sum n_i (mean_i - mean)^2")

_NORM = '''import torch
import triton
import triton.language as tl


@triton.jit
def _chunk_stats_kernel(x_ptr, mean_ptr, m2_ptr, L, n_chunks, CHUNK: tl.constexpr):
    # $WHAT: one chunk of a row in registers, reduced to its mean and M2 (squared deviations from that mean)
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    mask = cols < L
    x = tl.load(x_ptr + tl.cast(row, tl.int64) * L + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / tl.minimum(L - c * CHUNK, CHUNK).to(tl.float32)
    d = tl.where(mask, x - mean, 0.0)
    tl.store(mean_ptr + row * n_chunks + c, mean)
    tl.store(m2_ptr + row * n_chunks + c, tl.sum(d * d, axis=0))


$STATS_KERNEL


@triton.jit
def _norm_kernel(x_ptr, y_ptr, stat_ptr, w_ptr, b_ptr, L, HW, G, CPG, CHUNK: tl.constexpr, AFFINE: tl.constexpr):
    # (x - mean) / std over one chunk of a row; group norm: times the channel's weight, plus its bias
    row = tl.program_id(0)
    cols = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    mask = cols < L
    mean = tl.load(stat_ptr + 2 * row)
    rstd = tl.load(stat_ptr + 2 * row + 1)
    offs = tl.cast(row, tl.int64) * L + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd
    if AFFINE:
        ch = (row % G) * CPG + cols // HW
        y = y * tl.load(w_ptr + ch, mask=mask, other=0.0).to(tl.float32) + \\
            tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def row_norm(x: torch.Tensor, weight, bias, groups: int) -> torch.Tensor:
    # rows: one per (n, group) (instance norm: a group per channel) of C / G x H x W values
    x = x.contiguous()
    n, c = x.shape[0], x.shape[1]
    g = int(groups)
    hw = x.numel() // max(n * c, 1)
    rows, length = n * g, (c // g) * hw
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    chunks = triton.cdiv(length, $CHUNK)
    parts = triton.next_power_of_2(chunks)
    if parts > 16384:
        raise ValueError(f"row_norm: a row of {length} is {chunks} chunks of $CHUNK (16384 at most)")
    mean = torch.empty(rows * chunks, dtype=torch.float32, device=x.device)
    m2 = torch.empty_like(mean)
    stat = torch.empty(rows * 2, dtype=torch.float32, device=x.device)
    _chunk_stats_kernel[(rows, chunks)](x, mean, m2, length, chunks, CHUNK=$CHUNK, num_warps=$num_warps)
    _row_stats_kernel[(rows,)](mean, m2, stat, length, chunks, $EPS, CHUNK=$CHUNK, PARTS=parts,
                               num_warps=4 if parts >= 512 else 1)
    affine = weight is not None
    _norm_kernel[(rows, chunks)](x, y, stat, weight if affine else x, bias if affine else x, length, hw, g, c // g,
                                 CHUNK=$CHUNK, AFFINE=affine, num_warps=$num_warps)
    return y
'''

NORM_PARAMS = {"CHUNK": [1024, 2048, 4096, 8192, 16384], "num_warps": [1, 2, 4, 8, 16]}


def norm_space(groups: str, eps: float, traced, call: str, what: str) -> SearchSpace:
    """The space of a row normalisation: rows of one (n, group), chunks of CHUNK values on num_warps warps. `call`
    passes the group count as an expression read at run time (the module's num_groups; instance norm's channels),
    never the traced number: a problem's smaller cases build the module with other counts."""

    def template(p: dict) -> str:
        return fill(_NORM, {"WHAT": what, "EPS": repr(float(eps)), "CHUNK": p["CHUNK"],
                            "num_warps": p["num_warps"], "STATS_KERNEL": _ROW_STATS}) + _model(traced, call)

    return chunked_space(template, "each row")


def chunked_space(template, unit: str) -> SearchSpace:
    """The space of a normalisation in chunks (rows here, channels in matched_batchnorm.py): CHUNK values of `unit`
    a program, on num_warps warps, 1 to 32 values a thread."""

    def limits(p: dict, case) -> str | None:
        per = p["CHUNK"] // (32 * p["num_warps"])
        if not 1 <= per <= 32:
            return f"a chunk of {p['CHUNK']} on {p['num_warps']} warps is {per} values a thread (1 to 32)"
        return None

    moves = [Move(f"chunks of {k}", f"Cut {unit} into chunks of {k} values, one program each, in both passes.",
                  {"CHUNK": k}) for k in NORM_PARAMS["CHUNK"]]
    moves += [Move(f"{w} warps", f"{w} warps a program.", {"num_warps": w}) for w in NORM_PARAMS["num_warps"]]
    # 4096 values a chunk on 8 warps: 16 a thread; KernelBench's rows (262144, 2M values) make 64 to 512 chunks
    return SearchSpace(params=NORM_PARAMS, default={"CHUNK": 4096, "num_warps": 8}, template=template, moves=moves,
                       tuning=["CHUNK", "num_warps"], cases=_CASES, limits=limits)


def _getitem0(traced, name: str):
    """The op `name` whose output 0 (a getitem) is consumed, and that getitem; None where the graph has other ops."""
    from kernelsearch.generators.trace import op_name

    ops = [n for n in traced.ops if op_name(n) not in ("getitem", "clone", "alias", "detach", "empty", "view")]
    if len(ops) != 1 or op_name(ops[0]) != name:
        return None
    outs = [u for u in ops[0].users if op_name(u) == "getitem" and u.args[1] == 0]
    return (ops[0], outs[0]) if len(outs) == 1 else None


def _group_norm(traced):
    from kernelsearch.generators.pointwise import self_attr
    from kernelsearch.generators.trace import schema_args

    found = _getitem0(traced, "native_group_norm")
    if found is None or found[1] is not traced.output:
        return None
    a = schema_args(found[0])
    x = _tensor(traced, a["input"])
    w, b = (traced.input_of(a[k]) if isinstance(a.get(k), torch.fx.Node) else None for k in ("weight", "bias"))
    if x is None or len(x.shape) < 2 or w is None or b is None or w.kind != "param" or b.kind != "param":
        return None
    g = int(a["group"])
    summary = f"group norm ({g} groups) of {shape_text(x)}"
    weight = self_attr(w.name)
    # the module's own group count where the weight is a GroupNorm's (self.gn.weight -> self.gn.num_groups)
    groups = f"{weight.removesuffix('.weight')}.num_groups" if weight.endswith(".weight") else str(g)
    call = f"row_norm({x.name}, {weight}, {self_attr(b.name)}, {groups})"
    return Match("row_norm", summary, norm_space(groups, a["eps"], traced, call, summary))


def _instance_norm(traced):
    """InstanceNorm (affine=False, no running stats) as traced: x viewed (1, N*C, ...), batch norm in training mode
    with no weight, bias or running stats, viewed back."""
    from kernelsearch.generators.trace import meta, op_name, schema_args

    found = _getitem0(traced, "native_batch_norm")
    out = traced.output
    if found is None or op_name(out) != "view" or out.args[0] is not found[1]:
        return None
    a = schema_args(found[0])
    src = a["input"]
    if not (isinstance(src, torch.fx.Node) and op_name(src) == "view") or not a.get("training") or \
            any(a.get(k) is not None for k in ("weight", "bias", "running_mean", "running_var")):
        return None
    x = _tensor(traced, src.args[0])
    v = meta(src)
    if x is None or len(x.shape) < 3 or v is None or tuple(v.shape) != (1, x.shape[0] * x.shape[1], *x.shape[2:]):
        return None
    summary = f"instance norm of {shape_text(x)}"
    return Match("row_norm", summary, norm_space("c", a["eps"], traced,
                                                 f"row_norm({x.name}, None, None, {x.name}.shape[1])", summary))


# -- the matcher ----------------------------------------------------------------------------------------------------

_PATTERNS = (_argminmax, _log_softmax, _group_norm, _instance_norm)


def match_extra(traced):
    """The first of this module's patterns that matches the traced reference, as a `Match`, or None."""
    for pattern in _PATTERNS:
        found = pattern(traced)
        if found is not None:
            return found
    return None
