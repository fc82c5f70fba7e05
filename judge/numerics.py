"""Precision numerics of the judge: the high-precision reference, the stability inputs, and the normwise error
against which a candidate is judged on inputs its dtype cannot resolve."""
from __future__ import annotations

import copy
import math

import torch

from kernelsearch.judge.correctness import Comparison, flatten

F64_MAX_ELEMENTS = 1 << 26   # above this many input elements the high-precision reference is float32


def to_hi(values: list, dtype: torch.dtype) -> list:
    return [v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def stability_inputs(name: str, values: list, dtype: str, seed: int) -> list:
    """Transform the floating inputs of a case: `large` (x 1e3; x 10 in fp16, whose range is small), `tiny`
    (x 1e-4), `mixed` (each element scaled by 10^U(-3, 3)), `equal` (every row the same value along the last
    dimension). Integer inputs (targets, indices) are left as they are."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            x = v.double()
            if name == "large":
                x = x * (10.0 if dtype == "float16" else 1e3)
            elif name == "tiny":
                x = x * 1e-4
            elif name == "mixed":
                gen = torch.Generator(device=x.device).manual_seed(seed)   # drawn where x is (fast on a GPU)
                x = x * torch.pow(10.0, torch.empty(x.shape, dtype=torch.float64, device=x.device)
                                  .uniform_(-3, 3, generator=gen))
            elif name == "equal" and x.dim() >= 1:
                x = x[..., :1].expand_as(x).contiguous()
            else:
                raise ValueError(f"unknown stability input {name!r}")
            v = x.to(v.dtype)
        out.append(v)
    return out


NATIVE = "native"   # `references`' hi: the reference's own answer stands for the high-precision one (memory.py)


def references(ref, inputs: list, hi: torch.dtype | str | None = None) -> tuple:
    """The reference's answer at the problem's dtype (it fixes dtype, shape and device) and the same computed in
    `hi`: by default float64 (float32 above F64_MAX_ELEMENTS input elements), which values are measured against.
    Every check (correctness, cache, timed outputs) uses both: measured against the low-precision reference
    instead, a correct kernel that rounds once where eager rounds twice fails on a few values near zero (seen on
    an H200: rotary bf16 (4,32,4096,128), 8 of 67M values). The judge's memory plan (judge/memory.py) passes
    float32 or NATIVE where float64 does not fit; where every floating input, parameter and buffer is already in
    `hi` (float32 for a float32 problem), or `hi` is NATIVE, the answer is not computed twice: it is the same."""
    with torch.no_grad():
        want = ref(*inputs)
        if hi is None:
            n_el = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
            hi = torch.float64 if n_el <= F64_MAX_ELEMENTS else torch.float32
        if hi == NATIVE or _all_in(ref, inputs, hi):
            return want, want
        want_hi = copy.deepcopy(ref).to(hi)(*to_hi(inputs, hi))
    return want, want_hi


def _all_in(ref, inputs: list, dtype: torch.dtype) -> bool:
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if isinstance(ref, torch.nn.Module):
        tensors += list(ref.parameters()) + list(ref.buffers())
    return all(t.dtype == dtype for t in tensors if t.is_floating_point())


EAGER_SLACK = 2.0   # on inputs the dtype cannot resolve, a candidate may be up to this many times eager's error


def normwise_error(got, want_hi) -> float:
    """max over outputs of ||got - ref||_2 / ||ref||_2, in float64; NaN/Inf anywhere is infinite error."""
    worst = 0.0
    for g, h in zip(flatten(got), flatten(want_hi)):
        if not isinstance(g, torch.Tensor) or not g.is_floating_point():
            continue
        g64, h64 = g.detach().double(), h.detach().to(device=g.device, dtype=torch.float64)
        if not bool(torch.isfinite(g64).all()):
            return float("inf")
        h64 = torch.nan_to_num(h64)
        worst = max(worst, float((g64 - h64).norm() / h64.norm().clamp_min(1e-300)))
    return worst


def _no_worse_than_eager(got, want, want_hi, failed: Comparison) -> Comparison:
    """Pass when the candidate's normwise error is within EAGER_SLACK times eager's own (dtype, shape and
    non-finite values were already checked by `compare` and are kept as failures)."""
    if "values off by more than" not in failed.reason:
        return failed   # shape, dtype, device, type or NaN/Inf: not a question of precision
    mine, eager = normwise_error(got, want_hi), normwise_error(want, want_hi)
    if mine <= EAGER_SLACK * eager + 1e-12:
        return Comparison(True, "", failed.max_abs, failed.max_rel, 0)
    failed.reason += (f"; normwise error {mine:.3g} against float64 is over {EAGER_SLACK:g}x eager's own "
                      f"({eager:.3g}) on inputs this dtype cannot resolve")
    return failed


EAGER_SLACK_CHECK = 16.0   # a candidate failing the tolerance may be this many times eager's error


def _errors(got, want_hi, chunk: int) -> tuple[float, float]:
    """(max abs error, normwise error ||got - ref|| / ||ref||) over the floating outputs, in float64, `chunk` elements
    at a time (bounded temporaries); NaN/Inf anywhere is an infinite error."""
    worst_abs, worst_nw = 0.0, 0.0
    for g, h in zip(flatten(got), flatten(want_hi)):
        if not isinstance(g, torch.Tensor) or not g.is_floating_point():
            continue
        gf, hf = g.detach().reshape(-1), h.detach().reshape(-1)
        mx = torch.zeros((), dtype=torch.float64, device=g.device)
        d2, r2 = mx.clone(), mx.clone()
        for s in range(0, gf.numel(), max(1, int(chunk))):
            g64, h64 = gf[s:s + chunk].double(), hf[s:s + chunk].to(device=g.device, dtype=torch.float64)
            d = (g64 - h64).abs()
            mx, d2, r2 = torch.maximum(mx, d.max()), d2 + (d * d).sum(), r2 + (h64 * h64).sum()
        mx, d2, r2 = (float(x) for x in torch.stack([mx, d2, r2]).tolist())
        if mx != mx or mx == float("inf"):
            return float("inf"), float("inf")
        worst_abs, worst_nw = max(worst_abs, mx), max(worst_nw, (d2 ** 0.5) / max(r2 ** 0.5, 1e-300))
    return worst_abs, worst_nw


def eager_error(want, want_hi, chunk: int = 1 << 25) -> float:
    """Eager's max abs error (the reference at the problem's dtype against the high-precision one)."""
    return _errors(want, want_hi, chunk)[0]


def within_eager(got, want, want_hi, atol: float, rtol: float, failed: Comparison,
                 chunk: int = 1 << 25, *, scale: list | None = None,
                 terms: int | None = None) -> tuple[Comparison, float | None]:
    """A value failure judged against eager's own error where the tolerance is out of eager's reach too.

    A candidate that fails the tolerance is judged by eager's own error against the high-precision reference (an
    fp32 matmul of K = 4096 against float64 at atol 1e-5: eager's summation order is already about 1e-4 away, and
    meets the tolerance on one draw and misses it on the next): its max abs and normwise errors each within
    EAGER_SLACK_CHECK times eager's (a blocked or sequential fp32 summation is 0.6-4.4x eager's
    normwise on the CPU; TF32-rounded inputs ~3000x, a dropped K chunk far more). Returns the verdict and, where
    eager's error decided, eager's max abs error (the timed-output check widens its atol by it)."""
    if "values off by more than" not in failed.reason:
        return failed, None   # shape, dtype, type or NaN/Inf: not a question of precision
    if want_hi is want:   # no reference beyond eager: only a long sum's bound (below) can pass it
        return _sum_bound_or(got, want_hi, atol, rtol, failed, chunk, scale, terms), None
    from kernelsearch.judge.correctness import compare

    # Whether eager itself meets the tolerance on one draw is luck near its edge: an fp32 matmul of K = 4096 met it on
    # one input set of the cache check and missed it on the other, and an honest blocked fp32 sum (one value of 4096
    # at 8e-4 relative) was failed on the first. So eager's error is the yardstick wherever it is measured: where
    # the tolerance is well within eager's reach (its error EAGER_SLACK_CHECK times smaller), a candidate that fails
    # the tolerance is over that yardstick too, and fails as before.
    eager_meets = compare(want, want, want_hi, atol, rtol, chunk).ok
    e_abs, e_nw = _errors(want, want_hi, chunk)
    m_abs, m_nw = _errors(got, want_hi, chunk)
    if m_abs <= EAGER_SLACK_CHECK * e_abs + 1e-30 and m_nw <= EAGER_SLACK_CHECK * e_nw + 1e-30:
        return Comparison(True, "", failed.max_abs, failed.max_rel, 0), e_abs
    failed.reason += (f"; {'eager meets' if eager_meets else 'eager misses'} this tolerance "
                      f"{'' if eager_meets else 'too '}(its max abs error {e_abs:.3g}, normwise {e_nw:.3g} "
                      f"against the high-precision reference), and this output is over {EAGER_SLACK_CHECK:g}x that "
                      f"(max abs {m_abs:.3g}, normwise {m_nw:.3g})")
    return _sum_bound_or(got, want_hi, atol, rtol, failed, chunk, scale, terms), None


def _sum_bound_or(got, want_hi, atol, rtol, failed: Comparison, chunk: int, scale, terms) -> Comparison:
    """`failed`, unless a long sum's scale and terms are given and the output is within their bound."""
    if scale is None or terms is None:
        return failed
    return within_sum_bound(got, want_hi, scale, terms, atol, rtol, failed, chunk)


def _overflows(want, want_hi) -> bool:
    """The reference at the problem's dtype is non-finite where the float64 one is finite."""
    for w, h in zip(flatten(want), flatten(want_hi)):
        if isinstance(w, torch.Tensor) and w.is_floating_point():
            if bool((~torch.isfinite(w) & torch.isfinite(h.to(w.device))).any()):
                return True
    return False


def pin_precision() -> None:
    """TF32 off and float32 matmuls at full precision: the judge (its references) and every runner alike."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def precision_pinned() -> bool:
    return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision()) == (False, False, "highest")


# -- long reductions: the error an honest fp32 sum of K terms makes ---------------------------------------------------
#
# Each addition of a sum rounds once, by at most u = 2**-24 (float32) of the partial sum it makes. Under round to
# nearest those roundings behave as independent zero-mean errors (Higham, Accuracy and Stability of Numerical
# Algorithms, section 4.2, the statistical estimate), so a sequential sum's error is about
# u * sqrt(sum over steps of |partial sum|^2). Its partial sums drift to the answer y and wander about sqrt(i) terms'
# size: sqrt(sum_i |partial_i|^2) ~ sqrt(K) * |y| / sqrt(3) + S / sqrt(2), S = sum |x_i|. So the bound used here is
#     |got - y| <= SUM_SIGMAS * u * (sqrt(K) * |y| + S)      (plus the problem's own atol + rtol * |y|)
# which a single sequential fp32 accumulator meets at 4 sigma, and a blocked kernel (lanes that each sum K / B terms,
# then a tree) by far. The numbers, in units of u * (sqrt(K) |y| + S), for a 4 x 2**20 matrix-vector product on the
# CPU (tests/judge/test_reduction_bound.py; positive terms as KernelBench's torch.rand gives, then mixed signs):
#   fp32 in 64 lanes of 16,384 steps 0.006 / 0.047; in 1,024 lanes 0.002 / 0.010; eager (x @ v) 0.014 / 0.049;
#   products rounded to TF32 (u = 2**-11), fp32 sums 10.7 / 8.3; one block of 1,024 terms dropped 16 / 380;
#   a bf16 accumulator 3,600 / 350; an fp16 one overflows (65504) / 50.
# At KernelBench's 2048 x 1,048,576 product (S = |y|) the bound is 4 * 5.96e-8 * 1025 = 2.4e-4 of |y| (3.4e-4 with
# rtol 1e-4 beside it): the Triton kernel measured at 2e-4 relative (3.3 units; it failed rtol 1e-4 where cuBLAS
# passed) passes; TF32 products and low-precision accumulators still fail. K comes from the shapes
# (`reduction_terms`), S from the reference run on |inputs| (`abs_reference`); `within_eager` applies the bound
# where it is given them and eager's own error did not pass the output.
SUM_UNIT = 2.0 ** -24   # float32's unit roundoff: reductions accumulate in float32 whatever the output's dtype
SUM_SIGMAS = 4.0        # sigmas over the statistical estimate (its coefficients are 1/sqrt(3) and 1/sqrt(2))


def reduction_terms(inputs: list, outputs) -> int:
    """K, the terms an output element sums, as far as shapes tell: the larger of the inputs' longest dim (a matmul's
    K, a row reduction's length) and the largest input's elements per output element (a sum over several dims). An
    over-estimate where the longest dim is not reduced (a convolution's width): the bound grows as sqrt(K)."""
    ins = [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]
    outs = [t for t in flatten(outputs) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    longest = max((max(t.shape) for t in ins if t.dim()), default=1)
    n_in, n_out = max((t.numel() for t in ins), default=1), max(1, sum(t.numel() for t in outs))
    return max(1, longest, n_in // n_out)


def abs_reference(ref, inputs: list, hi: torch.dtype = torch.float64) -> list:
    """The reference run on |inputs| with |parameters| in `hi`: for a sum of products (a matmul, a convolution, a
    sum or mean) exactly S = sum |x_i| of every output element, the scale its rounding errors grow with. For an
    operation that is not one it is only a scale, used to pass an output, never to fail one."""
    with torch.no_grad():
        pos = copy.deepcopy(ref).to(hi) if isinstance(ref, torch.nn.Module) else ref
        if isinstance(pos, torch.nn.Module):
            for t in list(pos.parameters()) + list(pos.buffers()):
                if t.is_floating_point():
                    t.abs_()
        return flatten(pos(*[v.abs() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                             for v in to_hi(inputs, hi)]))


def sum_bound(k: int, y, scale, atol: float = 0.0, rtol: float = 0.0):
    """Elementwise, what an honest fp32 sum of `k` terms may be off from the exact answer `y` (scale: S per element,
    abs_reference): atol + rtol |y| + SUM_SIGMAS * u * (sqrt(k) |y| + S)."""
    y = y.abs()
    return atol + rtol * y + SUM_SIGMAS * SUM_UNIT * (math.sqrt(k) * y + scale.abs())


def within_sum_bound(got, want_hi, scale: list, k: int, atol: float, rtol: float, failed: Comparison,
                     chunk: int = 1 << 25) -> Comparison:
    """A value failure passed where every floating output is within `sum_bound` of the high-precision reference
    (eager's own answer where none is affordable: eager is itself within a fraction of the bound); NaN/Inf never."""
    if "values off by more than" not in failed.reason:
        return failed
    worst = 0.0
    for g, h, s in zip(flatten(got), flatten(want_hi), scale):
        if not isinstance(g, torch.Tensor) or not g.is_floating_point():
            continue
        gf, hf, sf = g.detach().reshape(-1), h.detach().reshape(-1), s.detach().reshape(-1)
        for i in range(0, gf.numel(), max(1, int(chunk))):
            g64 = gf[i:i + chunk].double()
            h64 = hf[i:i + chunk].to(device=g.device, dtype=torch.float64)
            s64 = sf[i:i + chunk].to(device=g.device, dtype=torch.float64)
            if not bool(torch.isfinite(g64).all()):
                return failed
            ratio = float(((g64 - h64).abs() / sum_bound(k, h64, s64, atol, rtol)).max())
            worst = max(worst, ratio)
    if worst <= 1.0:
        return Comparison(True, "", failed.max_abs, failed.max_rel, 0)
    failed.reason += (f"; over the error bound of an fp32 sum of {k} terms by {worst:.3g}x (SUM_SIGMAS * u * "
                      "(sqrt(K) |y| + sum |x_i|))")
    return failed
