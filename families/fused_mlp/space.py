"""SwiGLU MLP search space: down(silu(gate(x)) * up(x)) as two GEMM kernels or as four unfused steps.

The work is 6 * T * H * I flops (spec.flops): 1.1e12 at the timed bf16 T=4096, H=4096, I=11008, 1.6 ms at
690 TFLOP/s; it is compute-bound, so the point of fusing is the bytes it removes from around the GEMMs:
- `fused`: one kernel computes a tile of gate(x) and of up(x) with two accumulators from the same x tile (x
  read once for both), applies silu(g) * u in registers and writes h (T x I, 90 MB in bf16) once; a second
  kernel computes down(h). Unfused, eager writes and re-reads g, u and silu(g) (another 270 MB).
- `separate`: gate, up and down GEMMs plus an elementwise silu-mul kernel, for comparison.
- `tma`: the operand tiles of both GEMMs arrive by TMA (needs 16-byte aligned rows; else pointer loads).
nn.Linear stores weights as (out, in), so each weight tile is loaded K-contiguous ([BLOCK_N, BLOCK_K], fully
coalesced) and transposed in shared memory for the dot. fp32 uses input_precision="ieee" (no TF32).
How the starter was chosen, with the figures: NOTES.md.
"""
from __future__ import annotations

from kernelsearch.families.fused_mlp.spec import CASES
from kernelsearch.families.space import FP32_DEPTH, Move, SearchSpace, fill, shared_limit

_PROLOGUE = '''import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


$FP32_DEPTH


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # grouped order: GROUP_M tiles down before moving right, so concurrent programs share x rows and
    # weight rows in L2
    in_group = GROUP_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_M
    size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % in_group) % size_m, (tile_id % in_group) // size_m


@triton.jit
def _linear_kernel(x_src, w_src, y_ptr, M, N, K, s_xm, s_wn, s_ym,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   ACT: tl.constexpr, USE_TMA: tl.constexpr, PRECISION: tl.constexpr):
    # y = x @ w^T for one BM x BN tile (ACT: silu(y) in registers before the store)
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    offs_k = tl.arange(0, BK)
    rows = (pid_m * BM + tl.arange(0, BM)) % M  # past-the-edge rows wrap; their results are masked
    cols = (pid_n * BN + tl.arange(0, BN)) % N
    if USE_TMA:  # descriptors carry their own addressing
        x_ptrs = x_src
        w_ptrs = w_src
    else:
        x_ptrs = x_src + rows.to(tl.int64)[:, None] * s_xm + offs_k[None, :]
        w_ptrs = w_src + cols.to(tl.int64)[:, None] * s_wn + offs_k[None, :]
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        if USE_TMA:
            x = x_src.load([pid_m * BM, k])
            w = w_src.load([pid_n * BN, k])  # a [BN, BK] tile of the (out, in) weight: K-contiguous rows
        else:
            k_ok = (k + offs_k)[None, :] < K
            x = tl.load(x_ptrs + k, mask=k_ok, other=0.0)
            w = tl.load(w_ptrs + k, mask=k_ok, other=0.0)
        acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
    if ACT:
        acc = acc * tl.sigmoid(acc)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    tl.store(y_ptr + offs_m.to(tl.int64)[:, None] * s_ym + offs_n[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _linear(x, w, y, act, tma, bm, bn, bk, warps, stages):
    M, K = x.shape
    N = w.shape[0]
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    use_tma = tma and _tma_ok(x, w)
    x_src = TensorDescriptor.from_tensor(x, [bm, bk]) if use_tma else x
    w_src = TensorDescriptor.from_tensor(w, [bn, bk]) if use_tma else w
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _linear_kernel[grid](x_src, w_src, y, M, N, K, x.stride(0), w.stride(0), y.stride(0), BM=bm, BN=bn, BK=bk,
                         GROUP_M=$GROUP_M, ACT=act, USE_TMA=use_tma, PRECISION=precision,
                         num_warps=warps, num_stages=_depth(stages, x))


def _tma_ok(*tensors):
    # TMA needs 16-byte aligned base addresses and row strides
    return all(t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0 for t in tensors)
'''

_FUSED = '''

@triton.jit
def _gate_up_kernel(x_src, wg_src, wu_src, h_ptr, M, N, K, s_xm, s_wn, s_hm,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                    USE_TMA: tl.constexpr, PRECISION: tl.constexpr):
    # h = silu(x @ wg^T) * (x @ wu^T) for one BM x BN tile: each x tile feeds both products (read once), the
    # two fp32 accumulators never leave registers, and h is written once in the input dtype.
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    offs_k = tl.arange(0, BK)
    rows = (pid_m * BM + tl.arange(0, BM)) % M
    cols = (pid_n * BN + tl.arange(0, BN)) % N
    if USE_TMA:  # descriptors carry their own addressing
        x_ptrs = x_src
        wg_ptrs = wg_src
        wu_ptrs = wu_src
    else:
        x_ptrs = x_src + rows.to(tl.int64)[:, None] * s_xm + offs_k[None, :]
        wg_ptrs = wg_src + cols.to(tl.int64)[:, None] * s_wn + offs_k[None, :]
        wu_ptrs = wu_src + cols.to(tl.int64)[:, None] * s_wn + offs_k[None, :]
    acc_g = tl.zeros((BM, BN), tl.float32)
    acc_u = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        if USE_TMA:
            x = x_src.load([pid_m * BM, k])
            wg = wg_src.load([pid_n * BN, k])
            wu = wu_src.load([pid_n * BN, k])
        else:
            k_ok = (k + offs_k)[None, :] < K
            x = tl.load(x_ptrs + k, mask=k_ok, other=0.0)
            wg = tl.load(wg_ptrs + k, mask=k_ok, other=0.0)
            wu = tl.load(wu_ptrs + k, mask=k_ok, other=0.0)
        acc_g = tl.dot(x, tl.trans(wg), acc_g, input_precision=PRECISION)
        acc_u = tl.dot(x, tl.trans(wu), acc_u, input_precision=PRECISION)
    h = acc_g * tl.sigmoid(acc_g) * acc_u
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    tl.store(h_ptr + offs_m.to(tl.int64)[:, None] * s_hm + offs_n[None, :], h.to(h_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _mlp(x, wg, wu, wd):
    M, H = x.shape
    inter = wg.shape[0]
    h = torch.empty((M, inter), dtype=x.dtype, device=x.device)
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    use_tma = $TMA and _tma_ok(x, wg, wu, h)
    x_src = TensorDescriptor.from_tensor(x, [$GU_BM, $GU_BK]) if use_tma else x
    wg_src, wu_src = ((TensorDescriptor.from_tensor(w, [$GU_BN, $GU_BK]) for w in (wg, wu)) if use_tma
                      else (wg, wu))
    grid = (triton.cdiv(M, $GU_BM) * triton.cdiv(inter, $GU_BN),)
    _gate_up_kernel[grid](x_src, wg_src, wu_src, h, M, inter, H, x.stride(0), wg.stride(0), h.stride(0),
                          BM=$GU_BM, BN=$GU_BN, BK=$GU_BK, GROUP_M=$GROUP_M, USE_TMA=use_tma,
                          PRECISION=precision, num_warps=$gu_warps, num_stages=_depth($gu_stages, x))
    y = torch.empty((M, H), dtype=x.dtype, device=x.device)
    _linear(h, wd, y, False, $TMA, $D_BM, $D_BN, $D_BK, $down_warps, $down_stages)
    return y
'''

_SEPARATE = '''

@triton.jit
def _mul_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs, mask=offs < n).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=offs < n).to(tl.float32)
    tl.store(out_ptr + offs, (a * b).to(out_ptr.dtype.element_ty), mask=offs < n)


def _mlp(x, wg, wu, wd):
    # unfused: silu(gate) and up land in memory and are read back (4 * T * I * size extra bytes)
    M, H = x.shape
    inter = wg.shape[0]
    g = torch.empty((M, inter), dtype=x.dtype, device=x.device)
    u = torch.empty_like(g)
    _linear(x, wg, g, True, $TMA, $GU_BM, $GU_BN, $GU_BK, $gu_warps, $gu_stages)
    _linear(x, wu, u, False, $TMA, $GU_BM, $GU_BN, $GU_BK, $gu_warps, $gu_stages)
    _mul_kernel[(triton.cdiv(g.numel(), 4096),)](g, u, g, g.numel(), BLOCK=4096)
    y = torch.empty((M, H), dtype=x.dtype, device=x.device)
    _linear(g, wd, y, False, $TMA, $D_BM, $D_BN, $D_BK, $down_warps, $down_stages)
    return y
'''

_EPILOGUE = '''

def swiglu_mlp(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16) or any(
            w.dtype != x.dtype for w in (w_gate, w_up, w_down)):
        raise TypeError(f"swiglu kernel: x {x.dtype} with weights {w_gate.dtype}, {w_up.dtype}, {w_down.dtype}")
    hidden = x.shape[-1]
    inter = w_gate.shape[0]
    if w_gate.shape != (inter, hidden) or w_up.shape != (inter, hidden) or w_down.shape != (hidden, inter):
        raise ValueError(f"swiglu kernel: weights {tuple(w_gate.shape)}, {tuple(w_up.shape)}, "
                         f"{tuple(w_down.shape)} for hidden {hidden}")
    shape = x.shape
    x2 = x.reshape(-1, hidden)
    x2, wg, wu, wd = (t if t.stride(-1) == 1 else t.contiguous() for t in (x2, w_gate, w_up, w_down))
    if x2.shape[0] == 0:
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    return _mlp(x2, wg, wu, wd).reshape(shape)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, dtype: str = "float32"):
        super().__init__()
        dt = getattr(torch, dtype)
        # parameter holders under the reference's names; the products are this file's kernels
        self.gate_proj = torch.nn.Module()
        self.gate_proj.weight = torch.nn.Parameter(torch.empty(intermediate_size, hidden_size, dtype=dt))
        self.up_proj = torch.nn.Module()
        self.up_proj.weight = torch.nn.Parameter(torch.empty(intermediate_size, hidden_size, dtype=dt))
        self.down_proj = torch.nn.Module()
        self.down_proj.weight = torch.nn.Parameter(torch.empty(hidden_size, intermediate_size, dtype=dt))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swiglu_mlp(x, self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)
'''


def _tile(s: str) -> tuple[int, int, int]:
    bm, bn, bk = (int(v) for v in s.split("x"))
    return bm, bn, bk


def _template(p: dict) -> str:
    gu, dn = _tile(p["gate_up_tile"]), _tile(p["down_tile"])
    body = {"fused": _FUSED, "separate": _SEPARATE}[p["variant"]]
    return fill(_PROLOGUE + body + _EPILOGUE, {
        "FP32_DEPTH": FP32_DEPTH,
        "GU_BM": gu[0], "GU_BN": gu[1], "GU_BK": gu[2], "D_BM": dn[0], "D_BN": dn[1], "D_BK": dn[2],
        "gu_warps": p["gate_up_warps"], "gu_stages": p["gate_up_stages"],
        "down_warps": p["down_warps"], "down_stages": p["down_stages"],
        "GROUP_M": p["GROUP_M"], "TMA": p["tma"],
    })


PARAMS = {
    "variant": ["fused", "separate"],
    # (128 x 256 would need two 128 x 256 fp32 accumulators: more registers than an SM has per program)
    "gate_up_tile": ["128x128x64", "128x64x64", "64x128x64", "128x128x32", "64x64x64"],
    "gate_up_warps": [4, 8],
    "gate_up_stages": [2, 3, 4],
    "down_tile": ["128x256x64", "128x128x64", "256x128x64", "64x128x64", "128x128x128"],
    "down_warps": [4, 8],
    "down_stages": [2, 3, 4, 5],
    "GROUP_M": [1, 4, 8, 16],
    "tma": [False, True],
}

# the starter: fused gate/up with TMA, 256 x 128 down tiles (NOTES.md)
DEFAULT = {"variant": "fused", "gate_up_tile": "128x128x64", "gate_up_warps": 8, "gate_up_stages": 4,
           "down_tile": "256x128x64", "down_warps": 8, "down_stages": 3, "GROUP_M": 8, "tma": True}


def _moves() -> list[Move]:
    moves = [
        Move("fuse gate, up and SiLU-mul",
             "Compute the gate and up tiles in one kernel from the same x tile (x read once for both) and apply "
             "silu(g) * u before the single store of h: g and u never reach memory (saves 4 * T * I * size "
             "bytes, 360 MB at the timed size).", {"variant": "fused"}),
        Move("unfused GEMMs",
             "Three GEMMs plus an elementwise kernel: simpler kernels with one accumulator each, more bytes.",
             {"variant": "separate"}),
        Move("TMA operand loads",
             "Load x and weight tiles with tensor descriptors: the copy engine does the address math and "
             "bounds, freeing registers (the fused kernel holds two accumulators) for larger tiles.",
             {"tma": True}),
        Move("pointer operand loads", "Masked pointer loads pipelined with cp.async.", {"tma": False}),
    ]
    for t in PARAMS["gate_up_tile"]:
        bm, bn, bk = _tile(t)
        moves.append(Move(f"gate/up tile {t}",
                          f"Gate/up tiles of {bm} x {bn} (x {bk} per step): two {bm}x{bn} fp32 accumulators "
                          f"({2 * bm * bn * 4 // 1024} KB of registers per program when fused).",
                          {"gate_up_tile": t}))
    for t in PARAMS["down_tile"]:
        bm, bn, bk = _tile(t)
        moves.append(Move(f"down tile {t}",
                          f"Down-projection tiles of {bm} x {bn} (x {bk} per step): "
                          f"{2 * bm * bn / (bm + bn):.0f} flops per loaded element.", {"down_tile": t}))
    for w in (4, 8):
        moves.append(Move(f"{w} warps on gate/up", f"{w} warps share the gate/up tile.", {"gate_up_warps": w}))
        moves.append(Move(f"{w} warps on down", f"{w} warps share the down tile.", {"down_warps": w}))
    for s in PARAMS["gate_up_stages"]:
        moves.append(Move(f"gate/up {s} stages",
                          f"{s} K-steps of x, w_gate and w_up in flight in shared memory (three tiles a stage).",
                          {"gate_up_stages": s}))
    for s in PARAMS["down_stages"]:
        moves.append(Move(f"down {s} stages", f"{s} K-steps of h and w_down in flight in shared memory.",
                          {"down_stages": s}))
    for g in PARAMS["GROUP_M"]:
        moves.append(Move(f"group {g} tiles down",
                          f"Order tiles in groups of {g} rows so concurrent programs share weight tiles in L2.",
                          {"GROUP_M": g}))
    return moves   # those landing past shared memory are left out by the space's `feasible`


SHARED_MAX = 232448  # bytes of shared memory one program may use on an H100/H200 (227 KB)


def shared_bytes(p: dict, size: int = 2) -> int:
    """The larger of the two kernels' shared memory at bf16, as Triton 3.6 allocates it for sm_90 (checked
    against compiled kernels): per stage, the x tile and both weight tiles (gate/up), or h and w_down (down)."""
    bm, bn, bk = _tile(p["gate_up_tile"])
    gate_up = p["gate_up_stages"] * (bm * bk + 2 * bn * bk) * size
    bm, bn, bk = _tile(p["down_tile"])
    down = p["down_stages"] * (bm * bk + bn * bk) * size
    return max(gate_up, down)


SPACE = SearchSpace(params=PARAMS, default=DEFAULT, template=_template, moves=_moves(),
                    tuning=["gate_up_stages", "down_stages", "GROUP_M", "gate_up_warps", "down_warps"],
                    cases=CASES, limits=shared_limit(shared_bytes))
