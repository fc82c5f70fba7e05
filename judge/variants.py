"""Inputs the problem's own generator never draws: the judge's signed-input case.

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


def all_finite(values) -> bool:
    """Every floating tensor in `values` (nested lists and tuples too) is finite."""
    if isinstance(values, torch.Tensor):
        return not values.is_floating_point() or bool(torch.isfinite(values).all())
    if isinstance(values, (list, tuple)):
        return all(all_finite(v) for v in values)
    return True
