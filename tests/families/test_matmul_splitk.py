"""Split-K and matrix-vector in the matmul family (issue 33): a product of few output tiles and a long K
(KernelBench's 256 x 256 x 524288) starts from split-K (K cut into ranges, fp32 partial tiles, a second kernel summing
them in order); a matrix-vector product (2048 x 1048576 @ 1048576 x 1) from the GEMV kernel. On the interpreter, at
small shapes written in KernelBench's format: correct through the judge, a reduction that drops a partial fails;
`_shaped` splits the long-K shape and not a square one; the kernels compile for sm_90 with no spills."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.families.matmul.space import PARAMS, SMS, SPACE, SPLIT_MIN_STEPS, TF32X3_MAX_K
from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.problem import Case, load_source_module
from kernelsearch.judge.settings import EvalSettings
from tests.generators.test_match import _agrees, _problem

MM = "    def forward(self, A, B):\n        return torch.matmul(A, B)"
SETTINGS = EvalSettings(trials=1, timing_iters=2, aot_compile=False)
DROP_LAST = ("for s in range(0, SPLITS):", "for s in range(0, SPLITS - 1):")


def _mm(tmp_path, name: str, m: int, k: int, n: int):
    return _problem(tmp_path, name, MM, "[torch.rand(M, K), torch.rand(K, N)]", sizes=f"M = {m}\nK = {k}\nN = {n}")


def _timed(problem) -> Case:
    return next(c for c in problem.cases if c.timed)


def _case(m, n, k, dtype="float32") -> Case:
    return Case("problem", {"m": m, "n": n, "k": k}, dtype, timed=True)


def test_shaped_splits_a_long_k_product_of_few_tiles_and_not_a_square_one():
    long_k = SPACE.default_for(_case(256, 256, 524288))   # KernelBench 6: 16 tiles of 64 x 64
    assert (long_k["variant"], long_k["BM"], long_k["BN"], long_k["split_k"]) == ("tiled", 64, 64, 16)
    assert SMS <= 16 * long_k["split_k"] <= 2 * SMS   # 256 programs: about 2 per SM
    # each fp32 accumulator sums 32768 terms there, over TF32X3_MAX_K: the ieee loop; a K that splits under it: 3xTF32
    assert long_k["fp32_precision"] == "ieee"
    assert SPACE.default_for(_case(256, 256, 65536))["fp32_precision"] == "tf32x3"
    for dtype in ("float32", "bfloat16"):
        assert SPACE.default_for(_case(4096, 4096, 4096, dtype))["split_k"] == 1
    assert SPACE.default_for(_case(32, 120, 200))["split_k"] == 1   # a short K is not split
    # matrix-vector: the GEMV kernel; 2048 rows at 4 a program are 512 programs, no split; 64 rows are split
    mv = SPACE.default_for(_case(2048, 1, 1048576))
    assert (mv["variant"], mv["split_k"]) == ("gemv", 1)
    few = SPACE.default_for(_case(64, 1, 1048576))
    assert few["variant"] == "gemv" and 16 * few["split_k"] >= SMS
    assert SPACE.default_for(_case(1, 4096, 4096, "bfloat16"))["variant"] == "gemv"


def test_split_moves_and_limits():
    long_k = _case(256, 256, 524288)
    start = SPACE.default_for(long_k)
    titles = {m.title for m, _ in SPACE.applicable(start, [long_k])}
    assert {"split K 32 ways", "no split-K"} <= titles
    # not at the family's own square timed case, whose tiles fill the device many times over
    assert not any("split" in m.title for m, _ in SPACE.applicable(SPACE.default))
    # split-K runs in the tiled and gemv launchers only; a move to another variant resets it
    assert "no split-K" in SPACE.limits({**start, "variant": "tma"}, long_k)
    moves = {m.title: new for m, new in SPACE.applicable(start, [long_k])}
    assert moves["persistent TMA"]["split_k"] == 1
    # each range keeps SPLIT_MIN_STEPS BK steps at the timed case: K = 4096 at BK 32 splits at most 32 ways
    short = _case(32, 32, 4096)
    assert SPACE.limits({**start, "split_k": 32}, short) is None
    assert "launcher clamps" in SPACE.limits({**start, "split_k": 64}, short)
    assert 4096 // 32 // SPLIT_MIN_STEPS == 32 and PARAMS["split_k"][-1] == 64
    # gemv at a product that is not matrix-vector is the tiled fallback: refused at the timed case
    assert "not a matrix-vector" in SPACE.limits({**start, "variant": "gemv", "split_k": 1}, long_k)
    mv = _case(2048, 1, 1048576)
    gemv = SPACE.default_for(mv)
    assert SPACE.limits(gemv, mv) is None
    assert "matrix-vector tile" in SPACE.limits({**gemv, "gemv_rows": 16, "gemv_block_k": 2048}, mv)
    titles = {m.title for m, _ in SPACE.applicable(gemv, [mv])}
    assert "8 rows a matrix-vector program" in titles and "split K 4 ways" in titles
    assert not any(t.startswith("tile ") or "stages" in t for t in titles)   # knobs gemv ignores are no ideas


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_a_long_k_product_is_matched_to_split_k_and_correct_through_the_judge(tmp_path):
    p = _mm(tmp_path, "long_k", 32, 4096, 32)
    m = match_problem(p)
    start = m.space.default
    assert (start["variant"], start["split_k"]) == ("tiled", 8)
    code = m.space.render(start)
    assert "_matmul_splitk_kernel[grid]" in code and "_splitk_reduce_kernel" in code and "tl.atomic" not in code
    r = evaluate(p, code, SETTINGS, mode="cpu", seed=3)   # cpu cases K = 129 and 1025: 1025 splits 8 ways
    assert r.status.value == "ok", (r.status, r.reason)
    # split 4 at the problem's own 32 x 32 x 4096, reproducible to the bit (a fixed order, no atomics)
    four = m.space.render({**start, "split_k": 4, "fp32_precision": "ieee"})
    got = _agrees(p, four, case=_timed(p))
    mod = load_source_module(four, "ks_test_splitk_again")
    xs = p.build_inputs(_timed(p), 7, "cpu")
    assert torch.equal(mod.ModelNew()(*xs), got)
    # the reduction stops one partial short: incorrect, in the judge and at the problem's shape
    r = evaluate(p, code.replace(*DROP_LAST), SETTINGS, mode="cpu", seed=3)
    assert r.status.value == "incorrect", (r.status, r.reason)
    with pytest.raises(AssertionError):
        _agrees(p, four.replace(*DROP_LAST), case=_timed(p))


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_a_matrix_vector_product_gets_the_gemv_kernel_and_is_correct_through_the_judge(tmp_path):
    p = _mm(tmp_path, "gemv", 64, 8192, 1)
    m = match_problem(p)
    start = m.space.default
    assert start["variant"] == "gemv"
    code = m.space.render(start)
    assert "tl.dot(" not in code.split("def _gemv_kernel")[1].split("def _launch")[0]
    r = evaluate(p, code, SETTINGS, mode="cpu", seed=5)
    assert r.status.value == "ok", (r.status, r.reason)
    # the K tail dropped (K = 257 and 1025 at the cpu cases): incorrect
    r = evaluate(p, code.replace("if k_left > 0:", "if k_left < 0:"), SETTINGS, mode="cpu", seed=5)
    assert r.status.value == "incorrect", (r.status, r.reason)
    # K split 4 ways at 64 x 8192 (K steps of 256: 8 a split) agrees; without its last partial it does not
    split = m.space.render({**start, "split_k": 4, "gemv_block_k": 256})
    _agrees(p, split, case=_timed(p))
    with pytest.raises(AssertionError):
        _agrees(p, split.replace(*DROP_LAST), case=_timed(p))


def test_a_row_vector_times_a_matrix_runs_the_gemv_kernel_over_columns(tmp_path):
    p = _mm(tmp_path, "row_gemv", 1, 3000, 200)
    m = match_problem(p)
    assert m.space.default["variant"] == "gemv"
    _agrees(p, m.space.render({**m.space.default, "split_k": 2, "gemv_block_k": 512}), case=_timed(p))


def test_a_matrix_times_a_1d_vector_is_matched_to_gemv_and_a_graph_outside_it_is_not(tmp_path):
    p = _problem(tmp_path, "mv1d", "    def forward(self, A, v):\n        return torch.matmul(A, v)",
                 "[torch.rand(M, K), torch.rand(K)]", sizes="M = 64\nK = 8192")
    m = match_problem(p)
    assert (m.kind, m.summary, m.space.default["variant"]) == ("matmul", "mv of 64x8192 float32 and 8192 float32",
                                                               "gemv")
    r = evaluate(p, m.space.render(m.space.default), SETTINGS, mode="cpu", seed=6)
    assert r.status.value == "ok", (r.status, r.reason)
    plus = _problem(tmp_path, "mv_plus", "    def forward(self, A, v):\n        return torch.matmul(A, v) + 1.0",
                    "[torch.rand(M, K), torch.rand(K)]", sizes="M = 64\nK = 8192")
    try:
        other = match_problem(plus)
    except Unmatched:   # no family for it
        return
    assert "mv of" not in other.summary


def test_per_split_k_bounds_3xtf32_as_the_whole_k_did():
    """3xTF32's possible truncation bias grows with the terms one tensor-core accumulator sums: with split-K that is
    K / split_k (the partials are added in fp32 on the CUDA cores), so the TF32X3_MAX_K rule reads K per split."""
    assert SPACE.default_for(_case(256, 256, 16 * TF32X3_MAX_K))["fp32_precision"] == "tf32x3"   # split 16
    assert SPACE.default_for(_case(256, 256, 32 * TF32X3_MAX_K))["fp32_precision"] == "ieee"


@pytest.mark.slow
def test_split_k_and_gemv_compile_for_sm90_without_spills(tmp_path):
    """At KernelBench 6's and 4's shapes with K cut to 65536 and 131072 (the same specialisations: the kernels see
    only divisibility), the matched starters and the 3xTF32 split compile for sm_90 with no spill."""
    from kernelsearch.judge.aot import aot_report

    for name, (mm, k, n), points in [("aot_long_k", (256, 65536, 256),
                                      [{"fp32_precision": "ieee"}, {"fp32_precision": "tf32x3", "split_k": 32}]),
                                     ("aot_gemv", (2048, 131072, 1), [{}, {"split_k": 4}])]:
        p = _mm(tmp_path, name, mm, k, n)
        m = match_problem(p)
        for point in points:
            report = aot_report(m.space.render({**m.space.default, **point}), p, _timed(p))
            assert report["status"] == "ok", (name, point, str(report.get("error"))[:600])
            names = {k["name"] for k in report["kernels"]}
            want = {"_gemv_kernel"} if n == 1 else {"_matmul_splitk_kernel", "_splitk_reduce_kernel"}
            assert want <= names, (name, point, names)
            for kern in report["kernels"]:
                assert kern["spills_bytes"] == 0 and 0 < kern["registers"] <= 255, (name, point, kern)
            if n == 1:
                gemv = next(k for k in report["kernels"] if k["name"] == "_gemv_kernel")
                assert "ld.global.v4.b32" in gemv["memory_ops"], gemv   # 16-byte loads of A's rows
