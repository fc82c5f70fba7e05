"""Output comparison: one verbose allclose that says where and by how much, and never lets NaN pass."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: int = 0
    detail: str = ""


def flatten(out) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flatten(o)]
    return [out]


def compare(got, want, want_hi, atol: float, rtol: float) -> Comparison:
    """`want` is the reference at the problem's dtype (it fixes dtype, shape, device); `want_hi` the same
    computed in higher precision (float64 where affordable), which the values are measured against."""
    gots, wants, his = flatten(got), flatten(want), flatten(want_hi)
    if len(gots) != len(wants):
        return Comparison(False, f"returned {len(gots)} outputs, the reference returns {len(wants)}")
    worst = Comparison(True)
    for i, (g, w, h) in enumerate(zip(gots, wants, his)):
        tag = f"output {i}: " if len(wants) > 1 else ""
        if not isinstance(w, torch.Tensor):
            if g != w:
                return Comparison(False, f"{tag}got {g!r}, expected {w!r}")
            continue
        if type(g) is not torch.Tensor:  # subclasses and lazy wrappers are refused (anti-cheat 9)
            return Comparison(False, f"{tag}returned {type(g).__name__}, expected a plain torch.Tensor")
        if g.shape != w.shape:
            return Comparison(False, f"{tag}shape {tuple(g.shape)}, expected {tuple(w.shape)}")
        if g.dtype != w.dtype:
            return Comparison(False, f"{tag}dtype {g.dtype}, expected {w.dtype}")
        if g.device != w.device:
            return Comparison(False, f"{tag}device {g.device}, expected {w.device}")
        c = _compare_values(g, h, atol, rtol)
        if not c.ok:
            c.reason = tag + c.reason
            return c
        worst.max_abs = max(worst.max_abs, c.max_abs)
        worst.max_rel = max(worst.max_rel, c.max_rel)
    return worst


def agreement(got, like, want_hi, atol: float, rtol: float) -> torch.Tensor | None:
    """The values half of `compare`, left on the device: a 0-dim bool tensor, true where every output of `got` agrees
    with `want_hi` within atol + rtol*|ref| (NaN or Inf only where the reference has the same), read by the caller
    with one synchronisation for many calls. `like` is an output already judged by `compare` (its types, shapes,
    dtypes and devices are the ones expected); None where `got` differs from it in any of those, or an output is not a
    floating tensor: the caller runs `compare` for the reason."""
    gots, likes, his = flatten(got), flatten(like), flatten(want_hi)
    if not (len(gots) == len(likes) == len(his)):
        return None
    flags = []
    for g, w, h in zip(gots, likes, his):
        if (type(g) is not torch.Tensor or not isinstance(w, torch.Tensor) or not isinstance(h, torch.Tensor)
                or g.shape != w.shape or g.dtype != w.dtype or g.device != w.device or not g.is_floating_point()):
            return None
        g32, h32 = g.detach().float(), h.detach().to(device=g.device, dtype=torch.float32)
        close = torch.isfinite(g32) & torch.isfinite(h32) & ((g32 - h32).abs() <= atol + rtol * h32.abs())
        same = (g32 == h32) | (torch.isnan(g32) & torch.isnan(h32))   # Inf for Inf, NaN for NaN, where the ref has it
        flags.append((close | (same & ~torch.isfinite(h32))).all())
    return torch.stack(flags).all() if flags else torch.ones((), dtype=torch.bool)


def _compare_values(g: torch.Tensor, h: torch.Tensor, atol: float, rtol: float) -> Comparison:
    g64 = g.detach().to(torch.float64) if g.is_floating_point() else g.detach().to(torch.float64)
    h64 = h.detach().to(device=g.device, dtype=torch.float64)
    g_fin, h_fin = torch.isfinite(g64), torch.isfinite(h64)
    # NaN or Inf passes only where the reference has the same non-finite value at the same place
    bad_nonfinite = ~g_fin & ~(~h_fin & ((g64 == h64) | (torch.isnan(g64) & torch.isnan(h64))))
    if bool(bad_nonfinite.any()):
        n = int(bad_nonfinite.sum())
        idx = tuple(int(i) for i in bad_nonfinite.nonzero()[0])
        return Comparison(False, f"{n} non-finite values where the reference is finite (first at {idx}: "
                          f"{g64[idx].item()} vs {h64[idx].item()})", mismatches=n)
    if bool((g_fin & ~h_fin).any()):
        n = int((g_fin & ~h_fin).sum())
        return Comparison(False, f"{n} finite values where the reference is NaN/Inf", mismatches=n)
    both = g_fin & h_fin
    diff = torch.where(both, (g64 - h64).abs(), torch.zeros_like(g64))
    tol = atol + rtol * h64.abs()
    over = both & (diff > tol)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / h64.abs().clamp_min(atol if atol > 0 else 1e-30)
    max_rel = float(torch.where(both, rel, torch.zeros_like(rel)).max()) if rel.numel() else 0.0
    if bool(over.any()):
        n = int(over.sum())
        idxs = over.nonzero()[:5]
        lines = [f"  at {tuple(int(i) for i in ix)}: got {g64[tuple(ix)].item():.6g}, "
                 f"expected {h64[tuple(ix)].item():.6g}" for ix in idxs]
        return Comparison(False, f"{n} of {g.numel()} values off by more than atol={atol:g} + rtol={rtol:g}*|ref| "
                          f"(max abs {max_abs:.3g}, max rel {max_rel:.3g})", max_abs, max_rel, n,
                          "first mismatches:\n" + "\n".join(lines))
    return Comparison(True, "", max_abs, max_rel, 0)
