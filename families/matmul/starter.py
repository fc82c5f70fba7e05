# kernelsearch-space: {"BK": 64, "BM": 128, "BN": 256, "GROUP_M": 8, "epilogue_subtile": true, "flatten": false, "fp32_precision": "ieee", "gemv_block_k": 1024, "gemv_rows": 4, "num_stages": 4, "num_warps": 8, "programs_per_sm": 1, "split_k": 1, "variant": "tma_persistent", "warp_specialize": false}
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
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
    _matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), BM=128, BN=256, BK=64, GROUP_M=8,
                         PRECISION=precision, num_warps=8, num_stages=_depth(4, a))


@triton.jit
def _matmul_tma_persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                                  GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    # Persistent programs over the tiles, TMA loads: the copy engine fetches the next tile's A and B while
    # this tile's epilogue runs.
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0), flatten=False,
                            warp_specialize=False):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = a_desc.load([off_m, k])
            b = b_desc.load([k, off_n])
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        halves = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
        c0, c1 = tl.split(halves)
        c_desc.store([off_m, off_n], c0.to(c_desc.dtype))
        c_desc.store([off_m, off_n + BN // 2], c1.to(c_desc.dtype))


def _launch(a, b, c, M, N, K, precision):
    if not _tma_ok(a, b, c):
        return _launch_tiled(a, b, c, M, N, K, precision)
    a_desc, b_desc, c_desc = _descriptors(a, b, c)
    tiles = triton.cdiv(M, 128) * triton.cdiv(N, 256)
    _matmul_tma_persistent_kernel[(min(tiles, _num_programs(a)),)](
        a_desc, b_desc, c_desc, M, N, K, BM=128, BN=256, BK=64, GROUP_M=8, PRECISION=precision,
        num_warps=8, num_stages=_depth(4, a))


def _tma_ok(a, b, c):
    # TMA needs 16-byte aligned base addresses and row strides
    size = a.element_size()
    return all(t.data_ptr() % 16 == 0 and (t.stride(0) * size) % 16 == 0 for t in (a, b, c))


def _descriptors(a, b, c):
    c_block = [128, 256 // 2] if True else [128, 256]
    return (TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 256]),
            TensorDescriptor.from_tensor(c, c_block))


_SMS = {}


def _num_programs(x):
    # persistent grids: PROGRAMS_PER_SM programs per SM (the interpreter has no SMs; 4 keeps it quick)
    if x.device.type != "cuda":
        return 4
    idx = x.device.index or 0
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * 1


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
    # fp32 stays fp32 (no TF32), as torch.matmul computes it by default
    _launch(a, b, c, M, N, K, "ieee" if a.dtype == torch.float32 else "tf32")
    return c


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return matmul(a, b)
