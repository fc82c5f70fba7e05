# kernelsearch-space: {"GROUP_M": 8, "down_stages": 3, "down_tile": "256x128x64", "down_warps": 8, "gate_up_stages": 4, "gate_up_tile": "128x128x64", "gate_up_warps": 8, "tma": true, "variant": "fused"}
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


def _depth(stages, x):
    # fp32 tiles take twice the shared memory of the 16-bit tiles the depth was tuned for (fp32 matmul at 4
    # stages: 360 KB > the H200's 227 KB): fp32, checked for correctness rather than tuned, runs one stage deep
    return 1 if x.element_size() == 4 else stages


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
                         GROUP_M=8, ACT=act, USE_TMA=use_tma, PRECISION=precision,
                         num_warps=warps, num_stages=_depth(stages, x))


def _tma_ok(*tensors):
    # TMA needs 16-byte aligned base addresses and row strides
    return all(t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0 for t in tensors)


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
    use_tma = True and _tma_ok(x, wg, wu, h)
    x_src = TensorDescriptor.from_tensor(x, [128, 64]) if use_tma else x
    wg_src, wu_src = ((TensorDescriptor.from_tensor(w, [128, 64]) for w in (wg, wu)) if use_tma
                      else (wg, wu))
    grid = (triton.cdiv(M, 128) * triton.cdiv(inter, 128),)
    _gate_up_kernel[grid](x_src, wg_src, wu_src, h, M, inter, H, x.stride(0), wg.stride(0), h.stride(0),
                          BM=128, BN=128, BK=64, GROUP_M=8, USE_TMA=use_tma,
                          PRECISION=precision, num_warps=8, num_stages=_depth(4, x))
    y = torch.empty((M, H), dtype=x.dtype, device=x.device)
    _linear(h, wd, y, False, True, 256, 128, 64, 8, 3)
    return y


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
