"""Cross-entropy search space: an online logsumexp per row, then one tiny kernel for the mean.

Bytes: the floor is one read of the logits (spec.bytes_moved): at the timed bf16 8192 x 32000, 524 MB, 125 us
at 4.2 TB/s. `online` meets it: one sweep keeps a running max and a rescaled running sum per lane, then the
target's logit is one more element. `two_sweep` (max, then sum of exp) reads each row twice (the second read
mostly from L2: a 32000-wide bf16 row is 64 KB). `split` cuts each row into SPLIT slices reduced by separate
programs to (max, sum of exp) and merged in the final kernel: more programs when rows are few and wide
(2048 x 128256), same bytes. Every variant writes 4 bytes of loss per row; the mean kernel reads them back
with the targets (12 bytes a row) and divides by the number of targets not ignored. How the starter was
chosen, with the figures: NOTES.md.
"""
from __future__ import annotations

from kernelsearch.families.cross_entropy.spec import CASES
from kernelsearch.families.space import (
    PIPELINED_ROWS,
    SM90_SHARED_MAX,
    Move,
    SearchSpace,
    evict,
    fill,
    next_pow2,
    num_programs,
    per_thread,
    preset,
    programs_per_sm,
    register_limit,
    tl_exp,
    tl_log,
)
from kernelsearch.judge.problem import Case

_PROLOGUE = '''import torch
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # jit code may only read constexpr globals
LN2 = tl.constexpr(0.6931471805599453)
'''

_TARGET = '''
        # the target's logit: one element; an ignored target adds 0 and is not counted (the mean kernel)
        t = tl.load(t_ptr + row)
        valid = t != ignore_index
        x_t = tl.load(x_row + t, mask=valid & (t >= 0) & (t < n_cols), other=0.0).to(tl.float32)
        tl.store(loss_ptr + row, tl.where(valid, lse - x_t, 0.0))
'''

_ONLINE = '''

@triton.jit
def _ce_online_kernel(x_ptr, t_ptr, loss_ptr, n_rows, n_cols, x_stride, ignore_index,
                      BLOCK: tl.constexpr, PERSISTENT: tl.constexpr):
    # One sweep per row, n_cols * size bytes, the floor. Each chunk's max is reduced first and the running sum
    # is rescaled once per chunk (a scalar exp): one exp per logit. (Per-lane running maxima, `online_lanes`,
    # need a second exp per logit for the rescale: 524M extra MUFU ops at the timed size, about 0.1 ms.)
    offs = tl.arange(0, BLOCK)
    step = tl.num_programs(0) if PERSISTENT else n_rows
    for row in range(tl.program_id(0), n_rows, step):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        m = float("-inf")
        s = 0.0
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")$X_HINT).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * $EXP_SCALAR + tl.sum($EXP_CHUNK, axis=0)
            m = m_new
        lse = m + $LOG_SCALAR

        $TARGET

def _launch(x, t, out, n_rows, n_cols, ignore_index):
    loss = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    grid = (min(n_rows, _num_programs(x)),) if $PERSISTENT else (n_rows,)
    _ce_online_kernel[grid](x, t, loss, n_rows, n_cols, x.stride(0), ignore_index,
                            BLOCK=$BLOCK, PERSISTENT=$PERSISTENT, num_warps=$num_warps)
    _finish(loss, t, out, n_rows, ignore_index)
'''

_PIPELINED = '''

@triton.jit
def _ce_pipelined_kernel(x_ptr, t_ptr, loss_ptr, n_rows, n_cols, x_stride, ignore_index, BLOCK: tl.constexpr):
    # Persistent, each program's rows whole in registers in turn, pipelined by one row: the next row's logits
    # are loaded (in their own dtype: 16 registers a thread for a 64 KB bf16 row at 32 warps) before this row's
    # max and sum of exp, so its loads are in flight through this row's reductions. One read of each logit.
    $PIPELINED_ROWS
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        m = tl.max(x, axis=0)
        lse = m + $LOG_PIPE

        $TARGET

def _launch(x, t, out, n_rows, n_cols, ignore_index):
    block = max(triton.next_power_of_2(n_cols), 16)
    if block * x.element_size() > 65536:
        # past a 64 KB row (bf16 32768 columns, fp32 16384) two rows no longer fit in a program's registers:
        # the one-sweep online kernel takes these rows
        return _launch_online(x, t, out, n_rows, n_cols, ignore_index)
    loss = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    grid = (min(n_rows, _num_programs(x)),)
    _ce_pipelined_kernel[grid](x, t, loss, n_rows, n_cols, x.stride(0), ignore_index, BLOCK=block,
                               num_warps=$num_warps)
    _finish(loss, t, out, n_rows, ignore_index)
'''

# rows past 64 KB: the online sweep with its launch knobs fixed at the starter's, as `_launch_online` (its other
# knobs, the stages, exp2 and hints, are the point's own)
_PIPELINED += preset(_ONLINE.replace("def _launch(", "def _launch_online("),
                     {"PERSISTENT": False, "BLOCK": 2048, "num_warps": 4})

_ONLINE_LANES = '''

@triton.jit
def _ce_online_lanes_kernel(x_ptr, t_ptr, loss_ptr, n_rows, n_cols, x_stride, ignore_index,
                            BLOCK: tl.constexpr, PERSISTENT: tl.constexpr):
    # One sweep per row: a running max and a running sum of exp rescaled to it, per lane (online softmax):
    # n_cols * size bytes read per row, the floor; two exps per logit, no reduction inside the loop.
    offs = tl.arange(0, BLOCK)
    step = tl.num_programs(0) if PERSISTENT else n_rows
    for row in range(tl.program_id(0), n_rows, step):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")$X_HINT).to(tl.float32)
            m_new = tl.maximum(m, x)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            s = s * $EXP_ALPHA + $EXP_X
            m = m_new
        m_row = tl.max(m, axis=0)
        lse = m_row + $LOG_S

        $TARGET

def _launch(x, t, out, n_rows, n_cols, ignore_index):
    loss = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    grid = (min(n_rows, _num_programs(x)),) if $PERSISTENT else (n_rows,)
    _ce_online_lanes_kernel[grid](x, t, loss, n_rows, n_cols, x.stride(0), ignore_index,
                            BLOCK=$BLOCK, PERSISTENT=$PERSISTENT, num_warps=$num_warps)
    _finish(loss, t, out, n_rows, ignore_index)
'''

_TWO_SWEEP = '''

@triton.jit
def _ce_two_sweep_kernel(x_ptr, t_ptr, loss_ptr, n_rows, n_cols, x_stride, ignore_index,
                         BLOCK: tl.constexpr, PERSISTENT: tl.constexpr):
    # Sweep 1 finds the row max, sweep 2 sums exp(x - max): two reads of the row, no rescaling.
    offs = tl.arange(0, BLOCK)
    step = tl.num_programs(0) if PERSISTENT else n_rows
    for row in range(tl.program_id(0), n_rows, step):
        x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            m = tl.maximum(m, tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32))
        m_row = tl.max(m, axis=0)
        s = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=$num_stages):
            cols = start + offs
            x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")$X_HINT).to(tl.float32)
            s += $EXP_ROW
        lse = m_row + $LOG_SUM

        $TARGET

def _launch(x, t, out, n_rows, n_cols, ignore_index):
    loss = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    grid = (min(n_rows, _num_programs(x)),) if $PERSISTENT else (n_rows,)
    _ce_two_sweep_kernel[grid](x, t, loss, n_rows, n_cols, x.stride(0), ignore_index,
                               BLOCK=$BLOCK, PERSISTENT=$PERSISTENT, num_warps=$num_warps)
    _finish(loss, t, out, n_rows, ignore_index)
'''

_SPLIT = '''

@triton.jit
def _ce_partial_kernel(x_ptr, part_ptr, n_cols, x_stride, n_split, slice_len, BLOCK: tl.constexpr):
    # One program per (row, slice): the slice's max and sum of exp relative to it (online, one read).
    row = tl.program_id(0)
    sl = tl.program_id(1)
    x_row = x_ptr + tl.cast(row, tl.int64) * x_stride
    lo = sl * slice_len
    hi = tl.minimum(lo + slice_len, n_cols)
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(lo, hi, BLOCK, num_stages=$num_stages):
        cols = start + offs
        x = tl.load(x_row + cols, mask=cols < hi, other=float("-inf")$X_HINT).to(tl.float32)
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * $EXP_ALPHA + $EXP_X
        m = m_new
    m_row = tl.max(m, axis=0)
    m_row_safe = tl.where(m_row == float("-inf"), 0.0, m_row)
    s_row = tl.sum(s * $EXP_LANE_SAFE, axis=0)
    out = part_ptr + (tl.cast(row, tl.int64) * n_split + sl) * 2
    tl.store(out, m_row)
    tl.store(out + 1, s_row)


@triton.jit
def _ce_split_finish_kernel(part_ptr, x_ptr, t_ptr, out_ptr, n_rows, n_cols, x_stride, n_split,
                            ignore_index, ROWS: tl.constexpr, SPLIT: tl.constexpr):
    # One program: merges each row's slices into its logsumexp, subtracts the target's logit, and takes
    # the mean over the targets not ignored. Reads 8 * n_split + 12 bytes a row.
    rows_in = tl.arange(0, ROWS)
    sl = tl.arange(0, SPLIT)
    total = tl.zeros([ROWS], tl.float32)
    count = tl.zeros([ROWS], tl.float32)
    for start in range(0, n_rows, ROWS):
        rows = start + rows_in
        row_ok = rows < n_rows
        ok = row_ok[:, None] & (sl[None, :] < n_split)
        base = part_ptr + (rows.to(tl.int64)[:, None] * n_split + sl[None, :]) * 2
        pm = tl.load(base, mask=ok, other=float("-inf"))
        ps = tl.load(base + 1, mask=ok, other=0.0)
        m = tl.max(pm, axis=1)
        m = tl.where(m == float("-inf"), 0.0, m)
        lse = m + $LOG_MERGE
        t = tl.load(t_ptr + rows, mask=row_ok, other=ignore_index)
        valid = row_ok & (t != ignore_index)
        x_t = tl.load(x_ptr + rows.to(tl.int64) * x_stride + t, mask=valid & (t >= 0) & (t < n_cols), other=0.0)
        total += tl.where(valid, lse - x_t.to(tl.float32), 0.0)
        count += tl.where(valid, 1.0, 0.0)
    tl.store(out_ptr, (tl.sum(total, axis=0) / tl.sum(count, axis=0)).to(out_ptr.dtype.element_ty))


def _launch(x, t, out, n_rows, n_cols, ignore_index):
    n_split = max(min($SPLIT, triton.cdiv(n_cols, $BLOCK)), 1)
    slice_len = triton.cdiv(triton.cdiv(n_cols, n_split), $BLOCK) * $BLOCK
    n_split = triton.cdiv(n_cols, slice_len)
    part = torch.empty((n_rows, n_split, 2), dtype=torch.float32, device=x.device)
    _ce_partial_kernel[(n_rows, n_split)](x, part, n_cols, x.stride(0), n_split, slice_len, BLOCK=$BLOCK,
                                          num_warps=$num_warps)
    _ce_split_finish_kernel[(1,)](part, x, t, out, n_rows, n_cols, x.stride(0), n_split, ignore_index,
                                  ROWS=max(1024 // triton.next_power_of_2(n_split), 1),
                                  SPLIT=triton.next_power_of_2(n_split), num_warps=8)
'''

_FINISH = '''

@triton.jit
def _ce_mean_kernel(loss_ptr, t_ptr, out_ptr, n_rows, ignore_index, BLOCK: tl.constexpr):
    # One program: the mean of the per-row losses over the targets not ignored (12 bytes a row).
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        rows = start + offs
        ok = rows < n_rows
        total += tl.load(loss_ptr + rows, mask=ok, other=0.0)
        t = tl.load(t_ptr + rows, mask=ok, other=ignore_index)
        count += tl.where(ok & (t != ignore_index), 1.0, 0.0)
    tl.store(out_ptr, (tl.sum(total, axis=0) / tl.sum(count, axis=0)).to(out_ptr.dtype.element_ty))


def _finish(loss, t, out, n_rows, ignore_index):
    _ce_mean_kernel[(1,)](loss, t, out, n_rows, ignore_index, BLOCK=1024, num_warps=8)
'''

_EPILOGUE = '''

$NUM_PROGRAMS


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    if logits.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"cross_entropy kernel: unsupported dtype {logits.dtype}")
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy kernel: logits {tuple(logits.shape)} and targets "
                         f"{tuple(targets.shape)}; expected (N, C) and (N,)")
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    targets = targets.contiguous()
    n_rows, n_cols = logits.shape
    out = torch.empty((), dtype=logits.dtype, device=logits.device)
    if n_rows == 0:
        return out.fill_(float("nan"))
    _launch(logits, targets, out, n_rows, n_cols, ignore_index)
    return out


class ModelNew(torch.nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cross_entropy(logits, targets, self.ignore_index)
'''



def _template(p: dict) -> str:
    exp = lambda x: tl_exp(x, p["exp2"])  # noqa: E731
    log = lambda x: tl_log(x, p["exp2"])  # noqa: E731
    body = {"online": _ONLINE, "online_lanes": _ONLINE_LANES, "two_sweep": _TWO_SWEEP, "split": _SPLIT,
            "pipelined": _PIPELINED}[p["variant"]]
    finish = "" if p["variant"] == "split" else _FINISH
    return fill(_PROLOGUE + body + finish + _EPILOGUE, {
        "TARGET": _TARGET, "PIPELINED_ROWS": PIPELINED_ROWS,
        "EXP_ALPHA": exp("m - m_safe"), "EXP_X": exp("x - m_safe"),
        "EXP_ROW": exp("x - m_row"),
        "EXP_LANE_SAFE": exp("m - m_row_safe"),
        # m starts at -inf and the first chunk always holds a real logit, so m_new is finite here
        "EXP_SCALAR": exp("m - m_new"), "EXP_CHUNK": exp("x - m_new"),
        "LOG_SCALAR": log("s"),
        "LOG_S": log("tl.sum(s * " + exp("m - m_row") + ", axis=0)"),
        "LOG_SUM": log("tl.sum(s, axis=0)"),
        "LOG_PIPE": log("tl.sum(" + exp("x - m") + ", axis=0)"),
        "LOG_MERGE": log("tl.sum(ps * " + exp("pm - m[:, None]") + ", axis=1)"),
        "X_HINT": evict("evict_first", p["cache_hints"]),
        "BLOCK": p["BLOCK"], "PERSISTENT": p["persistent"], "SPLIT": p["SPLIT"],
        "num_warps": p["num_warps"], "num_stages": p["num_stages"],
        "NUM_PROGRAMS": num_programs(programs_per_sm(p, p["persistent"] or p["variant"] == "pipelined")),
    })


PARAMS = {
    "variant": ["online", "online_lanes", "two_sweep", "split", "pipelined"],
    "BLOCK": [1024, 2048, 4096, 8192, 16384, 32768],
    "num_warps": [4, 8, 16, 32],
    "num_stages": [1, 2, 3, 4],
    "persistent": [False, True],
    "programs_per_sm": [1, 2, 4, 8],
    "exp2": [False, True],
    "cache_hints": [False, True],
    "SPLIT": [2, 4, 8, 16, 32],
}

# the starter: one online sweep, 4-warp programs (NOTES.md; `pipelined`, softmax's starter, is slower here and
# kept as a move, so the search can see it lose)
DEFAULT = {"variant": "online", "BLOCK": 2048, "num_warps": 4, "num_stages": 1, "persistent": False,
           "programs_per_sm": 4, "exp2": True, "cache_hints": False, "SPLIT": 8}


def _moves() -> list[Move]:
    split = lambda p: p["variant"] == "split"  # noqa: E731
    not_split = lambda p: p["variant"] != "split"  # noqa: E731
    moves = [
        Move("one sweep with an online logsumexp",
             "Reduce each chunk's max, rescale the running sum once per chunk: each logit is read once (rows * "
             "vocab * size bytes, the floor) and costs one exp.", {"variant": "online"}),
        Move("online logsumexp per lane",
             "Keep a running max and a rescaled sum per lane, merged once at the end: no reduction inside the "
             "loop, but two exps per logit (the rescale is per lane).", {"variant": "online_lanes"}),
        Move("max sweep then sum sweep",
             "Find the row max first, then sum exp(x - max): no rescaling multiplies, but two reads of each "
             "row (the second mostly from L2).", {"variant": "two_sweep"}),
        Move("split each row across programs",
             "Reduce SPLIT slices of each row in separate programs to (max, sum of exp) and merge them in the "
             "final kernel: more programs in flight when rows are few or very wide, same bytes.",
             {"variant": "split"}),
        Move("whole rows in registers, the next row loading while this one reduces",
             "One persistent 32-warp program per SM holds each row whole in registers and issues the next row's "
             "loads before this row's max and sum of exp: one read of each logit, with memory busy through the "
             "reductions (rows past 64 KB fall back to the online sweep).",
             {"variant": "pipelined", "num_warps": 32, "programs_per_sm": 1}),
        Move("exp2 with a pre-scaled log2(e)",
             "exp2(x * log2 e) is one MUFU.EX2 instruction; exp is that plus a multiply, and the exps are most of "
             "the arithmetic here.", {"exp2": True}),
        Move("persistent grid",
             "A few programs per SM loop over rows: fewer launches of short programs and a smaller tail.",
             {"persistent": True}, when=not_split),
        Move("one program per row", "Launch one program per row and let the hardware schedule them.",
             {"persistent": False}, when=not_split),
        Move("evict the logits first",
             "The logits stream through once: load them with evict_first so they do not evict anything reused.",
             {"cache_hints": True}),
        Move("no cache hints", "Plain loads: let L2 manage itself.", {"cache_hints": False}),
    ]
    for b in PARAMS["BLOCK"]:
        for w in (4, 8, 16, 32):
            if b // (32 * w) < 1 or b // (32 * w) > 64:
                continue
            moves.append(Move(f"BLOCK {b} with {w} warps",
                              f"Chunks of {b} logits per iteration, {w} warps: {b // (32 * w)} elements per thread "
                              f"per load; a 32000 vocabulary takes {-(-32000 // b)} iterations.",
                              {"BLOCK": b, "num_warps": w}))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"pipeline loads {s} deep",
                          f"num_stages={s} on the chunk loop so the next chunk's loads are in flight while the "
                          f"current one is reduced.", {"num_stages": s}))
    for n in PARAMS["programs_per_sm"]:
        moves.append(Move(f"{n} persistent programs per SM",
                          f"{n} resident programs per SM: more hides DRAM latency.", {"programs_per_sm": n},
                          when=lambda p: p["persistent"] and p["variant"] != "split"))
    for n in PARAMS["SPLIT"]:
        moves.append(Move(f"{n} slices per row",
                          f"Split each row into {n} slices: {n}x the programs, 8 * {n} bytes of partials a row.",
                          {"SPLIT": n}, when=split))
    return moves


# fp32 arrays of BLOCK a chunk loop keeps live per variant: the chunk alone (online: its exps replace it), the chunk
# and a running max or sum per lane (two_sweep), or both per lane (online_lanes, split)
_CHUNK_ARRAYS = {"online": 1, "two_sweep": 2, "online_lanes": 3, "split": 3}
_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def limits(p: dict, case: Case) -> str | None:
    """Why `p` cannot run at `case` on an H200, or None (space.py's feasibility; calibrated against sm_90 compiles
    with bench/feasibility.py cross_entropy: its figures in NOTES.md)."""
    size = _SIZE.get(case.dtype, 4)
    variant, block, warps, stages = p["variant"], p["BLOCK"], p["num_warps"], p["num_stages"]
    if variant == "pipelined":
        row = max(next_pow2(case.params["vocab"]), 16)
        if row * size > 65536:   # the launcher hands these rows to the online sweep at the starter's knobs
            variant, block, warps = "online", 2048, 4
        else:   # a row in fp32 and the next one in its own dtype, on the program's threads
            return register_limit(per_thread(row, warps) * (4 + size) // 4, warps,
                                  f"a row of {row} and the next on {warps} warps")
    # tl.range(num_stages=s) keeps s - 1 chunks in flight through shared memory (checked: 4096-wide fp32 chunks at
    # 4 stages, 49168 B)
    shared = (stages - 1) * block * size
    if shared > SM90_SHARED_MAX:
        return (f"{stages} stages of {block}-wide {case.dtype} chunks: {shared} B of shared memory > "
                f"{SM90_SHARED_MAX} B (227 KB)")
    return register_limit(_CHUNK_ARRAYS[variant] * per_thread(block, warps), warps,
                          f"chunks of {block} on {warps} warps")


SPACE = SearchSpace(params=PARAMS, default=DEFAULT, template=_template, moves=_moves(),
                    tuning=["num_warps", "num_stages", "BLOCK", "programs_per_sm", "SPLIT"],
                    cases=CASES, limits=limits)
