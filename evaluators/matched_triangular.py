"""The offline provider on a matrix product kept to one triangle: `torch.triu(A @ B, d)` or `torch.tril(A @ B, d)`
(KernelBench level 1, 14 and 15). The product is the matmul family's kernel and search space, at the problem's
shape; a second, generated Triton kernel then zeroes the other triangle of the product in place (one masked store
over the output: at 4096 x 4096 fp32 64 MB written, about 15 us at the H200's copy bandwidth, against the product's
137 GFLOP). The reference multiplies whole matrices and then masks, so the kernel does too: it assumes nothing of
its inputs (KernelBench draws triangular ones; the judge's signed-input case keeps their zeros).
"""
from __future__ import annotations

import torch

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
    from kernelsearch.evaluators.match import (
        _LAYOUT,
        Match,
        _core,
        _operand,
        _result,
        _shape,
        _with_helper,
        adapted_space,
    )
    from kernelsearch.evaluators.problem import Case
    from kernelsearch.evaluators.trace import meta, op_name

    ops = _core(traced, {"mm", "triu", "tril"} | _LAYOUT)
    if not ops:
        return None
    cores = [n for n in ops if op_name(n) == "mm"]
    masks = [n for n in ops if op_name(n) in ("triu", "tril")]
    out = _result(traced)
    if len(cores) != 1 or len(masks) != 1 or out is not masks[0] or out.args[0] is not cores[0]:
        return None
    mm = cores[0]
    a, b = (_operand(traced, mm.args[i]) for i in (0, 1))
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
    summary = (f"{op_name(out)} (the {which} triangle, diagonal {diagonal}) of the mm of {_shape(a[1])} and "
               f"{_shape(b[1])}")
    body = [f"y = matmul({a[0]}, {b[0]})", f"return _triangle(y, {diagonal}, {upper})"]
    space = adapted_space("matmul", traced, body, summary, case=case, case_limits=True)
    return Match("matmul_triangle", summary, _with_helper(space, TRIANGLE_HELPER))
