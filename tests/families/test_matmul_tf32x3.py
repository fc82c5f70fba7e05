"""3xTF32 fp32 products in the matmul family (`fp32_precision`): emulated on the CPU (the interpreter computes every
tl.dot in plain fp32, whatever its input_precision), 3xTF32 stays within the judge's fp32 rules with margin where
plain TF32 fails them; the rendered launcher picks tf32x3 for fp32 operands only; an fp32 problem starts from it
(K up to TF32X3_MAX_K), and the `ieee` loop stays a move away."""
from __future__ import annotations

import torch

from kernelsearch.families.matmul.space import SPACE, TF32X3_MAX_K
from kernelsearch.families.matmul.spec import case_tolerance
from kernelsearch.generators.match import match_problem
from kernelsearch.judge.correctness import compare
from kernelsearch.judge.numerics import within_eager
from kernelsearch.judge.problem import DEFAULT_TOLERANCES, Case
from tests.generators.test_match import _agrees, _problem

KB_ATOL, KB_RTOL = DEFAULT_TOLERANCES["float32"]   # a KernelBench fp32 problem's tolerance


def _tf32(x):
    """x rounded to TF32 (10 mantissa bits), to nearest even."""
    i = x.contiguous().view(torch.int32)
    return ((i + 0x0FFF + ((i >> 13) & 1)) & ~0x1FFF).view(torch.float32)


def _round32(x64, toward_zero):
    f = x64.float()
    if toward_zero:   # where nearest rounded away from zero, one ulp back
        f = torch.where(f.double().abs() > x64.abs(), torch.nextafter(f, torch.zeros_like(f)), f)
    return f


def _emulated(a, b, mode, toward_zero=False, bk=64, step=8):
    """Triton's dot at `mode` over K blocks of bk: the tensor core adds `step` exact products at a time to an fp32
    accumulator (rounded to nearest, or toward zero as A100's tensor cores were measured to); 3xTF32 sums a block's
    hi*lo + lo*hi into a second accumulator from zero and adds it to the first after the block."""
    ah, bh = _tf32(a), _tf32(b)
    al, bl = _tf32(a - ah).double(), _tf32(b - bh).double()
    ah, bh = ah.double(), bh.double()
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k0 in range(0, a.shape[1], bk):
        small = torch.zeros_like(acc)
        for k in range(k0, min(k0 + bk, a.shape[1]), step):
            s = slice(k, k + step)
            acc = _round32(acc.double() + ah[:, s] @ bh[s], toward_zero)
            if mode == "tf32x3":
                small = _round32(small.double() + al[:, s] @ bh[s] + ah[:, s] @ bl[s], toward_zero)
        acc = acc + small
    return acc


def _worst(got, want_hi, atol, rtol) -> float:
    """The largest error as a fraction of the tolerance's bound atol + rtol * |ref| (over 1: a failure)."""
    return float(((got.double() - want_hi).abs() / (atol + rtol * want_hi.abs())).max())


def _inputs(m, k, n, rand, seed=0):
    g = torch.Generator().manual_seed(seed)
    draw = torch.rand if rand else torch.randn
    a, b = draw(m, k, generator=g), draw(k, n, generator=g)
    return a, b, a @ b, a.double() @ b.double()


def test_3xtf32_is_within_the_family_fp32_tolerance_with_margin_and_tf32_is_not():
    """The family's fp32 case tolerance at K = 1024 (randn, as its cases draw): 3xTF32 uses at most a third of it
    whether the accumulation rounds to nearest or truncates; plain TF32 is far outside."""
    a, b, _, want_hi = _inputs(128, 1024, 128, rand=False)
    atol, rtol = case_tolerance(Case("fp32", {"m": 128, "n": 128, "k": 1024}, "float32"))
    assert _worst(_emulated(a, b, "tf32x3"), want_hi, atol, rtol) < 0.1
    assert _worst(_emulated(a, b, "tf32x3", toward_zero=True), want_hi, atol, rtol) < 0.34
    assert _worst(_emulated(a, b, "tf32"), want_hi, atol, rtol) > 10


def test_3xtf32_passes_the_eager_error_rule_where_tf32_fails_it():
    """Signed inputs at K = 1024, where eager misses KernelBench's (1e-5, 1e-4) too: 3xTF32 (nearest) is within a
    few times eager's max abs and normwise errors (the rule allows 16x); plain TF32 is hundreds of times off."""
    a, b, want, want_hi = _inputs(128, 1024, 128, rand=False)
    assert not compare(want, want, want_hi, KB_ATOL, KB_RTOL).ok   # eager itself misses the tolerance
    for mode, ok in (("tf32x3", True), ("tf32", False)):
        got = _emulated(a, b, mode)
        first = compare(got, want, want_hi, KB_ATOL, KB_RTOL)
        assert not first.ok
        assert within_eager(got, want, want_hi, KB_ATOL, KB_RTOL, first)[0].ok is ok, mode
    got = _emulated(a, b, "tf32x3")
    mine = ((got.double() - want_hi).abs().max(), (got.double() - want_hi).norm())
    eager = ((want.double() - want_hi).abs().max(), (want.double() - want_hi).norm())
    assert mine[0] < 4 * eager[0] and mine[1] < 4 * eager[1]


def test_3xtf32_meets_the_tolerance_on_kernelbench_inputs_up_to_its_k_bound():
    """KernelBench draws torch.rand (positive): even a truncating accumulation, whose bias grows with K, stays
    within a quarter of the (1e-5, 1e-4) bound at K = 4096 (emulated at 1024^2 outputs: 0.12; 0.42 at 16384, the
    bound TF32X3_MAX_K, and 1.6 at 65536: NOTES.md)."""
    a, b, _, want_hi = _inputs(32, 4096, 32, rand=True)
    assert _worst(_emulated(a, b, "tf32x3"), want_hi, KB_ATOL, KB_RTOL) < 0.05
    assert _worst(_emulated(a, b, "tf32x3", toward_zero=True), want_hi, KB_ATOL, KB_RTOL) < 0.25


def test_the_launcher_picks_tf32x3_for_fp32_operands_only():
    code = SPACE.render({**SPACE.default, "fp32_precision": "tf32x3"})
    assert '"tf32x3" if a.dtype == torch.float32 else "tf32"' in code   # matmul: fp32 3xTF32, 16-bit tf32 (ignored)
    assert "tf32x3" not in SPACE.render(SPACE.default)   # the family's own starter keeps the ieee loop
    assert '"ieee" if a.dtype == torch.float32 else "tf32"' in SPACE.render(SPACE.default)
    from kernelsearch.families.matmul.space import batched_template
    assert 'PRECISION="tf32x3" if a.dtype == torch.float32' in batched_template(
        {**SPACE.default, "variant": "tiled", "fp32_precision": "tf32x3"})


def test_an_fp32_problem_starts_from_3xtf32_and_ieee_is_a_move_away(tmp_path):
    fp32 = Case("problem", {"m": 4096, "n": 4096, "k": 4096}, "float32", timed=True)
    start = SPACE.default_for(fp32)
    assert (start["fp32_precision"], start["BM"], start["BN"], start["num_warps"]) == ("tf32x3", 128, 128, 8)
    for dtype in ("bfloat16", "float16"):
        assert SPACE.default_for(Case("problem", {"m": 4096, "n": 4096, "k": 4096}, dtype, timed=True)) \
            == SPACE.default
    # the K one accumulator sums decides: KernelBench 6's 256 x 256 x 524288 splits K 16 ways (32768 a split: ieee);
    # at 4 x TF32X3_MAX_K the 16 splits sum 4096 each (3xTF32)
    long_k = Case("problem", {"m": 256, "n": 256, "k": 32 * TF32X3_MAX_K}, "float32", timed=True)
    assert (SPACE.default_for(long_k)["fp32_precision"], SPACE.default_for(long_k)["split_k"]) == ("ieee", 16)
    long_k = Case("problem", {"m": 256, "n": 256, "k": 4 * TF32X3_MAX_K}, "float32", timed=True)
    assert (SPACE.default_for(long_k)["fp32_precision"], SPACE.default_for(long_k)["split_k"]) == ("tf32x3", 16)
    moves = {m.title: new for m, new in SPACE.applicable(start, [fp32])}
    assert moves["fp32 in full precision"]["fp32_precision"] == "ieee"
    # two accumulators: 128 x 256 on 8 warps spills at a timed fp32 case (sm_90: 2.1 KB), the ieee loop is not judged
    assert "3xTF32" in SPACE.limits({**start, "BN": 256}, fp32)
    assert SPACE.limits({**start, "BN": 256, "fp32_precision": "ieee"}, fp32) is None
    # a matched KernelBench-format fp32 product starts from it and runs (the interpreter computes plain fp32)
    mm = _problem(tmp_path, "mm_fp32", "    def forward(self, A, B):\n        return torch.matmul(A, B)",
                  "[torch.rand(M, K), torch.rand(K, N)]", sizes="M = 40\nK = 72\nN = 48")
    m = match_problem(mm)
    code = m.space.render(m.space.default)
    assert m.space.default["fp32_precision"] == "tf32x3" and '"tf32x3" if a.dtype == torch.float32' in code
    _agrees(mm, code)
    _agrees(mm, m.space.render({**m.space.default, "variant": "tiled", "BM": 64, "BN": 64, "BK": 32}))


def test_the_precision_moves_are_offered_to_fp32_products_only():
    """On a 16-bit product the fp32 precision knob changes the text, not the kernel: not an idea there."""
    for dtype in ("bfloat16", "float16"):
        case = Case("problem", {"m": 4096, "n": 4096, "k": 4096}, dtype, timed=True)
        titles = {m.title for m, _ in SPACE.applicable(SPACE.default_for(case), [case])}
        assert not titles & {"fp32 by 3xTF32", "fp32 in full precision"} and len(titles) > 5
    fp32 = Case("problem", {"m": 4096, "n": 4096, "k": 4096}, "float32", timed=True)
    titles = {m.title for m, _ in SPACE.applicable({**SPACE.default_for(fp32), "fp32_precision": "ieee"}, [fp32])}
    assert "fp32 by 3xTF32" in titles
