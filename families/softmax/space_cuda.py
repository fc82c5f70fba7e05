"""Softmax in CUDA C++ (families/cuda_rows.py): the row's max, then the sum of exp(x - max), then y = exp(x - max) /
sum: three reads of the row (the second and third through L1/L2, or from shared memory or registers where `stash`
keeps the row), one write. exp(x - max) is 2^(x log2 e - max log2 e): one FFMA and one MUFU.EX2 an element where
expf's range reduction takes about eight instructions (twice an element: the sum, then the write); the max's rounding
error in `ml` scales every exponential of the row alike and cancels in the division.

The default (the starter, starter_cuda.py): the row held in registers by blocks of 512 threads (128 bytes, 32
registers of data, a thread: a 64 KB row, the 32000-wide bf16 timed case, read from DRAM once, every load issued at
once; two blocks an SM). The shared defaults (`stash: global`, 256 threads) re-read the row through L1/L2 with eight
64 KB rows live an SM, more than L2 holds across the GPU: 0.3735 ms on an H100 vs the Triton starter's 0.2590
(2026-12-06). The new default is not yet timed on a GPU (bench/cuda_softmax_variants.py times it beside the others).
"""
from kernelsearch.families.cuda_rows import RowOp, row_space
from kernelsearch.families.softmax.spec import CASES

PASSES = 3   # reads of the row

OP = RowOp(
    family="softmax", title="Softmax over the last dimension", fn="softmax_rows",
    kernel_params="",
    body="""
    float m = -INFINITY;
    each([&](int, float v) { m = fmaxf(m, v); });
    m = row_reduce<Max>(m, scratch);
    constexpr float LOG2E = 1.4426950408889634f;
    const float ml = m * LOG2E;   // exp(v - m) = 2^(v log2 e - m log2 e)
    float s = 0.f;
    each([&](int, float v) { s += exp2f(fmaf(v, LOG2E, -ml)); });
    const float inv = 1.f / row_reduce<Sum>(s, scratch);
    write([&](int, float v) { return exp2f(fmaf(v, LOG2E, -ml)) * inv; });
""",
    host_params="", host_check="", host_args="", launch_params="", launch_args="",
    out="auto y = torch::empty_like(x);", per_row_out=False, passes=PASSES,
    default={"stash": "registers", "threads": 512},
    module='''class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _EXT.softmax_rows(x)
''')

CUDA_SPACE = row_space(OP, CASES)
