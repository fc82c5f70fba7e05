"""The timed outputs' quick check on a GPU in one pass: `correctness.agreement`'s test, max(|g - h| - rtol*|h|) <= atol
in float32, as one Triton kernel that reads each output and its reference once and counts the values that fail it.

The torch form of the same test makes two float32 copies and runs six more passes over each output (on an H100,
bf16 4096 x 32000: 0.85 s of a softmax evaluation's 1.63 s exclusive timing loop, 192 calls at about 4.4 ms a call,
against about 0.2 ms for two reads of 262 MB). NaN and Inf give the same answers: a comparison with NaN is false,
so a NaN anywhere (in g, or g - h where both are Inf, or |g - h| - rtol*|h| where h alone is Inf) counts as a
failure, and an Inf in g alone makes the difference Inf. The kernel is the judge's own, compiled in the judge's
process into the pool user's Triton cache (a candidate's runner has a cache of its own: sandbox/pool.py).

Its first call in a judge process cost about 0.48 s on an H100 (the compile, or its load from the cache), inside the
timing stage's exclusive hold of every evaluation: `warm_behind` compiles it (no launch, no device work) in a thread
while the candidate's runner compiles its own kernels, and the first `count_over` waits for that thread."""
from __future__ import annotations

import contextlib
import itertools
import threading

import torch
import triton
import triton.language as tl

BLOCK = 4096
WARM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)   # (output, reference) pairs of one dtype, warmed
_WARMING: list[threading.Thread] = []


@triton.jit
def _count_over(g_ptr, h_ptr, bad_ptr, n, atol, rtol, BLOCK: tl.constexpr):
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = at < n
    g = tl.load(g_ptr + at, mask=inside, other=0.0).to(tl.float32)
    h = tl.load(h_ptr + at, mask=inside, other=0.0).to(tl.float32)
    ok = tl.abs(g - h) - rtol * tl.abs(h) <= atol   # masked lanes read 0 against 0: ok
    bad = tl.sum((ok == 0).to(tl.int64), axis=0)   # int64: no count wraps round to 0
    tl.atomic_add(bad_ptr, bad, mask=bad > 0)


def count_over(g: torch.Tensor, h: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """The number of values of `g` that fail the test against `h` (same number of elements, same device; any float
    dtypes, read in float32), as a 1-element int64 tensor left on the device."""
    while _WARMING:
        _WARMING.pop().join(30)   # a compile that hangs does not hang the judge: the call compiles it itself
    gf, hf = g.detach().reshape(-1), h.detach().reshape(-1)
    bad = torch.zeros(1, dtype=torch.int64, device=g.device)
    if gf.numel():
        _count_over[(triton.cdiv(gf.numel(), BLOCK),)](gf, hf, bad, gf.numel(), float(atol), float(rtol), BLOCK=BLOCK)
    return bad


def _warm(dtypes: tuple) -> None:
    # best effort, stopped by the first failure: the first real call compiles what is missing, or agreement falls back
    with contextlib.suppress(Exception):   # element counts a multiple of 16 and not (Triton specialises on it)
        for dt, n in itertools.product(dtypes, (4096, 4099)):
            _count_over.warmup(dt, dt, torch.int64, n, 1e-2, 1e-2, BLOCK=BLOCK, grid=(1,))


def warm_behind(dtypes: tuple = WARM_DTYPES) -> None:
    """Start compiling the kernel for outputs of `dtypes` in a thread (no launch); `count_over` waits for it."""
    _WARMING.append(threading.Thread(target=_warm, args=(dtypes,), daemon=True, name="ks-check-warm"))
    _WARMING[-1].start()
