"""CUDA C++ kernels over the rows of the last dimension (softmax, rmsnorm, layernorm, reduce): one template, its knobs,
and a family's search space in CUDA C++ (`row_space`). The rendered candidate is one Python file that builds its
kernels with `torch.utils.cpp_extension.load_inline` at import, launching on the current stream, as the CUDA contract
asks (prompts/cuda_contract.md).

The knobs, each a move of the offline search:
- `rows_per`: `block` (a row to a block of `threads`; the reductions cross warps through shared memory) or `warp` (a
  row to each warp, `threads / 32` rows a block; the reductions stay in the warp). A warp a row suits short rows: a
  4096-wide bf16 row is 8 KB, 256 bytes a lane.
- `threads`: the threads of a block (128 to 1024).
- `vec_bytes`: the bytes one load or store moves (4, 8, 16: up to 8 bf16 or 4 fp32 elements), where the row's length
  and the tensors' addresses allow it (the launcher checks; otherwise one element at a time).
- `reduce`: `shuffle` (warp shuffles, then one value a warp through shared memory) or `shared` (a shared-memory tree).
- `stash` (families that read a row more than once): `global` (each pass re-reads x through L1/L2), `shared` (the
  first pass keeps the row in dynamic shared memory for the others, where it fits in 200 KB) or `registers` (each
  thread loads its part of the row once, every load issued before any is used, and holds it in registers for the
  later passes: up to `reg_bytes` a thread, 64 KB a block-wide row; a longer row, or one the vectors do not fit, is
  kept in shared memory where it fits, else re-read).

Why `registers` (softmax's default): at 4096 x 32000 bf16 on an H100, `global` (256 threads, eight blocks and 512 KB
of rows live an SM, 67 MB across the GPU, more than the 50 MB L2) re-read its rows from DRAM in the later passes
and moved 1.4 TB/s of useful bytes against the Triton starter's 2.0 (0.3735 ms vs 0.2590, 2026-12-06).

A family gives its part as `RowOp`: the kernel's extra parameters, its body over the row (`each` visits the row's
elements, `write` stores y = f(column, x)), the host function's signature and the output's allocation. A pass after
the first re-reads x through L1/L2, or from shared memory or registers (`stash`); bytes and FLOPs are the family's
(spec.py). A family's own defaults (`RowOp.default`) override the shared ones (`DEFAULT`).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from kernelsearch.families.space import Move, SearchSpace, fill

PARAMS: dict[str, list[Any]] = {"rows_per": ["block", "warp"], "threads": [128, 256, 512, 1024],
                                "vec_bytes": [4, 8, 16], "reduce": ["shuffle", "shared"]}
DEFAULT = {"rows_per": "block", "threads": 256, "vec_bytes": 16, "reduce": "shuffle"}
STASH = {"global": 0, "shared": 1, "registers": 2}   # the template's STASH_* constants


def reg_bytes(threads: int) -> int:
    """The bytes of its row a thread holds in registers under `stash: registers`: 64 KB over the block's threads, at
    most 256 (64 registers): 64 registers of data at 128 and 256 threads, 32 at 512, 16 at 1024, which leaves
    room for the rest under `__launch_bounds__(threads)` with no spills. Compiled for sm_90a with nvcc 13.0
    (softmax, bf16, 2026-12-06): 92 registers a thread at 256 threads, 56 at 512, 32 at 1024, so two blocks (two
    64 KB rows) an SM at each: one block's loads in flight while the other computes. (`__launch_bounds__(threads,
    2)` would promise that, but a template argument cannot set it for this instantiation alone, and an explicit
    minimum of 1 for the others let ptxas take up to 78 registers where it takes 32 now.)"""
    return min(256, 65536 // threads)


@dataclass(frozen=True)
class RowOp:
    family: str           # the family's name: the extension's and the file's
    title: str            # what the kernel computes, for the file's docstring
    fn: str               # the host function Python calls
    kernel_params: str    # the kernel's parameters after x and y ("const T* __restrict__ w, float eps, ")
    body: str             # the kernel's work on its row (CUDA C++; `each`, `write`, `row_reduce<Sum|Max>`)
    host_params: str      # the host function's parameters after x (", torch::Tensor w, double eps")
    host_check: str       # host checks and contiguous copies of the extra tensors
    host_args: str        # what the launcher passes after x and y (`ptr<T>(w), (float)eps, `)
    launch_params: str    # the launcher's parameters after x and y ("const torch::Tensor& w, float eps, ")
    launch_args: str      # the dispatch's arguments to the launcher after x and y ("w, (float)eps, ")
    out: str              # the output's allocation
    per_row_out: bool     # y holds one value a row (written by lane 0, never in vectors)
    passes: int           # reads of the row: where more than one, the row may be kept in shared memory (`stash`)
    module: str           # the Python side: ModelNew calling `_EXT.<fn>`
    default: dict[str, Any] = field(default_factory=dict)   # the family's knobs where they differ from DEFAULT


_REDUCE = {
    "shuffle": """
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (ROW_PER_WARP) return v;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();   // the scratch of the previous reduction is free
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? scratch[lane] : Op::id();
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;""",
    "shared": """
    if (ROW_PER_WARP) {   // the warp's 32 values through its own 32 slots
        float* s = scratch + (threadIdx.x / 32) * 32;
        const int lane = threadIdx.x % 32;
        s[lane] = v;
        __syncwarp();
        for (int o = 16; o > 0; o >>= 1) {
            if (lane < o) s[lane] = op(s[lane], s[lane + o]);
            __syncwarp();
        }
        v = s[0];
        __syncwarp();
        return v;
    }
    __syncthreads();
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int o = THREADS / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) scratch[threadIdx.x] = op(scratch[threadIdx.x], scratch[threadIdx.x + o]);
        __syncthreads();
    }
    v = scratch[0];
    __syncthreads();
    return v;""",
}

_CUDA = r'''
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector>

constexpr int THREADS = $THREADS;          // threads a block
constexpr int VEC_BYTES = $VEC_BYTES;      // bytes a vector load or store moves, where the row allows it
constexpr bool ROW_PER_WARP = $ROW_PER_WARP;  // a row to each warp (else a row to the block)
// where the passes after the first read the row: re-read through L1/L2, kept in shared memory by the first pass
// (where it fits), or held in registers by the first pass (where it fits, else as STASH_SHARED)
constexpr int STASH_GLOBAL = 0, STASH_SHARED = 1, STASH_REGISTERS = 2;
constexpr int STASH = $STASH;
constexpr size_t STASH_MAX = 200 * 1024;   // of the 227 KB a block may have on sm_90
constexpr int REG_BYTES = $REG_BYTES;       // of the row a thread holds in registers (STASH_REGISTERS)

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half(v); }

template <typename T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };

// the compiler must take v as changed here: a row held in registers stays packed between passes (else the bf16 to
// fp32 conversions of the first pass are kept for the later ones, two registers an element where one holds two)
template <typename T, int N> __device__ __forceinline__ void opaque(Vec<T, N>& v) {
    if constexpr (sizeof(v) % 4 == 0) {   // (held vectors are VEC_BYTES: whole 32-bit words)
        unsigned* w = reinterpret_cast<unsigned*>(&v);
        #pragma unroll
        for (int i = 0; i < (int)(sizeof(v) / 4); ++i) asm volatile("" : "+r"(w[i]));
    }
}

struct Sum {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
    __device__ __forceinline__ static float id() { return 0.f; }
};
struct Max {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
    __device__ __forceinline__ static float id() { return -INFINITY; }
};

// the reduction over the threads that share a row (its warp, or its block): every one of them gets the result
template <typename Op>
__device__ __forceinline__ float row_reduce(float v, float* scratch) {
    Op op;
    $REDUCE
}

template <typename T, int V, int S>   // S: where the passes after the first read the row (STASH_*)
__global__ void __launch_bounds__(THREADS) ${FAMILY}_kernel(
        const T* __restrict__ x, T* __restrict__ y, ${KERNEL_PARAMS}
        long rows, int cols) {
    __shared__ float scratch[THREADS];
    extern __shared__ __align__(16) unsigned char stash_raw[];
    const int width = ROW_PER_WARP ? 32 : THREADS;
    const int lane = ROW_PER_WARP ? threadIdx.x % 32 : threadIdx.x;
    const long row = ROW_PER_WARP ? (long)blockIdx.x * (THREADS / 32) + threadIdx.x / 32 : (long)blockIdx.x;
    if (row >= rows) return;   // (a whole warp: the reductions of a warp's row stay in it)
    const T* xr = x + row * cols;
    // STASH_SHARED: the row's copy in shared memory; each thread reads back only what it wrote there (no barrier)
    T* st = reinterpret_cast<T*>(stash_raw) + (ROW_PER_WARP ? (size_t)(threadIdx.x / 32) * cols : 0);
    bool stashed = false;
    auto load = [&](int c) {
        if (S == STASH_SHARED && stashed) return *reinterpret_cast<const Vec<T, V>*>(st + c);
        const Vec<T, V> a = *reinterpret_cast<const Vec<T, V>*>(xr + c);
        if (S == STASH_SHARED) *reinterpret_cast<Vec<T, V>*>(st + c) = a;
        return a;
    };
    // STASH_REGISTERS: this thread's R vectors of the row (columns (i * width + lane) * V), all loads issued at once
    constexpr int R = S == STASH_REGISTERS ? REG_BYTES / (V * (int)sizeof(T)) : 1;
    Vec<T, V> held[R];
    auto hold = [&]() {
        if (stashed) {   // a later pass: the held words, never the first pass's conversions of them
            #pragma unroll
            for (int i = 0; i < R; ++i) opaque(held[i]);
            return;
        }
        #pragma unroll
        for (int i = 0; i < R; ++i) {
            const int c = (i * width + lane) * V;
            if (c < cols) held[i] = *reinterpret_cast<const Vec<T, V>*>(xr + c);
        }
        stashed = true;
    };
    auto each = [&](auto&& f) {   // f(column, x) over this thread's elements, V at a time
        if constexpr (S == STASH_REGISTERS) {
            hold();
            #pragma unroll
            for (int i = 0; i < R; ++i) {
                const int c = (i * width + lane) * V;
                if (c < cols) {
                    #pragma unroll
                    for (int k = 0; k < V; ++k) f(c + k, to_f(held[i].v[k]));
                }
            }
        } else {
            for (int c = lane * V; c < cols; c += width * V) {
                const Vec<T, V> a = load(c);
                #pragma unroll
                for (int k = 0; k < V; ++k) f(c + k, to_f(a.v[k]));
            }
        }
        stashed = true;
    };
    auto write = [&](auto&& g) {   // y[column] = g(column, x), V at a time
        T* yr = y + row * cols;
        if constexpr (S == STASH_REGISTERS) {
            hold();
            #pragma unroll
            for (int i = 0; i < R; ++i) {
                const int c = (i * width + lane) * V;
                if (c < cols) {
                    Vec<T, V> b;
                    #pragma unroll
                    for (int k = 0; k < V; ++k) b.v[k] = from_f<T>(g(c + k, to_f(held[i].v[k])));
                    *reinterpret_cast<Vec<T, V>*>(yr + c) = b;
                }
            }
        } else {
            for (int c = lane * V; c < cols; c += width * V) {
                const Vec<T, V> a = load(c);
                Vec<T, V> b;
                #pragma unroll
                for (int k = 0; k < V; ++k) b.v[k] = from_f<T>(g(c + k, to_f(a.v[k])));
                *reinterpret_cast<Vec<T, V>*>(yr + c) = b;
            }
        }
    };
    $BODY
}

template <typename T> const T* cptr(const torch::Tensor& t) { return reinterpret_cast<const T*>(t.data_ptr()); }
template <typename T> T* mptr(torch::Tensor& t) { return reinterpret_cast<T*>(t.data_ptr()); }

template <typename T, int V, int S>
void launch(const torch::Tensor& x, torch::Tensor& y,
            ${LAUNCH_PARAMS}long rows, int cols, size_t smem) {
    const long per_block = ROW_PER_WARP ? THREADS / 32 : 1;
    const dim3 grid((unsigned)((rows + per_block - 1) / per_block));
    auto kernel = ${FAMILY}_kernel<T, V, S>;
    if (S == STASH_SHARED)
        C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<grid, THREADS, smem, at::cuda::getCurrentCUDAStream()>>>(
        cptr<T>(x), mptr<T>(y), ${HOST_ARGS}rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int V>
void stash_or_not(const torch::Tensor& x, torch::Tensor& y,
                  ${LAUNCH_PARAMS}long rows, int cols) {
    if constexpr (STASH == STASH_REGISTERS && V * (int)sizeof(T) == VEC_BYTES) {   // the vectors REG_BYTES is for
        if (cols <= (ROW_PER_WARP ? 32 : THREADS) * (REG_BYTES / (int)sizeof(T)))
            return launch<T, V, STASH_REGISTERS>(x, y, ${LAUNCH_ARGS}rows, cols, 0);
    }
    if constexpr (STASH != STASH_GLOBAL) {
        const size_t smem = (size_t)(ROW_PER_WARP ? THREADS / 32 : 1) * cols * sizeof(T);
        if (smem <= STASH_MAX) return launch<T, V, STASH_SHARED>(x, y, ${LAUNCH_ARGS}rows, cols, smem);
    }
    launch<T, V, STASH_GLOBAL>(x, y, ${LAUNCH_ARGS}rows, cols, 0);
}

template <typename T>
void dispatch(const torch::Tensor& x, torch::Tensor& y,
              ${LAUNCH_PARAMS}long rows, int cols) {
    constexpr int V = VEC_BYTES / (int)sizeof(T) > 0 ? VEC_BYTES / (int)sizeof(T) : 1;
    const auto aligned = [](const torch::Tensor& t) {
        return reinterpret_cast<uintptr_t>(t.data_ptr()) % (V * sizeof(T)) == 0;
    };
    if (V > 1 && cols % V == 0 && aligned(x) && ($PER_ROW_OUT || aligned(y)))
        stash_or_not<T, V>(x, y, ${LAUNCH_ARGS}rows, cols);
    else
        stash_or_not<T, 1>(x, y, ${LAUNCH_ARGS}rows, cols);
}

torch::Tensor ${FN}(torch::Tensor x${HOST_PARAMS}) {
    TORCH_CHECK(x.is_cuda(), "${FAMILY}: x must be a CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "${FAMILY}: x needs a last dimension");
    x = x.contiguous();
    $HOST_CHECK
    const int cols = (int)x.size(-1);
    const long rows = cols ? (long)(x.numel() / cols) : 0;
    $OUT
    if (rows == 0 || cols == 0) return y;
    switch (x.scalar_type()) {
        case at::kFloat: dispatch<float>(x, y, ${LAUNCH_ARGS}rows, cols); break;
        case at::kHalf: dispatch<__half>(x, y, ${LAUNCH_ARGS}rows, cols); break;
        case at::kBFloat16: dispatch<__nv_bfloat16>(x, y, ${LAUNCH_ARGS}rows, cols); break;
        default: TORCH_CHECK(false, "${FAMILY}: unsupported dtype ", x.scalar_type());
    }
    return y;
}
'''

_FILE = '''"""$TITLE in CUDA C++: $HOW; $VEC-byte vector loads where the row
allows them, $REDUCTIONS$KEPT. Built once, at import, with load_inline; launched on the current stream."""
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""$CUDA"""

CPP_SRC = "torch::Tensor ${FN}(torch::Tensor x${HOST_PARAMS});"

_EXT = load_inline(name="$NAME", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   functions=["$FN"], extra_cuda_cflags=["-O3"], verbose=False)


$MODULE
'''


def render(op: RowOp, p: dict[str, Any]) -> str:
    """The candidate file of `op` at the knobs `p` (no header: SearchSpace.render adds it)."""
    values = {"THREADS": p["threads"], "VEC_BYTES": p["vec_bytes"], "REG_BYTES": reg_bytes(p["threads"]),
              "STASH": STASH[p.get("stash", "global")],
              "ROW_PER_WARP": "true" if p["rows_per"] == "warp" else "false", "REDUCE": _REDUCE[p["reduce"]],
              "FAMILY": op.family, "KERNEL_PARAMS": op.kernel_params, "BODY": op.body,
              "LAUNCH_PARAMS": op.launch_params,
              "HOST_ARGS": op.host_args, "LAUNCH_ARGS": op.launch_args, "PER_ROW_OUT": str(op.per_row_out).lower(),
              "FN": op.fn, "HOST_PARAMS": op.host_params, "HOST_CHECK": op.host_check, "OUT": op.out}
    cuda = "\n".join(line.rstrip() for line in fill(_CUDA, values).split("\n"))
    # a content-named extension: two variants never share torch's build folder
    name = f"ks_{op.family}_{hashlib.sha256((cuda + json.dumps(p, sort_keys=True)).encode()).hexdigest()[:12]}"
    how = ("a row to each warp" if p["rows_per"] == "warp" else "a row to each block") + f" of {p['threads']} threads"
    kept = {"registers": "; the row held in registers\nfrom its first pass to its last",
            "shared": "; the row kept in shared memory\nfrom its first pass to its last"}.get(p.get("stash"), "")
    reductions = "warp-shuffle reductions" if p["reduce"] == "shuffle" else "shared-memory tree reductions"
    return fill(_FILE, {"TITLE": op.title, "HOW": how, "VEC": p["vec_bytes"], "REDUCTIONS": reductions, "KEPT": kept,
                        "CUDA": cuda, "FN": op.fn, "HOST_PARAMS": op.host_params, "NAME": name, "MODULE": op.module})


def _moves() -> list[Move]:
    moves = [Move("Row per warp", "Give each warp a row of its own (threads / 32 rows a block): the reductions stay in "
                  "the warp, with no shared memory and no block barrier; suits rows of a few KB.",
                  {"rows_per": "warp"}, when=lambda p: p["rows_per"] == "block"),
             Move("Row per block", "Spread each row over a whole block: more threads share a long row's loads, the "
                  "reductions cross warps through shared memory.", {"rows_per": "block"},
                  when=lambda p: p["rows_per"] == "warp"),
             Move("Warp-shuffle reductions", "Reduce with __shfl_xor_sync inside each warp, then one value a warp "
                  "through shared memory: fewer barriers than a shared-memory tree.", {"reduce": "shuffle"},
                  when=lambda p: p["reduce"] == "shared"),
             Move("Shared-memory tree reductions", "Reduce through a shared-memory tree instead of warp shuffles.",
                  {"reduce": "shared"}, when=lambda p: p["reduce"] == "shuffle")]
    for t in PARAMS["threads"]:
        moves.append(Move(f"{t} threads per block", f"Launch blocks of {t} threads: more threads hide more memory "
                          "latency per row; fewer leave more blocks resident per SM.", {"threads": t},
                          when=lambda p, t=t: p["threads"] != t))
    for v in PARAMS["vec_bytes"]:
        moves.append(Move(f"{v}-byte vector loads", f"Load and store {v} bytes per instruction (ld.global.v*): fewer "
                          "memory instructions per byte moved, where the row's length allows.", {"vec_bytes": v},
                          when=lambda p, v=v: p["vec_bytes"] != v))
    return moves


def row_space(op: RowOp, cases) -> SearchSpace:
    """A family's search space in CUDA C++: the template at `op`, its knobs and moves; every point runs at every
    case (a block's shared memory is `threads` floats, and a stashed row only where it fits: the launcher checks;
    its registers a few dozen a thread)."""
    params = {k: list(v) for k, v in PARAMS.items()}
    default = dict(DEFAULT)
    moves = _moves()
    if op.passes > 1:
        params["stash"], default["stash"] = list(STASH), "global"
        moves += [Move("Row kept in shared memory", f"The first of the row's {op.passes} passes copies it to shared "
                       "memory (up to 200 KB a block) and the later ones read it there: one read of x from global "
                       "memory instead of several through L1/L2.", {"stash": "shared"},
                       when=lambda p: p.get("stash") != "shared"),
                  Move("Row held in registers", f"The first of the row's {op.passes} passes loads each thread's part "
                       "of the row at once (every load in flight before any is used) and holds it in registers for "
                       "the later ones: one read of x, no shared-memory round trip; rows past 64 KB a block fall back "
                       "to shared memory.", {"stash": "registers"}, when=lambda p: p.get("stash") != "registers"),
                  Move("Row re-read from global memory", "Re-read the row from global memory (L1/L2) in each pass: "
                       "no dynamic shared memory, fewer registers, more blocks resident per SM.", {"stash": "global"},
                       when=lambda p: p.get("stash", "global") != "global")]
    unknown = set(op.default) - set(params)
    assert not unknown, f"{op.family}: defaults for knobs the space lacks: {sorted(unknown)}"
    default.update(op.default)
    return SearchSpace(params=params, default=default, template=lambda p: render(op, p), moves=moves,
                       tuning=["threads", "vec_bytes"], cases=cases)
