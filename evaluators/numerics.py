"""Precision numerics of the judge: the high-precision reference, the stability inputs, and the normwise error
against which a candidate is judged on inputs its dtype cannot resolve."""
from __future__ import annotations

import copy

import torch

from kernelsearch.evaluators.correctness import Comparison, flatten

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
    an H200: rotary bf16 (4,32,4096,128), 8 of 67M values). The judge's memory plan (evaluators/memory.py) passes
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
