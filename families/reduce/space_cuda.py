"""Sum over the last dimension in CUDA C++ (families/cuda_rows.py): one read of the row, its sum in fp32, one value a
row written by the row's first thread, in x's dtype. The starter: starter_cuda.py."""
from kernelsearch.families.cuda_rows import RowOp, row_space
from kernelsearch.families.reduce.spec import CASES

OP = RowOp(
    family="reduce", title="Sum over the last dimension", fn="sum_rows",
    kernel_params="",
    body="""
    float s = 0.f;
    each([&](int, float v) { s += v; });
    s = row_reduce<Sum>(s, scratch);
    if (lane == 0) y[row] = from_f<T>(s);
""",
    host_params="", host_check="", host_args="", launch_params="", launch_args="",
    out="auto y = torch::empty(std::vector<int64_t>(x.sizes().begin(), x.sizes().end() - 1), x.options());",
    per_row_out=True, passes=1,
    module='''class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _EXT.sum_rows(x)
''')

CUDA_SPACE = row_space(OP, CASES)
