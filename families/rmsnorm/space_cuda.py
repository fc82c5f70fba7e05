"""RMSNorm in CUDA C++ (families/cuda_rows.py): the row's sum of squares in fp32, then y = x * rsqrt(mean + eps) * w,
rounded once: two reads of the row (the second through L1/L2, or from shared memory where `stash` keeps the row),
one write. The starter: starter_cuda.py."""
from kernelsearch.families.cuda_rows import RowOp, row_space
from kernelsearch.families.rmsnorm.spec import CASES

PASSES = 2   # reads of the row

OP = RowOp(
    family="rmsnorm", title="RMSNorm over the last dimension", fn="rmsnorm_rows",
    kernel_params="const T* __restrict__ w, float eps, ",
    body="""
    float ss = 0.f;
    each([&](int, float v) { ss += v * v; });
    const float r = rsqrtf(row_reduce<Sum>(ss, scratch) / cols + eps);
    write([&](int c, float v) { return v * r * to_f(w[c]); });
""",
    host_params=", torch::Tensor w, double eps",
    host_check="""
    TORCH_CHECK(w.scalar_type() == x.scalar_type() && w.numel() == x.size(-1), "rmsnorm: w must match x's last dim");
    w = w.contiguous();
""",
    host_args="cptr<T>(w), eps, ", launch_params="const torch::Tensor& w, float eps, ", launch_args="w, (float)eps, ",
    out="auto y = torch::empty_like(x);", per_row_out=False, passes=PASSES,
    module='''class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _EXT.rmsnorm_rows(x, self.weight, self.eps)
''')

CUDA_SPACE = row_space(OP, CASES)
