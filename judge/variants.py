"""Inputs the problem's own generator never draws: the judge's signed-input case and its range cases.

Every KernelBench file draws its inputs with `torch.rand`: values in [0, 1), all of one sign. Checked only there, a
kernel is never asked what it does on a negative value or beyond 1: an identity kernel passes as ReLU, LeakyReLU,
ELU or HardTanh, a max-pool that starts its running max at 0 passes, and a matmul that rounds its operands to TF32
passes fp32's tolerance (the outputs' large common mean hides the rounding: 1e-5 normwise at K = 1024, against 3e-4
on signed inputs). The judge therefore runs one more correctness case on a problem file: the smallest case's inputs,
each floating input that is all of one sign given a random sign per element and four times its magnitude (past the
breakpoints of the usual activations: 0, +-1, +-3). What the generator builds into its inputs is kept where it can
be seen from the values: zeros stay zero (triangular operands stay triangular) and a symmetric operand (last two
dims) gets symmetric signs. Where the reference is not finite on such inputs (a log, a square root, a KL divergence
of probabilities) the case is skipped and the evaluation's detail says so.

The range cases (`range_variants`) go past the generator's magnitudes and offsets, the other way a kernel can be right
only where it was checked: a softmax without the max subtraction is exact on `randn * 3` and overflows at 100x; a
variance as E[x^2] - E[x]^2 or a low-precision accumulator loses every digit once the values sit far from zero. Each
is the smallest case's inputs with every floating input changed one way: `x10` and `x100` (magnitudes up), `shift`
(+ SHIFT times the input's own scale, so values far from zero of one sign) and `rows` (each last-dim row one
constant, a degenerate row: zero variance, equal logits). Zeros stay zero in every one (a triangular operand stays
triangular); `rows` is skipped for a symmetric operand, whose symmetry it would break. Each runs only where the
reference stays finite on it, and the evaluation's detail lists which ran and which were skipped, with why.
"""
from __future__ import annotations

import torch

SIGNED_SCALE = 4.0


def one_signed(t) -> bool:
    """A floating tensor of more than one element whose values are all >= 0 or all <= 0, not all zero."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() < 2:
        return False
    lo, hi = float(t.min()), float(t.max())
    return (lo >= 0.0 or hi <= 0.0) and (lo != 0.0 or hi != 0.0)


def _symmetric(t: torch.Tensor) -> bool:
    return t.dim() >= 2 and t.shape[-1] == t.shape[-2] and bool(torch.equal(t, t.transpose(-1, -2)))


def signed_inputs(inputs: list, seed: int) -> tuple[list, list[int]] | None:
    """The inputs with each one-signed floating tensor's elements given random signs and SIGNED_SCALE times their
    magnitude (the others as they are), and the positions changed; None where no input is one-signed."""
    changed = [i for i, v in enumerate(inputs) if one_signed(v)]
    if not changed:
        return None
    out = list(inputs)
    for i in changed:
        x = inputs[i]
        gen = torch.Generator(device=x.device).manual_seed(seed + i)
        sign = torch.randint(0, 2, tuple(x.shape), generator=gen, device=x.device, dtype=torch.int8) * 2 - 1
        if _symmetric(x):
            upper = sign.triu()
            sign = upper + upper.triu(1).transpose(-1, -2)
        out[i] = (x.abs() * sign.to(x.dtype) * SIGNED_SCALE).to(x.dtype)
    return out, changed


RANGE_SCALES = (10.0, 100.0)
SHIFT = 30.0   # the shift, in units of the input's largest magnitude: far from zero next to its spread


def _floating(v) -> bool:
    return isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() >= 2


def _keep_zeros(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`y` where `x` is non-zero, zero where `x` is: what a generator builds in as zeros stays."""
    return torch.where(x == 0, torch.zeros_like(y), y)


def range_variants(inputs: list, seed: int) -> list[tuple[str, list | None, str]]:
    """(name, inputs or None, why not) for each range case: every floating input of more than one element scaled
    up, shifted away from zero, or made of constant rows (see the module's docstring). None, with the reason, where
    a case does not apply (no floating input; `rows` on symmetric operands only)."""
    floating = [i for i, v in enumerate(inputs) if _floating(v)]
    if not floating:
        return [(name, None, "no floating input") for name in ("x10", "x100", "shift", "rows")]
    out: list[tuple[str, list | None, str]] = []
    for scale in RANGE_SCALES:
        new = list(inputs)
        for i in floating:
            new[i] = (inputs[i].double() * scale).to(inputs[i].dtype)
        out.append((f"x{scale:g}", new, ""))
    new = list(inputs)
    for i in floating:
        x = inputs[i]
        mag = float(x.abs().max()) or 1.0
        new[i] = _keep_zeros(x, (x.double() + SHIFT * mag).to(x.dtype))
    out.append(("shift", new, ""))
    rows = [i for i in floating if not _symmetric(inputs[i]) and inputs[i].dim() >= 1]
    if not rows:
        out.append(("rows", None, "every floating input is symmetric (constant rows would break its symmetry)"))
        return out
    new = list(inputs)
    for i in rows:
        x = inputs[i]
        gen = torch.Generator(device=x.device).manual_seed(seed + i)
        lead = tuple(x.shape[:-1]) + (1,)
        mag = float(x.abs().max()) or 1.0
        const = (torch.rand(lead, generator=gen, device=x.device, dtype=torch.float64) * 2 - 1) * mag
        new[i] = _keep_zeros(x, const.expand(x.shape).to(x.dtype))
    out.append(("rows", new, ""))
    return out


def all_finite(values) -> bool:
    """Every floating tensor in `values` (nested lists and tuples too) is finite."""
    if isinstance(values, torch.Tensor):
        return not values.is_floating_point() or bool(torch.isfinite(values).all())
    if isinstance(values, (list, tuple)):
        return all(all_finite(v) for v in values)
    return True
