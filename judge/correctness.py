"""Output comparison: one verbose allclose that says where and by how much, and never lets NaN pass."""
from __future__ import annotations

from dataclasses import dataclass

import torch

COMPARE_CHUNK = 1 << 25   # elements a chunk of the comparison: its float64 copy is 256 MiB (judge/memory.py)
_ONE_PASS, _ONE_PASS_ERRORS = [True], []   # agreement's GPU kernel in use; why it was dropped, where it was
ONE_PASS_DEVICES = {"cuda"}   # where agreement runs it (tests add "cpu": Triton's interpreter runs it there)


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


def compare(got, want, want_hi, atol: float, rtol: float, chunk: int = COMPARE_CHUNK,
            values: bool = True) -> Comparison:
    """`want` is the reference at the problem's dtype (it fixes dtype, shape, device); `want_hi` the same
    computed in higher precision (float64 where affordable), which the values are measured against. The values are
    compared `chunk` elements at a time, so the float64 temporaries are bounded (judge/memory.py). `values=False`:
    the structure only (counts, types, shapes, dtypes, devices, and non-tensor items)."""
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
        # an integer or bool output (argmax's indices) is compared exactly: a tolerance relative to the value
        # would let an index past 1/rtol be off by one
        exact = not (w.is_floating_point() or w.is_complex())
        if not values:
            continue
        c = _compare_values(g, h, 0.0 if exact else atol, 0.0 if exact else rtol, chunk)
        if not c.ok:
            c.reason = tag + c.reason
            return c
        worst.max_abs = max(worst.max_abs, c.max_abs)
        worst.max_rel = max(worst.max_rel, c.max_rel)
    return worst


def agreement(got, like, want_hi, atol: float, rtol: float, chunk: int = COMPARE_CHUNK) -> torch.Tensor | None:
    """A quick yes for the timed outputs, left on the device: a 0-dim bool tensor, true where every output of `got`
    is finite and within atol + rtol*|ref| of `want_hi`, read by the caller with one synchronisation for many calls.
    False is no verdict: the caller runs `compare`, which decides (it also passes NaN or Inf where the reference has
    the same, which this check leaves to it). `like` is an output already judged by `compare` (its types, shapes,
    dtypes and devices are the ones expected); None where `got` differs from it in any of those, or an output is not a
    floating tensor: the caller runs `compare` for the reason.

    One expression a chunk, max(|g - h| - rtol*|h|) <= atol, in four passes over the values with two float32
    temporaries: a NaN anywhere (in g, or g - h where both are Inf) makes the maximum NaN and the answer false, an Inf
    in g alone makes it Inf; an Inf in h alone makes |g - h| - rtol*|h| NaN. (The first form, with isfinite, isnan and
    equality masks, took about twenty passes: 1.34 s of an H100 softmax evaluation's 2.36 s timing loop, held
    exclusively.) On a GPU the same test is one Triton kernel a tensor (judge/agree.py), its products fused (FMA): at
    the tolerance's very edge it may say yes where this form says no, by a rounding of rtol*|h|."""
    gots, likes, his = flatten(got), flatten(like), flatten(want_hi)
    if not (len(gots) == len(likes) == len(his)):
        return None
    flags = []
    for g, w, h in zip(gots, likes, his):
        if (type(g) is not torch.Tensor or not isinstance(w, torch.Tensor) or not isinstance(h, torch.Tensor)
                or not g.shape == w.shape == h.shape or g.dtype != w.dtype or g.device != w.device
                or not g.is_floating_point()):
            return None
        if g.device.type in ONE_PASS_DEVICES and h.device == g.device and _ONE_PASS:   # one pass (judge/agree.py)
            from kernelsearch.judge.agree import count_over

            try:
                flags.append(count_over(g, h, atol, rtol)[0] == 0)
                continue
            except Exception as err:  # noqa: BLE001 - the kernel did not build or launch here: the torch form, after
                _ONE_PASS.clear()     # (the same test; a dtype Triton cannot load, a machine without a launcher)
                _ONE_PASS_ERRORS.append(f"{type(err).__name__}: {str(err)[:200]}")
        gf, hf = g.detach().reshape(-1), h.detach().reshape(-1)
        for s in range(0, gf.numel(), chunk):   # bounded float32 temporaries, a flag a chunk, read by the caller
            g32, h32 = gf[s:s + chunk].float(), hf[s:s + chunk].to(device=g.device, dtype=torch.float32)
            d = torch.sub(g32, h32).abs_()
            d.sub_(h32.abs().mul_(rtol))
            flags.append(d.amax() <= atol)
    return torch.stack(flags).all() if flags else torch.ones((), dtype=torch.bool)


def _unravel(flat: int, shape) -> tuple[int, ...]:
    idx = []
    for n in reversed(tuple(shape)):
        idx.append(flat % n if n else 0)
        flat = flat // n if n else 0
    return tuple(reversed(idx))


def _compare_values(g: torch.Tensor, h: torch.Tensor, atol: float, rtol: float,
                    chunk: int = COMPARE_CHUNK) -> Comparison:
    """Values of `g` against `h` in float64, `chunk` elements at a time: the counts and maxima accumulate on the
    device (one read at the end); only a failure goes back over the chunks for the first mismatches."""
    gf, hf = g.detach().reshape(-1), h.detach().reshape(-1)
    chunk = max(1, int(chunk))
    zero_i = torch.zeros((), dtype=torch.int64, device=g.device)
    zero_f = torch.zeros((), dtype=torch.float64, device=g.device)
    n_bad, n_fin, n_over, max_abs, max_rel = zero_i, zero_i, zero_i, zero_f, zero_f
    floor = atol if atol > 0 else 1e-30

    def pieces(s: int):
        g64 = gf[s:s + chunk].to(torch.float64)
        h64 = hf[s:s + chunk].to(device=g.device, dtype=torch.float64)
        g_fin, h_fin = torch.isfinite(g64), torch.isfinite(h64)
        # NaN or Inf passes only where the reference has the same non-finite value at the same place
        bad = ~g_fin & ~(~h_fin & ((g64 == h64) | (torch.isnan(g64) & torch.isnan(h64))))
        both = g_fin & h_fin
        diff = torch.where(both, (g64 - h64).abs(), 0.0)
        over = both & (diff > atol + rtol * h64.abs())
        return g64, h64, bad, g_fin & ~h_fin, diff, over, both

    for s in range(0, gf.numel(), chunk):
        g64, h64, bad, fin, diff, over, both = pieces(s)
        n_bad, n_fin, n_over = n_bad + bad.sum(), n_fin + fin.sum(), n_over + over.sum()
        max_abs = torch.maximum(max_abs, diff.max())
        rel = torch.where(both, diff / h64.abs().clamp_min(floor), 0.0)
        max_rel = torch.maximum(max_rel, rel.max())
        del g64, h64, bad, fin, diff, over, both, rel
    n_bad, n_fin, n_over = (int(x) for x in torch.stack([n_bad, n_fin, n_over]).tolist())
    max_abs, max_rel = (float(x) for x in torch.stack([max_abs, max_rel]).tolist())

    def first(which: int, k: int) -> list[tuple[tuple[int, ...], float, float]]:
        """The first k places where mask `which` (0: bad non-finite, 1: values over) holds, with both values."""
        found: list = []
        for s in range(0, gf.numel(), chunk):
            g64, h64, bad, _, _, over, _ = pieces(s)
            mask = bad if which == 0 else over
            for i in mask.nonzero().flatten()[:k - len(found)].tolist():
                found.append((_unravel(s + i, g.shape), g64[i].item(), h64[i].item()))
            if len(found) >= k:
                break
        return found

    if n_bad:
        idx, gv, hv = first(0, 1)[0]
        return Comparison(False, f"{n_bad} non-finite values where the reference is finite (first at {idx}: "
                          f"{gv} vs {hv})", mismatches=n_bad)
    if n_fin:
        return Comparison(False, f"{n_fin} finite values where the reference is NaN/Inf", mismatches=n_fin)
    if n_over:
        lines = [f"  at {idx}: got {gv:.6g}, expected {hv:.6g}" for idx, gv, hv in first(1, 5)]
        return Comparison(False, f"{n_over} of {g.numel()} values off by more than atol={atol:g} + rtol={rtol:g}*|ref| "
                          f"(max abs {max_abs:.3g}, max rel {max_rel:.3g})", max_abs, max_rel, n_over,
                          "first mismatches:\n" + "\n".join(lines))
    return Comparison(True, "", max_abs, max_rel, 0)


def unchanged(a: list, b: list) -> bool:
    """Whether the inputs `b` read back after a call are the inputs `a` it was given (NaNs equal to NaNs)."""
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            y = y.to(x.device)
            if not torch.equal(x, y) and not (x.is_floating_point() and torch.equal(x.nan_to_num(), y.nan_to_num())):
                return False
    return True
