"""The offline provider on two more shapes of a matrix product, each the matmul family's kernel and search space at
the problem's shape:
- a product kept to one triangle, `torch.triu(A @ B, d)` or `torch.tril(A @ B, d)` (KernelBench level 1, 14 and
  15): a second, generated Triton kernel zeroes the other triangle of the product in place (one masked store over
  the output: at 4096 x 4096 fp32 64 MB written, about 15 us at the H200's copy bandwidth, against the product's
  137 GFLOP). The reference multiplies whole matrices and then masks, so the kernel does too: it assumes nothing of
  its inputs (KernelBench draws triangular ones; the judge's signed-input case keeps their zeros);
- a tensor of three or more dims times a matrix over its last dim (`torch.einsum("bijl,lk->bijk", A, B)`, level 1's
  11), whatever layout ops the trace made of it: the product of A flattened to rows and B, viewed back. The graph is
  layout ops around one mm or bmm, so the matcher runs the reference once at the problem's smallest interpreter
  case and keeps the match only where that product agrees with it (a permutation the layout ops made would not).
"""
from __future__ import annotations

import torch

from kernelsearch.generators.common import LAYOUT, Match, adapted_space, core_ops, operand, shape_text, with_helper

TRIANGLE_HELPER = '''

@triton.jit
def _triangle_kernel(y_ptr, M, N, stride_m, stride_n, diagonal, UPPER: tl.constexpr, BM: tl.constexpr,
                     BN: tl.constexpr):
    # zero the product's elements outside the kept triangle: triu keeps col - row >= diagonal, tril <= diagonal
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    r = rows[:, None]
    c = cols[None, :]
    if UPPER:
        drop = (c - r) < diagonal
    else:
        drop = (c - r) > diagonal
    zero = tl.zeros([BM, BN], dtype=y_ptr.dtype.element_ty)
    tl.store(y_ptr + r.to(tl.int64) * stride_m + c.to(tl.int64) * stride_n, zero, mask=(r < M) & (c < N) & drop)


def _triangle(y, diagonal, upper):
    M, N = y.shape
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    _triangle_kernel[grid](y, M, N, y.stride(0), y.stride(1), diagonal, UPPER=upper, BM=64, BN=64, num_warps=4)
    return y
'''


def match_triangular(traced):
    """triu / tril of one 2-D product (operands as the matmul matcher reads them: arguments, transposed), or None."""
    from kernelsearch.generators.trace import meta, op_name
    from kernelsearch.judge.problem import Case

    ops = core_ops(traced, {"mm", "triu", "tril"} | LAYOUT)
    if not ops:
        return None
    cores = [n for n in ops if op_name(n) == "mm"]
    masks = [n for n in ops if op_name(n) in ("triu", "tril")]
    out = traced.output
    if len(cores) != 1 or len(masks) != 1 or out is not masks[0] or out.args[0] is not cores[0]:
        return None
    mm = cores[0]
    a, b = (operand(traced, mm.args[i]) for i in (0, 1))
    if a is None or b is None or isinstance(a[1], tuple) or isinstance(b[1], tuple) or a[1].dtype != b[1].dtype:
        return None
    diagonal = out.args[1] if len(out.args) > 1 else out.kwargs.get("diagonal", 0)
    if not isinstance(diagonal, int):
        return None
    upper = op_name(out) == "triu"
    ma, mc = meta(mm.args[0]), meta(mm)
    if ma is None or mc is None or mc.dim() != 2:
        return None
    dtype = str(a[1].dtype).removeprefix("torch.")
    if a[1].dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    case = Case("problem", {"m": int(mc.shape[0]), "n": int(mc.shape[1]), "k": int(ma.shape[1])}, dtype, timed=True)
    which = "upper" if upper else "lower"
    summary = (f"{op_name(out)} (the {which} triangle, diagonal {diagonal}) of the mm of {shape_text(a[1])} and "
               f"{shape_text(b[1])}")
    body = [f"y = matmul({a[0]}, {b[0]})", f"return _triangle(y, {diagonal}, {upper})"]
    space = adapted_space("matmul", traced, body, summary, case=case, case_limits=True)
    return Match("matmul_triangle", summary, with_helper(space, TRIANGLE_HELPER))


FLAT_CHECK_ELEMENTS = 1 << 20   # the reference is run once at a case this small (inputs' elements), or no match


def match_flattened_product(traced):
    """A (..., l) tensor times an (l, k) matrix over its last dim, through layout ops and one mm or bmm, or None."""
    from kernelsearch.generators.trace import meta, op_name
    from kernelsearch.judge.problem import Case

    ops = core_ops(traced, {"mm", "bmm", "unsqueeze", "squeeze"} | LAYOUT)
    if not ops or len([n for n in ops if op_name(n) in ("mm", "bmm")]) != 1 or len(traced.inputs) != 2:
        return None
    a, b = traced.inputs
    out = meta(traced.output)
    if a.kind != "tensor" or b.kind != "tensor" or len(a.shape) < 3 or len(b.shape) != 2 or a.dtype != b.dtype \
            or out is None or a.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return None
    if a.shape[-1] != b.shape[0] or tuple(out.shape) != (*a.shape[:-1], b.shape[1]):
        return None
    if not _agrees_at_a_small_case(traced.problem):
        return None
    m = 1
    for d in a.shape[:-1]:
        m *= int(d)
    case = Case("problem", {"m": m, "n": int(b.shape[1]), "k": int(b.shape[0])},
                str(a.dtype).removeprefix("torch."), timed=True)
    summary = f"{shape_text(a)} times {shape_text(b)} over its last dim, as an mm of {m} rows"
    body = [f"return matmul({a.name}.reshape(-1, {a.name}.shape[-1]), {b.name}).reshape(*{a.name}.shape[:-1], -1)"]
    return Match("matmul", summary, adapted_space("matmul", traced, body, summary, case=case, case_limits=True))


def _agrees_at_a_small_case(problem) -> bool:
    """Whether the reference equals `(A.reshape(-1, l) @ B).reshape(..., k)` at the problem's smallest case."""
    if problem is None:
        return False
    try:
        case = problem.cases_for("cpu")[0]
        inputs = problem.build_inputs(case, 0, "cpu")
        if sum(t.numel() for t in inputs if isinstance(t, torch.Tensor)) > FLAT_CHECK_ELEMENTS:
            return False
        a, b = (t.to(torch.float64) for t in inputs)
        torch.manual_seed(0)
        ref = problem.module.Model(*problem.build_init_inputs(case)).to(torch.float64)
        with torch.no_grad():
            want = ref(a, b)
        got = (a.reshape(-1, a.shape[-1]) @ b).reshape(*a.shape[:-1], -1)
        return want.shape == got.shape and bool(torch.allclose(want, got, rtol=1e-9, atol=1e-9))
    except Exception:   # noqa: BLE001 - a reference that cannot run here is simply not this pattern
        return False
