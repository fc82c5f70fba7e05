"""LayerNorm in CUDA C++ (families/cuda_rows.py): the row's mean, then its variance about the mean (two-pass: the
`offset` cases' mean of 128 defeats E[x^2] - E[x]^2 in fp32, spec.py), then y = (x - mean) * rstd * w + b: three
reads of the row (the second and third through L1/L2, or from shared memory where `stash` keeps the row), one write.
The starter: starter_cuda.py."""
from kernelsearch.families.cuda_rows import RowOp, row_space
from kernelsearch.families.layernorm.spec import CASES

PASSES = 3   # reads of the row

OP = RowOp(
    family="layernorm", title="LayerNorm over the last dimension", fn="layernorm_rows",
    kernel_params="const T* __restrict__ w, const T* __restrict__ b, float eps, ",
    body="""
    float s = 0.f;
    each([&](int, float v) { s += v; });
    const float mean = row_reduce<Sum>(s, scratch) / cols;
    float q = 0.f;
    each([&](int, float v) { q += (v - mean) * (v - mean); });
    const float r = rsqrtf(row_reduce<Sum>(q, scratch) / cols + eps);
    write([&](int c, float v) { return (v - mean) * r * to_f(w[c]) + to_f(b[c]); });
""",
    host_params=", torch::Tensor w, torch::Tensor b, double eps",
    host_check="""
    TORCH_CHECK(w.scalar_type() == x.scalar_type() && w.numel() == x.size(-1), "layernorm: w must match x's last dim");
    TORCH_CHECK(b.scalar_type() == x.scalar_type() && b.numel() == x.size(-1), "layernorm: b must match x's last dim");
    w = w.contiguous();
    b = b.contiguous();
""",
    host_args="cptr<T>(w), cptr<T>(b), eps, ",
    launch_params="const torch::Tensor& w, const torch::Tensor& b, float eps, ", launch_args="w, b, (float)eps, ",
    out="auto y = torch::empty_like(x);", per_row_out=False, passes=PASSES,
    module='''class ModelNew(torch.nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=getattr(torch, dtype)))
        self.bias = torch.nn.Parameter(torch.zeros(hidden_size, dtype=getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _EXT.layernorm_rows(x, self.weight, self.bias, self.eps)
''')

CUDA_SPACE = row_space(OP, CASES)
