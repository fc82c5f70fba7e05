"""Softmax in CUDA C++ (families/cuda_rows.py): the row's max, then the sum of exp(x - max), then y = exp(x - max) /
sum: three reads of the row (the second and third through L1/L2, or from shared memory where `stash` keeps the row),
one write. The starter: starter_cuda.py."""
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
    float s = 0.f;
    each([&](int, float v) { s += expf(v - m); });
    const float inv = 1.f / row_reduce<Sum>(s, scratch);
    write([&](int, float v) { return expf(v - m) * inv; });
""",
    host_params="", host_check="", host_args="", launch_params="", launch_args="",
    out="auto y = torch::empty_like(x);", per_row_out=False, passes=PASSES,
    module='''class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _EXT.softmax_rows(x)
''')

CUDA_SPACE = row_space(OP, CASES)
