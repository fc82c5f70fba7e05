"""WRONG (must fail on a GPU): y = x * rstd, the learned weight never applied (the reference's weight is drawn at
random). The family's CUDA C++ starter (starter_cuda.py) with that one change."""
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector>

constexpr int THREADS = 256;          // threads a block
constexpr int VEC_BYTES = 16;      // bytes a vector load or store moves, where the row allows it
constexpr bool ROW_PER_WARP = false;  // a row to each warp (else a row to the block)
// where the passes after the first read the row: re-read through L1/L2, kept in shared memory by the first pass
// (where it fits), or held in registers by the first pass (where it fits, else as STASH_SHARED)
constexpr int STASH_GLOBAL = 0, STASH_SHARED = 1, STASH_REGISTERS = 2;
constexpr int STASH = 0;
constexpr size_t STASH_MAX = 200 * 1024;   // of the 227 KB a block may have on sm_90
constexpr int REG_BYTES = 256;       // of the row a thread holds in registers (STASH_REGISTERS)

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
    return v;
}

template <typename T, int V, int S>   // S: where the passes after the first read the row (STASH_*)
__global__ void __launch_bounds__(THREADS) rmsnorm_kernel(
        const T* __restrict__ x, T* __restrict__ y, const T* __restrict__ w, float eps,
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
    float ss = 0.f;
    each([&](int, float v) { ss += v * v; });
    const float r = rsqrtf(row_reduce<Sum>(ss, scratch) / cols + eps);
    write([&](int c, float v) { return v * r; });
}

template <typename T> const T* cptr(const torch::Tensor& t) { return reinterpret_cast<const T*>(t.data_ptr()); }
template <typename T> T* mptr(torch::Tensor& t) { return reinterpret_cast<T*>(t.data_ptr()); }

template <typename T, int V, int S>
void launch(const torch::Tensor& x, torch::Tensor& y,
            const torch::Tensor& w, float eps, long rows, int cols, size_t smem) {
    const long per_block = ROW_PER_WARP ? THREADS / 32 : 1;
    const dim3 grid((unsigned)((rows + per_block - 1) / per_block));
    auto kernel = rmsnorm_kernel<T, V, S>;
    if (S == STASH_SHARED)
        C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kernel<<<grid, THREADS, smem, at::cuda::getCurrentCUDAStream()>>>(
        cptr<T>(x), mptr<T>(y), cptr<T>(w), eps, rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int V>
void stash_or_not(const torch::Tensor& x, torch::Tensor& y,
                  const torch::Tensor& w, float eps, long rows, int cols) {
    if constexpr (STASH == STASH_REGISTERS && V * (int)sizeof(T) == VEC_BYTES) {   // the vectors REG_BYTES is for
        if (cols <= (ROW_PER_WARP ? 32 : THREADS) * (REG_BYTES / (int)sizeof(T)))
            return launch<T, V, STASH_REGISTERS>(x, y, w, (float)eps, rows, cols, 0);
    }
    if constexpr (STASH != STASH_GLOBAL) {
        const size_t smem = (size_t)(ROW_PER_WARP ? THREADS / 32 : 1) * cols * sizeof(T);
        if (smem <= STASH_MAX) return launch<T, V, STASH_SHARED>(x, y, w, (float)eps, rows, cols, smem);
    }
    launch<T, V, STASH_GLOBAL>(x, y, w, (float)eps, rows, cols, 0);
}

template <typename T>
void dispatch(const torch::Tensor& x, torch::Tensor& y,
              const torch::Tensor& w, float eps, long rows, int cols) {
    constexpr int V = VEC_BYTES / (int)sizeof(T) > 0 ? VEC_BYTES / (int)sizeof(T) : 1;
    const auto aligned = [](const torch::Tensor& t) {
        return reinterpret_cast<uintptr_t>(t.data_ptr()) % (V * sizeof(T)) == 0;
    };
    if (V > 1 && cols % V == 0 && aligned(x) && (false || aligned(y)))
        stash_or_not<T, V>(x, y, w, (float)eps, rows, cols);
    else
        stash_or_not<T, 1>(x, y, w, (float)eps, rows, cols);
}

torch::Tensor rmsnorm_rows(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda(), "rmsnorm: x must be a CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "rmsnorm: x needs a last dimension");
    x = x.contiguous();
    TORCH_CHECK(w.scalar_type() == x.scalar_type() && w.numel() == x.size(-1), "rmsnorm: w must match x's last dim");
    w = w.contiguous();
    const int cols = (int)x.size(-1);
    const long rows = cols ? (long)(x.numel() / cols) : 0;
    auto y = torch::empty_like(x);
    if (rows == 0 || cols == 0) return y;
    switch (x.scalar_type()) {
        case at::kFloat: dispatch<float>(x, y, w, (float)eps, rows, cols); break;
        case at::kHalf: dispatch<__half>(x, y, w, (float)eps, rows, cols); break;
        case at::kBFloat16: dispatch<__nv_bfloat16>(x, y, w, (float)eps, rows, cols); break;
        default: TORCH_CHECK(false, "rmsnorm: unsupported dtype ", x.scalar_type());
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor rmsnorm_rows(torch::Tensor x, torch::Tensor w, double eps);"

_EXT = load_inline(name="ks_wrong_rmsnorm_5a06853c42ad", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                   functions=["rmsnorm_rows"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _EXT.rmsnorm_rows(x, self.weight, self.eps)
