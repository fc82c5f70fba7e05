"""Matmul search space: tile shapes, warps, pipeline depth, grouped tile order, persistent grids, TMA.

The work is 2 * M * N * K flops (spec.flops): 137 GFLOP at the timed bf16 4096^3, 0.2 ms at 690 TFLOP/s.
Bytes are not the limit (A and B are 32 MB each) but how often tiles are re-read is: each BM x BN tile of C
reads BM * K + K * BN elements, so A crosses L2 N / BN times and B M / BM times (at 128 x 256 tiles: 16 and
32 times, 1.6 GB of L2 traffic); the grouped order (GROUP_M tiles down before moving right) keeps the A rows
and B columns of neighbouring programs in L2 so DRAM sees them about once.
- `tiled`: one program per C tile, pointer loads (boundary rows wrap, K masked), the loop pipelined
  num_stages deep (cp.async into shared memory, wgmma on Hopper).
- `persistent`: one program per SM walks the tiles (stride = grid size), so there is no launch tail and the
  next tile's loads overlap the current epilogue.
- `tma` / `tma_persistent`: the same with tensor descriptors: the TMA engine copies tiles into shared memory
  (no address arithmetic in registers, hardware bounds handling), optional warp specialization of the K loop
  (a producer warp issues copies while the consumers run wgmma) and a split epilogue store that halves the
  shared memory the C tile needs. TMA needs 16-byte aligned row strides; other shapes fall back to `tiled`.
fp32 inputs: `fp32_precision` "ieee" (fp32 FMAs, no TF32, as torch.matmul computes by default) or "tf32x3" (three
TF32 tensor-core products, hi*hi + hi*lo + lo*hi: nearly fp32 accuracy, NOTES.md has the error figures), the starter
at an fp32 problem's shape (`_shaped`); the family's own default, tuned at bf16, renders "ieee".
Batched products (torch.bmm, torch.matmul on 3-D/4-D operands: attention's q @ k^T and p @ v; KernelBench's batched
matmuls) render the same template with `batched_template`: a `bmm` public function and the `tiled` kernel with a
batch axis (`_bmm_kernel`: program_id 1 and 2 the batch dims, each operand's batch strides passed, 0 along a
broadcast dim, and any row/column strides, so k^T is read through its transposed view without a copy). The other
variants have no batch axis: `limits` refuses them at a case with a `batch` size, and the `shaped` rule starts a
batched problem from `tiled`.
Split-K (`split_k` > 1, `tiled` and `gemv`): K cut into ranges, one program per (tile, range) writing an fp32 partial
tile to a workspace, a second kernel summing the partials in order (no atomics); for products of fewer 64 x 64 tiles
than SMs and a long K (`_shaped`). `gemv`: a matrix-vector kernel (N = 1 or M = 1; no tl.dot, vector loads, fp32 lane
accumulators), bound by the bytes of A; other shapes run a canonical `tiled` fallback.
How the starter was chosen, with the figures: NOTES.md. The module is long because the four variants' templates,
the batched kernel and the feasibility model calibrated against them live together, as in every family's space.py.
"""
from __future__ import annotations

from kernelsearch.families.matmul.spec import CASES
from kernelsearch.families.space import (
    FP32_DEPTH,
    Move,
    SearchSpace,
    fill,
    num_programs,
    per_thread,
    register_limit,
    shared_limit,
)

_PROLOGUE = '''import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


$FP32_DEPTH


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # grouped order: GROUP_M tiles down a column of tiles before moving right, so the programs running at
    # once share A rows and B columns in L2
    in_group = GROUP_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_M
    size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % in_group) % size_m
    pid_n = (tile_id % in_group) // size_m
    return pid_m, pid_n


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   PRECISION: tl.constexpr):
    # One program per BM x BN tile of C; the K loop is software-pipelined num_stages deep.
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    # rows and columns past the edge wrap around (their results are masked at the store): no load masks
    # on M and N, only on the K tail
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am.to(tl.int64)[:, None] * s_am + offs_k[None, :] * s_ak
    b_ptrs = b_ptr + offs_k[:, None] * s_bk + offs_bn.to(tl.int64)[None, :] * s_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + offs_cm.to(tl.int64)[:, None] * s_cm + offs_cn[None, :] * s_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def _launch_tiled(a, b, c, M, N, K, precision):
    grid = (triton.cdiv(M, $BM) * triton.cdiv(N, $BN),)
    _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), BM=$BM, BN=$BN, BK=$BK, GROUP_M=$GROUP_M,
                         PRECISION=precision, num_warps=$num_warps, num_stages=_depth($num_stages, a))
'''

_TILED = '''

def _launch(a, b, c, M, N, K, precision):
    _launch_tiled(a, b, c, M, N, K, precision)
'''

_PERSISTENT = '''

@triton.jit
def _matmul_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                              PRECISION: tl.constexpr):
    # One program per SM (times PROGRAMS_PER_SM) walks the tiles with a stride of the grid size: no launch
    # tail, and the next tile's first loads overlap this tile's epilogue.
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    offs_k = tl.arange(0, BK)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0), flatten=$FLATTEN):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_am = (pid_m * BM + tl.arange(0, BM)) % M
        offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
        a_ptrs = a_ptr + offs_am.to(tl.int64)[:, None] * s_am + offs_k[None, :] * s_ak
        b_ptrs = b_ptr + offs_k[:, None] * s_bk + offs_bn.to(tl.int64)[None, :] * s_bn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            k_left = K - k * BK
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
            a_ptrs += BK * s_ak
            b_ptrs += BK * s_bk
        offs_cm = pid_m * BM + tl.arange(0, BM)
        offs_cn = pid_n * BN + tl.arange(0, BN)
        c_ptrs = c_ptr + offs_cm.to(tl.int64)[:, None] * s_cm + offs_cn[None, :] * s_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def _launch(a, b, c, M, N, K, precision):
    tiles = triton.cdiv(M, $BM) * triton.cdiv(N, $BN)
    _matmul_persistent_kernel[(min(tiles, _num_programs(a)),)](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BM=$BM, BN=$BN, BK=$BK, GROUP_M=$GROUP_M, PRECISION=precision,
        num_warps=$num_warps, num_stages=_depth($num_stages, a))
'''

_TMA_STORE = {
    False: '''
c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
''',
    # two half-width stores: the C tile staged in shared memory is half the size, leaving room for a deeper
    # pipeline of A and B tiles
    True: '''
halves = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
c0, c1 = tl.split(halves)
c_desc.store([off_m, off_n], c0.to(c_desc.dtype))
c_desc.store([off_m, off_n + BN // 2], c1.to(c_desc.dtype))
''',
}

_TMA = '''

@triton.jit
def _matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                       PRECISION: tl.constexpr):
    # One program per tile; A and B tiles arrive by TMA (bounds handled by the copy engine, zero-filled).
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    off_m = pid_m * BM
    off_n = pid_n * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=$WARP_SPECIALIZE):
        a = a_desc.load([off_m, k])
        b = b_desc.load([k, off_n])
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    $TMA_STORE


def _launch(a, b, c, M, N, K, precision):
    if not _tma_ok(a, b, c):
        return _launch_tiled(a, b, c, M, N, K, precision)
    a_desc, b_desc, c_desc = _descriptors(a, b, c)
    grid = (triton.cdiv(M, $BM) * triton.cdiv(N, $BN),)
    _matmul_tma_kernel[grid](a_desc, b_desc, c_desc, M, N, K, BM=$BM, BN=$BN, BK=$BK, GROUP_M=$GROUP_M,
                             PRECISION=precision, num_warps=$num_warps, num_stages=_depth($num_stages, a))
'''

_TMA_PERSISTENT = '''

@triton.jit
def _matmul_tma_persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                                  GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    # Persistent programs over the tiles, TMA loads: the copy engine fetches the next tile's A and B while
    # this tile's epilogue runs.
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0), flatten=$FLATTEN,
                            warp_specialize=$WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = a_desc.load([off_m, k])
            b = b_desc.load([k, off_n])
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        $TMA_STORE


def _launch(a, b, c, M, N, K, precision):
    if not _tma_ok(a, b, c):
        return _launch_tiled(a, b, c, M, N, K, precision)
    a_desc, b_desc, c_desc = _descriptors(a, b, c)
    tiles = triton.cdiv(M, $BM) * triton.cdiv(N, $BN)
    _matmul_tma_persistent_kernel[(min(tiles, _num_programs(a)),)](
        a_desc, b_desc, c_desc, M, N, K, BM=$BM, BN=$BN, BK=$BK, GROUP_M=$GROUP_M, PRECISION=precision,
        num_warps=$num_warps, num_stages=_depth($num_stages, a))
'''

_TMA_HELPERS = '''

def _tma_ok(a, b, c):
    # TMA needs 16-byte aligned base addresses and row strides
    size = a.element_size()
    return all(t.data_ptr() % 16 == 0 and (t.stride(0) * size) % 16 == 0 for t in (a, b, c))


def _descriptors(a, b, c):
    c_block = [$BM, $BN // 2] if $SUBTILE else [$BM, $BN]
    return (TensorDescriptor.from_tensor(a, [$BM, $BK]), TensorDescriptor.from_tensor(b, [$BK, $BN]),
            TensorDescriptor.from_tensor(c, c_block))
'''

# Split-K (`split_k` > 1, the `tiled` and `gemv` variants): a product of few output tiles and a long K (KernelBench's
# 256 x 256 x 524288: 16 tiles of 64 x 64, a handful of SMs busy out of 132) cuts K into split_k ranges, one program
# per (tile, range), each writing its fp32 partial tile to a workspace [splits, M, N]; a second kernel sums the
# partials in split order and casts. No atomics: the same inputs give the same bits on every run.
_SPLIT = '''

# a split's K range keeps at least this many K steps; a shorter one is merged (the launcher clamps the split)
SPLIT_MIN_STEPS = $SPLIT_MIN_STEPS


def _splits(K, split, step):
    # (the splits launched, K per split): split_k ranges of whole `step`s, clamped so each holds SPLIT_MIN_STEPS
    steps = triton.cdiv(K, step)
    split = max(1, min(split, steps // SPLIT_MIN_STEPS))
    chunk = triton.cdiv(steps, split) * step
    return triton.cdiv(K, chunk), chunk


@triton.jit
def _splitk_reduce_kernel(ws_ptr, c_ptr, MN, N, s_cm, s_cn, SPLITS, BLOCK: tl.constexpr):
    # c = the sum of the SPLITS fp32 partials in ws [SPLITS, M, N], added in split order 0, 1, ..., then cast:
    # a fixed order, so the result is reproducible (no atomics)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    ws_ptrs = ws_ptr + offs
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, SPLITS):
        acc += tl.load(ws_ptrs, mask=mask, other=0.0)
        ws_ptrs += MN
    c_ptrs = c_ptr + (offs // N).to(tl.int64) * s_cm + (offs % N) * s_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _reduce_splits(ws, c, M, N):
    _splitk_reduce_kernel[(triton.cdiv(M * N, 1024),)](ws, c, M * N, N, c.stride(0), c.stride(1), ws.shape[0],
                                                       BLOCK=1024, num_warps=4)


@triton.jit
def _matmul_splitk_kernel(a_ptr, b_ptr, ws_ptr, M, N, K, K_SPLIT, s_am, s_ak, s_bk, s_bn,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                          PRECISION: tl.constexpr):
    # One program per (C tile, K range): program_id(0) the tile (grouped order), program_id(1) which K_SPLIT-long
    # range of K. Programs launched together share a range, so neighbouring tiles read the same slice of A and B
    # from L2. The fp32 partial tile goes to ws[program_id(1)]; _splitk_reduce_kernel sums the partials.
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid_m, pid_n = _tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    k_start = tl.program_id(1) * K_SPLIT
    k_len = tl.minimum(K - k_start, K_SPLIT)
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am.to(tl.int64)[:, None] * s_am + (k_start + offs_k).to(tl.int64)[None, :] * s_ak
    b_ptrs = b_ptr + (k_start + offs_k).to(tl.int64)[:, None] * s_bk + offs_bn.to(tl.int64)[None, :] * s_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(k_len, BK)):
        k_left = k_len - k * BK
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    ws_ptrs = ws_ptr + tl.program_id(1).to(tl.int64) * M * N + offs_cm.to(tl.int64)[:, None] * N + offs_cn[None, :]
    tl.store(ws_ptrs, acc, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def _launch_split(a, b, c, M, N, K, precision):
    splits, k_split = _splits(K, $SPLIT_K, $BK)
    if splits == 1:
        return _launch_tiled(a, b, c, M, N, K, precision)
    ws = torch.empty((splits, M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, $BM) * triton.cdiv(N, $BN), splits)
    _matmul_splitk_kernel[grid](a, b, ws, M, N, K, k_split, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                BM=$BM, BN=$BN, BK=$BK, GROUP_M=$GROUP_M, PRECISION=precision,
                                num_warps=$num_warps, num_stages=_depth($num_stages, a))
    _reduce_splits(ws, c, M, N)
'''

_TILED_SPLIT = '''

def _launch(a, b, c, M, N, K, precision):
    _launch_split(a, b, c, M, N, K, precision)
'''

# Matrix-vector (`gemv`): B one column (N = 1) or A one row (M = 1). Bytes bound it, not flops (KernelBench's
# 2048 x 1048576 fp32 A is 8.6 GB: 2.6 ms at 3.35 TB/s), and a tensor-core tile would be 1/BN used: each program
# streams gemv_rows rows of A (or gemv_block_k // 8 columns of B) with vector loads and FMAs into an fp32 lane
# accumulator, reduced once at the end; K split over programs (split_k) where the rows alone do not fill the device.
_GEMV = '''

@triton.jit
def _gemv_kernel(x_ptr, v_ptr, out_ptr, R, K, K_SPLIT, s_xr, s_xk, s_v, s_split, s_out,
                 RB: tl.constexpr, KB: tl.constexpr):
    # out[program_id(1), r] = sum over the program's K range of x[r, k] * v[k], for RB rows r a program. The
    # RB x KB accumulator's lanes each sum their own column of products (fp32 FMAs, no tl.dot), summed across
    # lanes once at the end; full KB steps unmasked along K (vector loads), the K tail masked.
    rows = tl.program_id(0) * RB + tl.arange(0, RB)
    row_ok = rows < R
    k_start = tl.program_id(1) * K_SPLIT
    k_len = tl.minimum(K - k_start, K_SPLIT)
    offs_k = tl.arange(0, KB)
    x_ptrs = x_ptr + rows.to(tl.int64)[:, None] * s_xr + (k_start + offs_k).to(tl.int64)[None, :] * s_xk
    v_ptrs = v_ptr + (k_start + offs_k).to(tl.int64) * s_v
    acc = tl.zeros((RB, KB), dtype=tl.float32)
    full = k_len // KB
    for k in range(0, full):
        x = tl.load(x_ptrs, mask=row_ok[:, None], other=0.0)
        v = tl.load(v_ptrs)
        acc += x.to(tl.float32) * v.to(tl.float32)[None, :]
        x_ptrs += KB * s_xk
        v_ptrs += KB * s_v
    k_left = k_len - full * KB
    if k_left > 0:
        x = tl.load(x_ptrs, mask=row_ok[:, None] & (offs_k[None, :] < k_left), other=0.0)
        v = tl.load(v_ptrs, mask=offs_k < k_left, other=0.0)
        acc += x.to(tl.float32) * v.to(tl.float32)[None, :]
    y = tl.sum(acc, axis=1)
    out_ptrs = out_ptr + tl.program_id(1).to(tl.int64) * s_split + rows.to(tl.int64) * s_out
    tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=row_ok)


def _launch(a, b, c, M, N, K, precision):
    if N == 1:     # c[:, 0] = A @ b[:, 0]: rows of A, contiguous along K
        x, s_x, v, s_v, out, s_out = a, (a.stride(0), a.stride(1)), b, b.stride(0), c, c.stride(0)
        rb, kb = $GEMV_ROWS, $GEMV_BLOCK_K
    elif M == 1:   # c[0, :] = B^T @ a[0, :]: columns of B, contiguous along the rows a program holds
        x, s_x, v, s_v, out, s_out = b, (b.stride(1), b.stride(0)), a, a.stride(1), c, c.stride(1)
        rb, kb = $GEMV_BLOCK_K // 8, $GEMV_ROWS * 8
    else:          # not a matrix-vector product: the tiled kernel
        return _launch_split(a, b, c, M, N, K, precision)
    R = M if N == 1 else N
    splits, k_split = _splits(K, $SPLIT_K, kb)
    if splits == 1:
        _gemv_kernel[(triton.cdiv(R, rb), 1)](x, v, out, R, K, k_split, *s_x, s_v, 0, s_out, RB=rb, KB=kb,
                                              num_warps=$num_warps)
        return
    ws = torch.empty((splits, R), dtype=torch.float32, device=a.device)
    _gemv_kernel[(triton.cdiv(R, rb), splits)](x, v, ws, R, K, k_split, *s_x, s_v, R, 1, RB=rb, KB=kb,
                                               num_warps=$num_warps)
    _reduce_splits(ws, c, M, N)
'''


_EPILOGUE = '''

$NUM_PROGRAMS


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.dtype not in (torch.float32, torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        raise TypeError(f"matmul kernel: unsupported dtypes {a.dtype} @ {b.dtype}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul kernel: shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    a = a if a.stride(1) == 1 else a.contiguous()
    b = b if b.stride(1) == 1 else b.contiguous()
    # $FP32_HOW
    _launch(a, b, c, M, N, K, "$FP32_PRECISION" if a.dtype == torch.float32 else "tf32")
    return c


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return matmul(a, b)
'''


_BATCHED = '''

@triton.jit
def _bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_a1, s_a2, s_am, s_ak, s_b1, s_b2, s_bk, s_bn, s_c1, s_c2, s_cm, s_cn,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                PRECISION: tl.constexpr):
    # `tiled` with a batch axis: program_id(0) walks one product's C tiles (grouped order), program_id(1) and (2)
    # the inner and outer batch dims. Each operand moves by its own batch strides: 0 along a broadcast dim, so
    # every entry along it reads the same A (or B), which stays in L2.
    a_ptr += tl.program_id(2).to(tl.int64) * s_a1 + tl.program_id(1).to(tl.int64) * s_a2
    b_ptr += tl.program_id(2).to(tl.int64) * s_b1 + tl.program_id(1).to(tl.int64) * s_b2
    c_ptr += tl.program_id(2).to(tl.int64) * s_c1 + tl.program_id(1).to(tl.int64) * s_c2
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am.to(tl.int64)[:, None] * s_am + offs_k[None, :] * s_ak
    b_ptrs = b_ptr + offs_k[:, None] * s_bk + offs_bn.to(tl.int64)[None, :] * s_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * s_ak
        b_ptrs += BK * s_bk
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + offs_cm.to(tl.int64)[:, None] * s_cm + offs_cn[None, :] * s_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # torch.matmul's batched product: a (..., M, K) @ b (..., K, N), the batch dims broadcast
    if a.dtype not in (torch.float32, torch.float16, torch.bfloat16) or b.dtype != a.dtype:
        raise TypeError(f"bmm kernel: unsupported dtypes {a.dtype} @ {b.dtype}")
    if a.dim() < 2 or b.dim() < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"bmm kernel: shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    nd = max(a.dim(), b.dim())
    batch = []
    for x, y in zip((1,) * (nd - a.dim()) + tuple(a.shape[:-2]), (1,) * (nd - b.dim()) + tuple(b.shape[:-2])):
        if x != y and 1 not in (x, y):
            raise ValueError(f"bmm kernel: batch dims of {tuple(a.shape)} and {tuple(b.shape)} do not broadcast")
        batch.append(y if x == 1 else x)
    M, K = a.shape[-2:]
    N = b.shape[-1]
    c = torch.empty((*batch, M, N), dtype=a.dtype, device=a.device)
    if c.numel() == 0:
        return c
    if K == 0:
        return c.zero_()
    # views, no copies: a broadcast batch dim gets stride 0, a transposed operand keeps its strides
    a = a.expand(*batch, M, K)
    b = b.expand(*batch, K, N)
    c3 = c
    if len(batch) > 2:   # the leading batch dims merged into one (reshape copies only where their strides do not)
        a, b, c3 = a.reshape(-1, *a.shape[-3:]), b.reshape(-1, *b.shape[-3:]), c.view(-1, *c.shape[-3:])
    while a.dim() < 4:
        a, b, c3 = a.unsqueeze(0), b.unsqueeze(0), c3.unsqueeze(0)
    B1, B2 = c3.shape[0], c3.shape[1]
    if B1 > 65535 or B2 > 65535:
        raise ValueError(f"bmm kernel: batch dims {B1} x {B2}: a grid axis holds at most 65535")
    grid = (triton.cdiv(M, $BM) * triton.cdiv(N, $BN), B2, B1)
    _bmm_kernel[grid](a, b, c3, M, N, K, *a.stride(), *b.stride(), *c3.stride(),
                      BM=$BM, BN=$BN, BK=$BK, GROUP_M=$GROUP_M,
                      PRECISION="$FP32_PRECISION" if a.dtype == torch.float32 else "tf32",
                      num_warps=$num_warps, num_stages=_depth($num_stages, a))
    return c
'''


# (the other variants' batched render: the launcher refuses, as `batch_limit` does, so no such kernel is evaluated)
_NO_BATCH = '''

def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("bmm kernel: the $VARIANT variant has no batch axis (tiled only)")
'''


# what an fp32 product computes at each fp32_precision (the comment the rendered launcher carries)
_FP32_HOW = {
    "ieee": "fp32 stays fp32 (no TF32), as torch.matmul computes it by default",
    "tf32x3": "fp32 by 3xTF32 on the tensor cores (TF32 high and low parts, hi*hi + hi*lo + lo*hi in fp32)",
}


# a split's K range keeps at least this many BK (gemv: K-block) steps: the launcher clamps a split that would not
SPLIT_MIN_STEPS = 4

# what the `gemv` variant's fallback (a product that is not matrix-vector) renders, whatever the tile knobs say: one
# canonical tiled kernel, so gemv points differing only in knobs gemv ignores render the same kernel
GEMV_FALLBACK = {"BM": 64, "BN": 64, "BK": 32, "GROUP_M": 8, "num_stages": 3, "fp32_precision": "ieee"}


def _values(p: dict) -> dict:
    p = {**p, **GEMV_FALLBACK} if p["variant"] == "gemv" else p
    return {
        "FP32_DEPTH": FP32_DEPTH, "TMA_STORE": _TMA_STORE[p["epilogue_subtile"]],
        "BM": p["BM"], "BN": p["BN"], "BK": p["BK"], "GROUP_M": p["GROUP_M"],
        "num_warps": p["num_warps"], "num_stages": p["num_stages"],
        # (the value itself, read or not: the variants without a persistent grid render it too)
        "NUM_PROGRAMS": num_programs(p["programs_per_sm"], "PROGRAMS_PER_SM programs per SM"),
        "FLATTEN": p["flatten"], "WARP_SPECIALIZE": p["warp_specialize"], "SUBTILE": p["epilogue_subtile"],
        "FP32_PRECISION": p["fp32_precision"], "FP32_HOW": _FP32_HOW[p["fp32_precision"]],
        "SPLIT_K": p["split_k"], "SPLIT_MIN_STEPS": SPLIT_MIN_STEPS,
        "GEMV_ROWS": p["gemv_rows"], "GEMV_BLOCK_K": p["gemv_block_k"],
    }


def _body(p: dict) -> str:
    if p["variant"] == "gemv":
        return _SPLIT + _GEMV
    if p["variant"] == "tiled" and p["split_k"] > 1:
        return _SPLIT + _TILED_SPLIT
    return {"tiled": _TILED, "persistent": _PERSISTENT, "tma": _TMA + _TMA_HELPERS,
            "tma_persistent": _TMA_PERSISTENT + _TMA_HELPERS}[p["variant"]]


def _template(p: dict) -> str:
    return fill(_PROLOGUE + _body(p) + _EPILOGUE, _values(p))


def batched_template(p: dict) -> str:
    """The template with `bmm` (the batched `tiled` kernel at p's tiles, warps and depth) beside `matmul`: what the
    offline matcher wraps for a batched product (generators/match.py). Only `tiled` points are feasible there."""
    batched = _BATCHED if p["variant"] == "tiled" else _NO_BATCH.replace("$VARIANT", p["variant"])
    return fill(_PROLOGUE + _body(p) + batched + _EPILOGUE, _values(p))


PARAMS = {
    "variant": ["tiled", "persistent", "tma", "tma_persistent", "gemv"],
    "BM": [64, 128, 256],
    "BN": [64, 128, 256],
    "BK": [32, 64, 128],
    "GROUP_M": [1, 4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
    "programs_per_sm": [1, 2],
    "flatten": [False, True],
    "warp_specialize": [False, True],
    "epilogue_subtile": [False, True],
    # how fp32 operands are multiplied (16-bit operands always run plain tensor-core dots)
    "fp32_precision": ["ieee", "tf32x3"],
    # K cut into this many ranges, one program per (tile, range), partials summed in order (`tiled` and `gemv`)
    "split_k": [1, 2, 4, 8, 16, 32, 64],
    # the matrix-vector kernel's tile: rows of A a program (N = 1), and K elements a step (M = 1: the two swap
    # roles as gemv_block_k // 8 columns of B by gemv_rows * 8 K rows, the same elements a step)
    "gemv_rows": [1, 2, 4, 8, 16],
    "gemv_block_k": [256, 512, 1024, 2048],
}

# the starter: persistent TMA, 128 x 256 tiles (NOTES.md)
DEFAULT = {"variant": "tma_persistent", "BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "num_warps": 8,
           "num_stages": 4, "programs_per_sm": 1, "flatten": False, "warp_specialize": False,
           "epilogue_subtile": True, "fp32_precision": "ieee", "split_k": 1, "gemv_rows": 4,
           "gemv_block_k": 1024}


def _moves() -> list[Move]:
    tma = lambda p: p["variant"].startswith("tma")  # noqa: E731
    persistent = lambda p: p["variant"].endswith("persistent")  # noqa: E731
    tiles = lambda p: p["variant"] != "gemv"  # noqa: E731   (gemv ignores the tile knobs: GEMV_FALLBACK)
    gemv = lambda p: p["variant"] == "gemv"  # noqa: E731
    moves = [
        Move("one program per tile",
             "Launch one program per C tile, pointer loads pipelined through shared memory: the baseline.",
             {"variant": "tiled"}),
        Move("persistent programs",
             "Launch one program per SM that walks the tiles: no tail wave (4096^2 / (128 x 256) = 512 tiles is "
             "3.9 waves on 132 SMs), and the next tile's loads overlap this tile's stores.",
             {"variant": "persistent", "split_k": 1}),
        Move("TMA loads",
             "Load A and B tiles with tensor descriptors: the TMA engine does the address math and bounds, "
             "freeing registers and issue slots for wgmma.", {"variant": "tma", "split_k": 1}),
        Move("persistent TMA",
             "Persistent programs with TMA loads: copies of the next tile's operands run ahead of the math.",
             {"variant": "tma_persistent", "split_k": 1}),
        Move("warp-specialize the main loop",
             "A producer warp issues the TMA copies while consumer warps run wgmma (Hopper warp specialization): "
             "the math never waits on address generation.", {"warp_specialize": True}, when=tma),
        Move("no warp specialization", "All warps both load and compute.", {"warp_specialize": False}, when=tma),
        Move("split the epilogue store",
             "Store C as two half-width tiles: the staging buffer in shared memory halves (64 KB -> 32 KB at "
             "128 x 256 bf16), room for one more pipeline stage.", {"epilogue_subtile": True}, when=tma),
        Move("one epilogue store",
             "Store the whole C tile at once (3 stages, so the full-size staging tile fits beside them).",
             {"epilogue_subtile": False, "num_stages": 3}, when=tma),
        Move("flatten the persistent loops",
             "Flatten the tile and K loops into one so the pipeliner prefetches across tile boundaries.",
             {"flatten": True}, when=persistent),
        Move("nested persistent loops", "Keep the tile loop and the K loop separate.", {"flatten": False},
             when=persistent),
    ]
    for bm, bn, bk, w in [(128, 256, 64, 8), (256, 128, 64, 8), (128, 128, 64, 4), (128, 128, 64, 8),
                          (128, 128, 128, 8), (64, 256, 64, 4), (128, 64, 64, 4), (64, 128, 64, 4),
                          (256, 256, 64, 8), (64, 64, 64, 4)]:
        reuse = 2 * bm * bn / (bm + bn)
        moves.append(Move(f"tile {bm}x{bn}x{bk}, {w} warps",
                          f"C tiles of {bm} x {bn} with K steps of {bk} on {w} warps: {reuse:.0f} flops per loaded "
                          f"element; {(bm * bk + bk * bn) * 2 // 1024} KB of bf16 operands per pipeline stage.",
                          {"BM": bm, "BN": bn, "BK": bk, "num_warps": w}, when=tiles))
    moves.append(Move("fp32 by 3xTF32",
                      "Multiply fp32 operands on the tensor cores as three TF32 products (hi*hi + hi*lo + lo*hi, "
                      "fp32 accumulation): nearly fp32 accuracy at several times the FMA loop's speed.",
                      {"fp32_precision": "tf32x3"}, when=tiles, for_cases=_has_fp32))
    moves.append(Move("fp32 in full precision",
                      "Multiply fp32 operands with fp32 FMAs (input_precision ieee), exact products as eager computes "
                      "them, on the CUDA cores.", {"fp32_precision": "ieee"}, when=tiles, for_cases=_has_fp32))
    for s in PARAMS["num_stages"]:
        moves.append(Move(f"{s} pipeline stages",
                          f"Keep {s} K-steps of A and B in flight in shared memory: deeper hides more DRAM latency "
                          f"but costs shared memory (227 KB per SM on H200).", {"num_stages": s}, when=tiles))
    for g in PARAMS["GROUP_M"]:
        moves.append(Move(f"group {g} tiles down",
                          f"Order tiles in groups of {g} down before moving right, so concurrently running "
                          f"programs share operands in L2 ({'row-major order' if g == 1 else 'swizzled'}).",
                          {"GROUP_M": g}, when=tiles))
    for n in PARAMS["programs_per_sm"]:
        moves.append(Move(f"{n} persistent programs per SM",
                          f"{n} resident programs per SM: two overlap one's epilogue with the other's main loop "
                          f"when tiles are small enough to fit twice.", {"programs_per_sm": n}, when=persistent))
    moves.append(Move("matrix-vector kernel",
                      "B is one column (or A one row): stream A's rows with vector loads and FMAs into an fp32 lane "
                      "accumulator, no tensor-core tile (1/BN of it would be used); bytes bound it, not flops.",
                      {"variant": "gemv"}, for_cases=_vector_shaped))
    for k in PARAMS["split_k"]:
        what = ("One program per output tile (or row block) walks all of K." if k == 1 else
                f"Cut K into {k} ranges, one program per (tile, range): {k}x the programs where few output tiles "
                f"leave SMs idle; each writes an fp32 partial, a second kernel sums the {k} in order (no atomics).")
        moves.append(Move("no split-K" if k == 1 else f"split K {k} ways", what, {"split_k": k},
                          when=lambda p: p["variant"] in ("tiled", "gemv"), for_cases=_long_k))
    for r in PARAMS["gemv_rows"]:
        moves.append(Move(f"{r} rows a matrix-vector program",
                          f"Each matrix-vector program streams {r} row{'s' if r > 1 else ''} of A (more rows: fewer "
                          f"programs, more loads in flight each).", {"gemv_rows": r}, when=gemv))
    for bk in PARAMS["gemv_block_k"]:
        moves.append(Move(f"matrix-vector K steps of {bk}",
                          f"Load {bk} elements of each row a step: {bk * 4 // 1024} KB of fp32 a row in flight per "
                          f"step; more hides DRAM latency, at more registers.", {"gemv_block_k": bk}, when=gemv))
    return moves   # those landing past shared memory are left out by the space's `feasible`


def _has_fp32(cases) -> bool:
    """The fp32 precision moves change only fp32 products: on 16-bit ones they are the seed's kernel again."""
    return any(c.dtype == "float32" for c in cases)


def _timed_shapes(cases) -> list[dict]:
    """The m, n, k of the timed cases; an empty dict where a timed case names other dimensions (a matched problem's
    own cases: its shape is the matched space's, which `limits` reads)."""
    return [c.params if {"m", "n", "k"} <= set(c.params) else {} for c in cases if c.timed]


def _vector_shaped(cases) -> bool:
    """The matrix-vector move is offered where a timed product is one (N = 1 or M = 1), or its shape is unknown."""
    return any(not s or s["m"] == 1 or s["n"] == 1 for s in _timed_shapes(cases))


def _long_k(cases) -> bool:
    """Split-K moves are offered where a timed product has a K worth cutting (8 x 4 BK steps of 32) and too few
    64 x 64 tiles (or matrix-vector rows) to keep two programs on each SM, or its shape is unknown."""
    return any(not s or (s["k"] >= 2 * SPLIT_MIN_STEPS * 32 and (s["m"] == 1 or s["n"] == 1 or
                                                             -(-s["m"] // 64) * -(-s["n"] // 64) < 2 * SMS))
               for s in _timed_shapes(cases))


SHARED_MAX = 232448  # bytes of shared memory one program may use on an H100/H200 (227 KB)


def shared_bytes(p: dict, size: int = 2) -> int:
    """Shared memory a point needs at the timed bf16 size, as Triton 3.6 allocates it for sm_90 (checked against
    compiled kernels): num_stages A and B tiles, plus a C staging tile for the persistent TMA epilogue. `gemv`: its
    fallback's canonical tiles (the matrix-vector kernel itself holds its tile in registers)."""
    p = {**p, **GEMV_FALLBACK} if p["variant"] == "gemv" else p
    operands = p["num_stages"] * (p["BM"] * p["BK"] + p["BK"] * p["BN"]) * size
    if p["variant"] == "tma_persistent":
        return operands + p["BM"] * p["BN"] * size // (2 if p["epilogue_subtile"] else 1)
    if p["variant"] == "persistent" and p["flatten"]:
        return operands + p["BM"] * p["BN"] * size // 2
    return operands


def _tma_path(case) -> bool:
    """Whether a TMA variant takes its TMA path at `case` (16-byte aligned row strides: K and N multiples of 16
    bytes), not the `tiled` fallback."""
    size = 4 if case.dtype == "float32" else 2
    return case.params["k"] * size % 16 == 0 and case.params["n"] * size % 16 == 0


def _timed_path(p: dict, case) -> bool:
    """Whether `case` compiles the variant's own kernel as the timed case does: 16-bit operands (wgmma), on the TMA
    path, or for the pointer variants with M, N and K multiples of 16 (Triton's divisibility hints vectorize the
    loads). Elsewhere, at the small and odd correctness cases and the fp32 ones (an FMA loop over registers), nearly
    every point spills, the starter too (odd-bf16: 4084 B; fp32: 18 KB) and 64 x 64 tiles (56 B, 3 KB): those
    spills slow only a correctness call, so they refuse nothing."""
    if case.dtype == "float32":   # the FMA loop spills everywhere; 3xTF32 runs wgmma as 16-bit operands do
        if p["fp32_precision"] != "tf32x3" or not case.timed:
            return False
    if p["variant"].startswith("tma"):
        return _tma_path(case)
    return all(case.params[d] % 16 == 0 for d in ("m", "n", "k"))


def registers_limit(p: dict, case) -> str | None:
    """Spills where it is timed: the BM x BN fp32 accumulator spread over the program's threads, against the
    three quarters of a thread's 255 registers the other families' models allow (space.register_limit). sm_90
    compiles at the timed case: 128 values a thread compiled to 154-255 registers without a spill (tiled 218,
    persistent 244-255, TMA 154-157), 256 spilled 2.8-4.2 KB in every variant (128 x 256 on 4 warps). 3xTF32 at a
    timed fp32 case holds two accumulators (fp32 4096^3: 128 x 256 on 8 warps spilled 2.1-2.9 KB in every variant,
    as did 128 x 128 on 4 warps and 256 x 128 on 8; 128 x 128 on 8 warps compiled to 218 registers (tiled 250),
    64 x 64 on 4 warps 161, no spill)."""
    if p["variant"] == "gemv":
        return gemv_registers_limit(p, case)
    if not _timed_path(p, case):
        return None
    acc = per_thread(p["BM"] * p["BN"], p["num_warps"])
    what = f"the {p['BM']} x {p['BN']} accumulator on {p['num_warps']} warps"
    if case.dtype == "float32":   # 3xTF32: a second accumulator for the hi*lo + lo*hi products of each K step
        acc, what = 2 * acc, what + " (twice: 3xTF32's second accumulator)"
    return register_limit(acc, p["num_warps"], what)


def gemv_registers_limit(p: dict, case) -> str | None:
    """The matrix-vector kernel holds its fp32 lane accumulator and the step's loaded tile, gemv_rows x gemv_block_k
    values each, spread over the program's threads (at the timed case: elsewhere only a correctness call)."""
    if not case.timed:
        return None
    held = 2 * per_thread(p["gemv_rows"] * p["gemv_block_k"], p["num_warps"])
    return register_limit(held, p["num_warps"], f"the matrix-vector tile {p['gemv_rows']} x {p['gemv_block_k']} "
                                                f"(accumulator and loads) on {p['num_warps']} warps")


def split_limit(p: dict, case) -> str | None:
    """split_k > 1 runs only in the `tiled` and `gemv` launchers (not at a batched case: `bmm` has none), and at the
    timed case each of the split_k K ranges keeps SPLIT_MIN_STEPS K steps (BK; gemv: its K block), as the launcher
    would clamp it to (a larger split there is a smaller one's kernel again). `gemv` at a timed case that is not a
    matrix-vector product (M and N > 1) is its tiled fallback: refused there too."""
    params = case.params
    if p["variant"] == "gemv" and case.timed and params.get("m", 1) > 1 and params.get("n", 1) > 1:
        return f"not a matrix-vector product (M = {params['m']}, N = {params['n']}): gemv runs the tiled fallback"
    if p["split_k"] == 1:
        return None
    if p["variant"] not in ("tiled", "gemv"):
        return f"the {p['variant']} variant has no split-K (tiled and gemv only)"
    if "batch" in params:
        return "a batched product has no split-K (the batched kernel walks all of K)"
    if not case.timed or "k" not in params:
        return None
    if p["variant"] == "gemv":
        step = p["gemv_block_k"] if params.get("n") == 1 or params.get("m") != 1 else p["gemv_rows"] * 8
    else:
        step = p["BK"]
    k = params["k"]
    if -(-k // step) // SPLIT_MIN_STEPS < p["split_k"]:
        return (f"K = {k} in {p['split_k']} ranges leaves under {SPLIT_MIN_STEPS} K steps of {step} each "
                "(the launcher clamps the split)")
    return None


def warp_specialize_limit(p: dict, case) -> str | None:
    """Triton 3.6's warp specialization (the NVGPUWarpSpecialization pass) of a 16-bit TMA loop with one consumer
    warpgroup (4 warps) fails to compile ("PassManager::run failed") unless the tile is 64 rows of at most 128
    columns (64 x 64 and 64 x 128: 168 registers; 128 x 64, 128 x 128, 64 x 256, 128 x 256 failed at every BK and
    depth tried). On 8 warps every tile tried compiled."""
    if not (p["warp_specialize"] and p["variant"].startswith("tma") and p["num_warps"] == 4):
        return None
    if case.dtype == "float32" or not _tma_path(case) or (p["BM"] <= 64 and p["BN"] <= 128):
        return None
    return (f"warp specialization on 4 warps of a {p['BM']} x {p['BN']} tile fails to compile in Triton 3.6 "
            "(NVGPUWarpSpecialization); only 64 x 64 and 64 x 128 tiles compile there")


def batch_limit(p: dict, case) -> str | None:
    """A batched case (a `batch` size among its params: a matched bmm / batched matmul) runs `bmm`, whose batch
    axis only the `tiled` kernel has."""
    if "batch" in case.params and p["variant"] != "tiled":
        return f"the {p['variant']} variant has no batch axis (a batched product runs the tiled kernel only)"
    return None


_shared = shared_limit(shared_bytes)


def limits(p: dict, case) -> str | None:
    """The feasibility model (families/space.py), calibrated with bench/feasibility.py against sm_90 compiles:
    shared memory of the tiles and stages, accumulator registers at the timed path, and the warp-specialized
    tiles Triton cannot compile. It refuses what fails to compile and what spills where it is timed, and at a
    batched case every variant but `tiled`."""
    return (batch_limit(p, case) or split_limit(p, case) or _shared(p, case) or warp_specialize_limit(p, case)
            or registers_limit(p, case))


# a batched product's starter: `tiled` (the only variant with a batch axis), 128 x 128 tiles on 8 warps (64 fp32
# accumulator values a thread); the starter's BK, depth and group order
BATCHED_START = {"variant": "tiled", "BM": 128, "BN": 128, "num_warps": 8}


# 3xTF32 starts fp32 products of K up to this: its fp32 accumulation on the tensor cores may truncate (round toward
# zero, as A100's was measured to), a bias that grows with K on KernelBench's positive (torch.rand) inputs: emulated,
# 0.42 of the fp32 tolerance's bound at K = 16384, over it at 65536 (NOTES.md). Past it the `ieee` loop starts.
TF32X3_MAX_K = 16384
# the fp32 3xTF32 starter's tile: 128 x 128 on 8 warps (its two accumulators at 128 x 256 spill, registers_limit)
TF32X3_START = {"fp32_precision": "tf32x3", "BN": 128, "num_warps": 8}


# a product too small to fill the device with the default's 128 x 256 tiles (fewer tiles than an H100 has SMs: the
# 32 x 200 -> 120 GEMM of a level-2 chain is one tile, and ran at 0.054x of eager on the TMA-persistent default,
# its host building descriptors for one program) starts from one program per 64 x 64 tile, no TMA
SMS = 132   # an H100's SMs: the small-tile and split-K rules size grids to it
SMALL_TILES = SMS
SMALL_START = {"variant": "tiled", "BM": 64, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 3}
# a matrix-vector product (N = 1 or M = 1) starts from the GEMV kernel: 4 rows of A a program, 1024-element K steps
# (4096 fp32 values a step over 128 threads: 32 a thread, eight 16-byte loads), 4 warps
GEMV_START = {"variant": "gemv", "num_warps": 4, "gemv_rows": 4, "gemv_block_k": 1024}
# the starter splits K only where each split keeps this many K steps (the feasibility model allows SPLIT_MIN_STEPS)
SPLIT_SHAPED_STEPS = 16


def _split_for(programs: int, k: int, step: int) -> int:
    """The smallest split_k (a power of two) giving about 1-2 programs per SM (programs x split_k >= SMS), each K
    range keeping SPLIT_SHAPED_STEPS steps: KernelBench's 256 x 256 x 524288 (16 tiles of 64 x 64) splits 16 ways,
    256 programs of 32768 K each. 1 where the programs already fill the device or K is short."""
    split = 1
    while programs * split < SMS and 2 * split <= PARAMS["split_k"][-1] and \
            k // (2 * split * step) >= SPLIT_SHAPED_STEPS:
        split *= 2
    return split


def _shaped(case, cases) -> dict:
    """The starter's knobs at another shape: a batched case starts from BATCHED_START; a matrix-vector one (N = 1 or
    M = 1) from GEMV_START, K split where its row blocks do not fill the device; a 2-D one from the default
    (family_at's model shapes keep starter.py), or SMALL_START where the default's tiles would not fill the device,
    K split (`_split_for`) where its 64 x 64 tiles are fewer than the SMs and K is long; an fp32 one whose K per
    split is at most TF32X3_MAX_K multiplies by 3xTF32 on 128 x 128 tiles (NOTES.md: within the judge's fp32
    tolerances, where the `ieee` FMA loop cannot beat cuBLAS's SGEMM), or on the small start's tiles."""
    knobs = dict(BATCHED_START) if any("batch" in c.params for c in cases) else {}
    m, n, k = case.params.get("m"), case.params.get("n"), case.params.get("k")
    if not knobs and m is not None and n is not None and k is not None and (m == 1 or n == 1):
        rows, step = (m, GEMV_START["gemv_rows"]) if n == 1 else (n, GEMV_START["gemv_block_k"] // 8)
        kb = GEMV_START["gemv_block_k"] if n == 1 else GEMV_START["gemv_rows"] * 8
        return {**GEMV_START, "split_k": _split_for(-(-rows // step), k, kb)}
    small = not knobs and m is not None and n is not None and \
        -(-m // DEFAULT["BM"]) * -(-n // DEFAULT["BN"]) < SMALL_TILES
    split = 1
    if small:
        knobs.update(SMALL_START)
        if k is not None:
            split = _split_for(-(-m // SMALL_START["BM"]) * -(-n // SMALL_START["BN"]), k, SMALL_START["BK"])
            if split > 1:
                knobs["split_k"] = split
    # (the K each fp32 accumulator sums: a split's range; the partials are summed in fp32 on the CUDA cores)
    per_split = k if k is None else -(-k // split)
    if case.dtype == "float32" and (per_split if per_split is not None else TF32X3_MAX_K + 1) <= TF32X3_MAX_K:
        knobs.update({"fp32_precision": "tf32x3"} if small else TF32X3_START)
    return knobs


SPACE = SearchSpace(params=PARAMS, default=DEFAULT, template=_template, moves=_moves(),
                    tuning=["num_stages", "GROUP_M", "BK", "num_warps"],
                    cases=CASES, limits=limits, shaped=_shaped)
