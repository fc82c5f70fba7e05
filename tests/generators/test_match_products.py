"""generators/matched_products.py: triu / tril of a matrix product (KernelBench 14 and 15 in kind), matched from
KernelBench-format problems written here: the matmul family's product and a generated masking kernel agree with
the reference on the interpreter, through the judge too; a kernel that keeps the wrong triangle fails; a graph just
outside the pattern is not matched as one."""
from __future__ import annotations

import pytest

from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.settings import EvalSettings
from tests.generators.test_match import _agrees, _problem

FORWARD = "    def forward(self, A, B):\n        return {expr}"


def _tri(tmp_path, name: str, expr: str, inputs: str = "[torch.triu(torch.rand(N, N)), torch.triu(torch.rand(N, N))]"):
    return _problem(tmp_path, name, FORWARD.format(expr=expr), inputs, sizes="N = 40")


def test_upper_and_lower_triangles_of_a_product_agree_at_several_points(tmp_path):
    up = _tri(tmp_path, "triu", "torch.triu(torch.matmul(A, B))")
    m = match_problem(up)
    assert m.kind == "matmul_triangle" and m.summary.startswith("triu (the upper triangle, diagonal 0) of the mm")
    for p in (m.space.default, {**m.space.default, "BM": 64, "BN": 64, "num_warps": 4}):
        _agrees(up, m.space.render(p))
    low = _tri(tmp_path, "tril", "torch.tril(A @ B.t(), diagonal=-1)",
               "[torch.tril(torch.rand(N, N)), torch.tril(torch.rand(N, N))]")
    m = match_problem(low)
    assert m.kind == "matmul_triangle" and "diagonal -1" in m.summary and "B.t()" in m.space.render(m.space.default)
    _agrees(low, m.space.render(m.space.default))


def test_the_wrong_triangle_or_diagonal_fails(tmp_path):
    up = _tri(tmp_path, "triu_wrong", "torch.triu(torch.matmul(A, B), 1)")
    code = match_problem(up).space.render(match_problem(up).space.default)
    assert "_triangle(y, 1, True)" in code
    with pytest.raises(AssertionError):
        _agrees(up, code.replace("_triangle(y, 1, True)", "_triangle(y, 1, False)"))
    with pytest.raises(AssertionError):
        _agrees(up, code.replace("_triangle(y, 1, True)", "_triangle(y, 0, True)"))


def test_a_graph_just_outside_the_pattern_is_not_matched_as_a_triangle(tmp_path):
    for name, expr in (("triu_plus", "torch.triu(torch.matmul(A, B)) + 1.0"),
                       ("triu_of_sum", "torch.triu(A + B)")):
        try:
            m = match_problem(_tri(tmp_path, name, expr))
        except Unmatched:
            continue
        assert m.kind != "matmul_triangle", (name, m.summary)


@pytest.mark.slow   # 7-10 s a call on a 2-core machine: CI runs it (make test-slow)
def test_the_offline_first_kernel_is_ok_through_the_judge(tmp_path):
    up = _tri(tmp_path, "triu_judged", "torch.triu(torch.matmul(A, B))")
    m = match_problem(up)
    r = evaluate(up, m.space.render(m.space.default), EvalSettings(trials=1, timing_iters=2, aot_compile=False),
                 mode="cpu", seed=3)
    assert r.status.value == "ok", (r.status, r.reason)
    assert r.detail["signed"]["run"] is True   # triangular rand inputs are one-signed: the signed case ran too


EINSUM = "    def forward(self, A, B):\n        return torch.einsum({eq!r}, A, B)"


def _einsum(tmp_path, name: str, eq: str, sizes: str = "b = 3\ni = 16\nj = 12\nl = 10\nk = 24"):
    return _problem(tmp_path, name, EINSUM.format(eq=eq), "[torch.rand(b, i, j, l), torch.rand(l, k)]", sizes=sizes)


@pytest.mark.slow   # 7-10 s a call on a 2-core machine: CI runs it (make test-slow)
def test_a_4d_tensor_times_a_matrix_is_the_mm_of_its_rows(tmp_path):
    p = _einsum(tmp_path, "einsum4d", "bijl,lk->bijk")
    m = match_problem(p)
    assert (m.kind, m.summary) == ("matmul", "3x16x12x10 float32 times 10x24 float32 over its last dim, as an mm of "
                                   "576 rows")
    for point in (m.space.default, {**m.space.default, "BM": 64, "BN": 64, "num_warps": 4}):
        _agrees(p, m.space.render(point))
    r = evaluate(p, m.space.render(m.space.default), EvalSettings(trials=1, timing_iters=2, aot_compile=False),
                 mode="cpu", seed=4)
    assert r.status.value == "ok", (r.status, r.reason)


def test_a_product_whose_layout_ops_permute_the_result_is_not_taken_for_it(tmp_path):
    """Same shapes (i == j), other values: the check at a small case refuses what the shapes alone would accept."""
    p = _einsum(tmp_path, "einsum_permuted", "bijl,lk->bjik", sizes="b = 3\ni = 12\nj = 12\nl = 10\nk = 24")
    with pytest.raises(Unmatched):   # (without the check it was matched as the plain product: wrong values)
        match_problem(p)
