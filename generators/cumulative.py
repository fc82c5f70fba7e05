"""A generated kernel family: a cumulative sum or product (a scan) along one dim.

Matched (`match_cumulative`): a graph that is cumsum or cumprod along one dim of an input, or of elementwise ops of
same-shape inputs (a mask of any dtype, bool included: 93_masked_cumsum's x * mask) and forward's numbers; a flip
along the scan's dim before the scan, after it, or both (91_cumsum_reverse's flip, cumsum, flip: a suffix sum); and
the exclusive form as KernelBench writes it, cat([zeros_like(x.select(d, 0).unsqueeze(d)), cumsum(x.narrow(d, 0,
n - 1))], d) (92_cumsum_exclusive; ones for a product). The output is a floating-point tensor of the input's shape.

The kernel: the input is read as (outer, n, inner) and each program scans ROWS lanes (an (outer, inner) pair each)
along n, CHUNK positions a step: a ROWS x CHUNK tile is loaded, scanned in fp32 (tl.associative_scan, reversed for
a suffix scan) and combined with the lane's running carry (the sum or product of every earlier chunk), then
stored. A scan of the last dim reads contiguous chunks of a row (inner = 1, which Triton specialises, so the loads
vectorise); along another dim a chunk's positions are `inner` apart and ROWS neighbouring lanes make the
coalesced axis. The exclusive form scans the input shifted by one position in the scan's direction (its first
position the identity), so a product works as a sum does. Bytes: one read of each input and one write, the floor;
a flip of the output alone (not of its input too) stores through mirrored offsets.

The space: CHUNK, ROWS and num_warps. Not covered: elementwise ops after the scan, broadcast operands, other scans
(cummax, logcumsumexp). A scan of few, very long lanes (a 1-D cumsum of 10^8 elements) runs on few programs: the
chunked carry is serial along a lane (a decoupled look-back scan would spread it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from kernelsearch.families.space import Move, SearchSpace, fill, next_pow2
from kernelsearch.generators.common import Match
from kernelsearch.generators.pointwise import _OPS, _PROLOGUE, DEFAULT_INIT, FLOATS, self_attr
from kernelsearch.generators.trace import Traced, meta, op_name, schema_args
from kernelsearch.judge.problem import Case

_TEMPLATE = '''

@triton.jit
def _combine(a, b):
    return $COMBINE


@triton.jit
def _chunk(c, n, base, lmask, step, cols, CHUNK: tl.constexpr, REV: tl.constexpr, SHIFT: tl.constexpr):
    # chunk c in the scan's order: its positions along n, the positions it reads (SHIFT: each position's
    # predecessor in the scan's order) with their mask and offsets; past either end, masked
    if REV:
        pos = n - (c + 1) * CHUNK + cols
    else:
        pos = c * CHUNK + cols
    if SHIFT:
        src = pos + 1 if REV else pos - 1
    else:
        src = pos
    rmask = lmask[:, None] & ((src >= 0) & (src < n))[None, :]
    return pos, rmask, base[:, None] + (src * step)[None, :]


@triton.jit
def _scan_kernel($PARAMS, y_ptr, n_lanes, n, inner, CHUNK: tl.constexpr, ROWS: tl.constexpr, REV: tl.constexpr,
                 MIRROR: tl.constexpr, SHIFT: tl.constexpr, WIDE: tl.constexpr):
    # $WHAT
    # ROWS lanes a program (a lane: one (outer, inner) pair of x read as (outer, n, inner)), each scanned along n
    # CHUNK positions a step in fp32, the chunk's scan combined with the lane's carry (every earlier chunk's
    # total). REV: a suffix scan (chunks from the end, scanned in reverse); MIRROR: stored at n - 1 - pos; SHIFT:
    # the exclusive form, each position reading its predecessor in the scan's order. One read, one write.
    lane = tl.cast(tl.program_id(0), tl.int64) * ROWS + tl.arange(0, ROWS)
    lmask = lane < n_lanes
    base = (lane // inner) * n * inner + lane % inner
    step = tl.cast(inner, tl.int64) if WIDE else inner
    carry = tl.full([ROWS], $IDENTITY, tl.float32)
    cols = tl.arange(0, CHUNK)
    $PRELOAD
    for c in range(0, tl.cdiv(n, CHUNK)):
        pos, rmask, offs = _chunk(c, n, base, lmask, step, cols, CHUNK, REV, SHIFT)
        $LOADS
        $LINES
        v = tl.where(rmask, ($RESULT).to(tl.float32), $IDENTITY)
        out = _combine(carry[:, None], tl.associative_scan(v, 1, _combine, reverse=REV))
        carry = _combine(carry, tl.reduce(v, 1, _combine))
        wmask = lmask[:, None] & ((pos >= 0) & (pos < n))[None, :]
        dst = (n - 1 - pos) if MIRROR else pos
        tl.store(y_ptr + base[:, None] + (dst * step)[None, :], out.to(y_ptr.dtype.element_ty), mask=wmask)


def cumulative($ARGS):
    $CONTIGUOUS
    shape = tuple(x0.shape)
    d = $DIM
    outer, n, inner = math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:])
    y = torch.empty(shape, dtype=$OUT_DTYPE, device=x0.device)
    lanes = outer * inner
    if y.numel():
        wide = (n + $CHUNK) * inner > 2**31 - 1   # a chunk's offsets along n past 32 bits
        _scan_kernel[(triton.cdiv(lanes, $ROWS),)]($CALL, y, lanes, n, inner, CHUNK=$CHUNK, ROWS=$ROWS,
                                                   REV=$REV, MIRROR=$MIRROR, SHIFT=$SHIFT, WIDE=wide,
                                                   num_warps=$num_warps)
    return y


import torch.nn as nn  # noqa: E402,F401 - what the reference's constructor may use


class ModelNew(torch.nn.Module):
    $INIT

    def forward(self, $FORWARD):
        return cumulative($FORWARD_CALL)
'''

_SCANS = {"cumsum": ("a + b", "0.0"), "cumprod": ("a * b", "1.0")}   # op -> (combine, identity)
_NO_OPS = {"getitem", "clone", "alias", "detach", "contiguous", "lift_fresh_copy"}
_FILLS = {"zeros_like": 0.0, "ones_like": 1.0, "zeros": 0.0, "ones": 1.0, "new_zeros": 0.0, "new_ones": 1.0}


@dataclass
class ScanGraph:
    """A scan, ready to render: its operands (host expressions of full-shape tensors), numbers, the elementwise lines
    that make the scanned value, and how the scan runs."""

    op: str                        # "cumsum" | "cumprod"
    dim: int
    shape: tuple[int, ...]
    out_dtype: torch.dtype
    operands: list[tuple[str, torch.dtype]]
    numbers: list[str]
    lines: list[str]
    result: str
    rev: bool = False              # the scan's input is flipped along dim: a suffix scan
    flip_out: bool = False         # its output is flipped along dim
    exclusive: bool = False
    ops: list[str] = field(default_factory=list)

    def describe(self) -> str:
        shape = "x".join(map(str, self.shape))
        what = ("exclusive " if self.exclusive else "") + self.op
        if self.ops:
            what += f" of elementwise {' -> '.join(self.ops)}"
        order = {(True, True): " from the end (flip, scan, flip)", (True, False): " of the input flipped",
                 (False, True): ", flipped"}.get((self.rev, self.flip_out), "")
        ins = ", ".join(f"{e} {str(t).removeprefix('torch.')}" for e, t in self.operands)
        return f"{what} over dim {self.dim} of {shape} ({ins}){order}"


def _flip_dim(node, ndim: int) -> int | None:
    dims = schema_args(node).get("dims")
    return dims[0] % ndim if isinstance(dims, (list, tuple)) and len(dims) == 1 else None


def _strip(node):
    while isinstance(node, torch.fx.Node) and op_name(node) in _NO_OPS:
        node = node.args[0]
    return node


def _ancestors(node, stop: set) -> set:
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if not isinstance(n, torch.fx.Node) or n in seen or n in stop or n.op != "call_function":
            continue
        seen.add(n)
        todo.extend(n.all_input_nodes)
    return seen


def match_scan_graph(traced: Traced) -> ScanGraph | None:
    """The reference as [flip] scan [flip] of elementwise ops (or its exclusive form); None where it is not."""
    out = meta(traced.output)
    if out is None or out.dtype not in FLOATS or out.dim() == 0:
        return None
    nd = out.dim()
    used: set = set()
    node, flips_out = _strip(traced.output), []
    while isinstance(node, torch.fx.Node) and op_name(node) == "flip":
        used.add(node)
        flips_out.append(_flip_dim(node, nd))
        node = _strip(node.args[0])
    if not isinstance(node, torch.fx.Node):
        return None
    exclusive, fill_node = False, None
    if op_name(node) == "cat":
        a = schema_args(node)
        parts = [_strip(t) for t in a["tensors"]]
        d = a.get("dim", 0) % nd
        if len(parts) != 2 or not all(isinstance(t, torch.fx.Node) for t in parts):
            return None
        fill_node, scan = parts
        fm = meta(fill_node)
        if op_name(scan) not in _SCANS or op_name(fill_node) not in _FILLS or fm is None or fm.shape[d] != 1 or \
                _FILLS[op_name(fill_node)] != float(_SCANS[op_name(scan)][1]):
            return None
        sliced = _strip(schema_args(scan)["self"])
        if not isinstance(sliced, torch.fx.Node) or op_name(sliced) != "slice":
            return None
        sa = schema_args(sliced)
        src = meta(sa["self"])
        if src is None or src.dim() != nd or sa["dim"] % nd != d or (sa.get("start") or 0) != 0 or \
                sa.get("step", 1) != 1 or sa.get("end") not in (src.shape[d] - 1, -1):
            return None
        used |= {node, sliced}
        exclusive = True
        scan_in = sa["self"]
    elif op_name(node) in _SCANS:
        scan = node
        scan_in = schema_args(scan)["self"]
    else:
        return None
    used.add(scan)
    sa = schema_args(scan)
    d = sa["dim"] % nd
    if exclusive and d != schema_args(node)["dim"] % nd:
        return None
    scan_in, flips_in = _strip(scan_in), []
    while isinstance(scan_in, torch.fx.Node) and op_name(scan_in) == "flip":
        used.add(scan_in)
        flips_in.append(_flip_dim(scan_in, nd))
        scan_in = _strip(scan_in.args[0])
    if any(f != d for f in flips_in + flips_out):
        return None
    producer = _producer(traced, scan_in, tuple(out.shape), used)
    if producer is None:
        return None
    # every op computes the output or only feeds the exclusive form's fill (x.select(d, 0).unsqueeze(d))
    extra = _ancestors(fill_node, set()) if fill_node is not None else set()
    if any(n not in used and n not in extra and op_name(n) not in _NO_OPS for n in traced.ops):
        return None
    operands, numbers, lines, result, ops = producer
    return ScanGraph(op_name(scan), d, tuple(out.shape), out.dtype, operands, numbers, lines, result,
                     rev=len(flips_in) % 2 == 1, flip_out=len(flips_out) % 2 == 1, exclusive=exclusive, ops=ops)


def _producer(traced: Traced, src, shape: tuple, used: set):
    """The scanned value as elementwise lines of full-shape inputs (any dtype, read as fp32) and forward's
    numbers: (operands, numbers, lines, result, op names), or None. Adds the nodes it reads to `used`."""
    operands: list[tuple[str, torch.dtype]] = []
    numbers: list[str] = []
    names: dict = {}
    order = {n: i for i, n in enumerate(traced.ops)}
    nodes = sorted(_ancestors(src, set()), key=lambda n: order.get(n, -1))
    for inp in traced.inputs:
        if inp.node not in {a for n in nodes for a in n.all_input_nodes} | {src}:
            continue
        if inp.kind == "number":
            names[inp.node] = f"s{len(numbers)}"
            numbers.append(inp.name)
        elif tuple(inp.shape) == shape:
            names[inp.node] = f"x{len(operands)}"
            operands.append((inp.name if inp.kind == "tensor" else self_attr(inp.name), inp.dtype))
        else:
            return None
    lines, ops = [], []
    for node in nodes:
        name = op_name(node)
        m = meta(node)
        if m is None or tuple(m.shape) != shape:
            return None
        a = schema_args(node)
        if name in _NO_OPS or (name in ("_to_copy", "to") and set(node.kwargs) <= {"dtype"}):
            names[node] = names.get(node.args[0])
            if names[node] is None:
                return None
            continue
        if name not in _OPS or (name == "div" and a.get("rounding_mode") is not None):
            return None
        keys, emit = _OPS[name]
        values = []
        for k in keys:
            v = a.get(k)
            if isinstance(v, torch.fx.Node):
                if v not in names:
                    return None
                v = names[v]
            values.append(v)
        names[node] = f"v{len(lines)}"
        lines.append(f"v{len(lines)} = {emit(*values)}")
        ops.append(name)
    if src not in names or not operands:
        return None
    used |= set(nodes)
    return operands, numbers, lines, names[src], ops


# -- the kernel file ------------------------------------------------------------------------------------------------

def render(g: ScanGraph, traced: Traced, p: dict) -> str:
    """The candidate file for `g` at parameters `p` (without the space's header line)."""
    xs = [f"x{i}" for i in range(len(g.operands))]
    ss = [f"s{i}" for i in range(len(g.numbers))]
    combine, identity = _SCANS[g.op]
    if p["PREFETCH"]:   # chunk c + 1's loads issued before chunk c is scanned, held in the inputs' own dtypes
        first = "\n".join(["_, rmask0, offs0 = _chunk(0, n, base, lmask, step, cols, CHUNK, REV, SHIFT)"] +
                          [f"{x}_next = tl.load({x}_ptr + offs0, mask=rmask0, other=0)" for x in xs])
        loads = "\n".join([f"{x} = {x}_next.to(tl.float32)" for x in xs] +
                           ["_, rmask1, offs1 = _chunk(c + 1, n, base, lmask, step, cols, CHUNK, REV, SHIFT)"] +
                           [f"{x}_next = tl.load({x}_ptr + offs1, mask=rmask1, other=0)" for x in xs])
    else:
        first = ""
        loads = "\n".join(f"{x} = tl.load({x}_ptr + offs, mask=rmask, other=0).to(tl.float32)" for x in xs)
    per = max(1, p["ROWS"] * p["CHUNK"] // (32 * p["num_warps"]))
    out_dtype = "x0.dtype" if g.operands[0][1] == g.out_dtype else str(g.out_dtype)
    return fill("import math\n\n" + _PROLOGUE + _TEMPLATE, {
        "WHAT": f"{g.describe()}; a {p['ROWS']} x {p['CHUNK']} tile a step, {per} values a thread",
        "COMBINE": combine, "IDENTITY": identity, "PARAMS": ", ".join([f"{x}_ptr" for x in xs] + ss),
        "LOADS": loads, "PRELOAD": first, "LINES": "\n".join(g.lines) or "pass", "RESULT": g.result,
        "ARGS": ", ".join(xs + ss), "CONTIGUOUS": "\n".join(f"{x} = {x}.contiguous()" for x in xs),
        "DIM": g.dim, "OUT_DTYPE": out_dtype, "CALL": ", ".join(xs + ss), "CHUNK": p["CHUNK"], "ROWS": p["ROWS"],
        "REV": g.rev, "MIRROR": g.rev != g.flip_out, "SHIFT": g.exclusive, "num_warps": p["num_warps"],
        "INIT": traced.init_source or DEFAULT_INIT, "FORWARD": ", ".join(traced.forward_args) or "*inputs",
        "FORWARD_CALL": ", ".join([e for e, _ in g.operands] + g.numbers),
    })


PARAMS = {"CHUNK": [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192],
          "ROWS": [1, 2, 4, 8, 16, 32, 64, 128],
          "num_warps": [1, 2, 4, 8, 16],
          "PREFETCH": [False, True]}

# values of the tile a thread holds. sm_90 compiles at 32768-long fp32 rows (the reverse, exclusive and masked
# scans): 32 a thread took 59-169 registers and never spilled up to 8 warps; on 16 warps (128 registers a thread)
# 32 spilled 8-48 bytes where ROWS > 1, 16 did not
MAX_PER_THREAD = 32


def _lanes(g: ScanGraph) -> tuple[int, int, int]:
    """(lanes, n, inner): the lanes scanned, each lane's length and the stride between its positions."""
    n = g.shape[g.dim]
    inner = math.prod(g.shape[g.dim + 1:])
    return math.prod(g.shape) // max(n, 1), n, inner


def _default(g: ScanGraph) -> dict:
    lanes, n, inner = _lanes(g)
    if inner == 1:
        # rows of the last dim: one row a program, contiguous chunks of up to 1024 on 4 warps (8 values a thread),
        # the next chunk prefetched. H200 at KernelBench's 32768 x 32768 fp32 (copy 4.25 TB/s): 4.07-4.12 TB/s on
        # cumsum, cumprod, exclusive and masked cumsum, 3.83 on the reverse; chunks of 4096 on 8 warps without
        # prefetch made 3.98 but fell to 2.87-2.97 on the reverse and exclusive scans; 16 warps 2.9-3.5
        chunk = min(max(next_pow2(n), 16), 1024)
        return {"CHUNK": chunk, "ROWS": 1, "num_warps": max(1, min(4, chunk // 256)), "PREFETCH": True}
    rows = min(max(next_pow2(inner), 1), 32)   # 32 neighbouring lanes: 128 contiguous bytes of fp32 a position
    chunk = min(max(next_pow2(n), 16), max(16, 2048 // rows))
    return {"CHUNK": chunk, "ROWS": rows, "num_warps": 4, "PREFETCH": False}


def cumulative_space(g: ScanGraph, traced: Traced) -> SearchSpace:
    lanes, n, inner = _lanes(g)

    def limits(p: dict, case) -> str | None:
        tile = p["ROWS"] * p["CHUNK"]
        if tile < 32 * p["num_warps"]:
            return f"a {p['ROWS']} x {p['CHUNK']} tile leaves threads of {p['num_warps']} warps idle"
        most = MAX_PER_THREAD if p["num_warps"] <= 8 else MAX_PER_THREAD // 2   # 16 warps: 128 registers a thread
        if tile // (32 * p["num_warps"]) > most:
            return f"{tile // (32 * p['num_warps'])} values a thread (at most {most} on {p['num_warps']} warps: " \
                   f"registers)"
        if p["CHUNK"] > max(16, next_pow2(n)):
            return f"CHUNK {p['CHUNK']} is past the scanned length {n}"
        if p["ROWS"] > max(1, next_pow2(lanes)):
            return f"ROWS {p['ROWS']} is past the {lanes} lanes"
        return None

    moves = []
    for c in PARAMS["CHUNK"]:
        moves.append(Move(f"CHUNK {c}", f"Scan {c} positions of each lane a step (fewer, longer steps carry less "
                          f"often; shorter ones hold fewer values a thread).", {"CHUNK": c}))
    for r in PARAMS["ROWS"]:
        what = "rows" if inner == 1 else "neighbouring lanes (the coalesced axis along a middle dim)"
        moves.append(Move(f"{r} rows a program", f"Each program scans {r} {what}: "
                          f"{math.ceil(lanes / r)} programs.", {"ROWS": r}))
    for w in PARAMS["num_warps"]:
        moves.append(Move(f"{w} warps", f"{w} warps a program share the tile's scan.", {"num_warps": w}))
    moves.append(Move("prefetch the next chunk", "Issue the next chunk's loads before scanning this one, so they are "
                      "in flight during the scan and the carry (one more tile of registers).", {"PREFETCH": True}))
    moves.append(Move("no prefetch", "Load each chunk when it is scanned.", {"PREFETCH": False}))
    return SearchSpace(params=PARAMS, default=_default(g), template=lambda p: render(g, traced, p), moves=moves,
                       tuning=["CHUNK", "num_warps"], cases=(Case("cumulative", {}, timed=True),), limits=limits)


def match_cumulative(traced: Traced):
    """A cumsum or cumprod (with a producer, flips, or the exclusive form) as the generated scan family's Match."""
    g = match_scan_graph(traced)
    if g is None:
        return None
    return Match("cumulative", g.describe(), cumulative_space(g, traced))
