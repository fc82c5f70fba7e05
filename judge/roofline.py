"""The device's ceilings, measured once per device and cached: copy bandwidth and matrix rate per dtype.

Fractions of roofline are against these measured ceilings, never a table of datasheet figures.
"""
from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import torch

CACHE = Path(os.environ.get("KERNELSEARCH_CACHE", Path.home() / ".cache" / "kernelsearch")) / "ceilings.json"


def events_ms(fn, reps: int = 20, warmup: int = 1) -> float:
    """The median of `reps` timings of `fn()` in ms, each by CUDA events around one call, after `warmup` untimed
    calls. With no warm-up the first start event is recorded behind whatever work is already queued."""
    for _ in range(warmup):
        fn()
    if warmup:
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def measure_ceilings(device: str = "cuda") -> dict:
    """Copy bandwidth (bytes read + written, GB/s) and dense matmul rates (TFLOP/s) on random data."""
    n = 1 << 28  # 1 GiB of fp32
    a = torch.randn(n, device=device)
    b = torch.empty_like(a)
    copy_ms = events_ms(lambda: b.copy_(a))  # noqa: F821 - deleted only after the call
    del a, b
    out = {"copy_gbps": 2 * n * 4 / (copy_ms * 1e-3) / 1e9}
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for name, dt, m in (("bfloat16", torch.bfloat16, 8192), ("float16", torch.float16, 8192),
                            ("float32", torch.float32, 4096)):
            x = torch.randn(m, m, device=device, dtype=dt)
            y = torch.randn(m, m, device=device, dtype=dt)
            ms = events_ms(lambda: x @ y, reps=10)
            out[f"{name}_tflops"] = 2 * m**3 / (ms * 1e-3) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return out


def ceilings(device: str = "cuda") -> dict:
    name = torch.cuda.get_device_name(torch.device(device))
    key = f"{name}|torch {torch.__version__}"
    cache = {}
    if CACHE.exists():
        try:
            cache = json.loads(CACHE.read_text())
        except json.JSONDecodeError:
            cache = {}
    if key not in cache:
        cache[key] = measure_ceilings(device)
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        tmp = CACHE.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1))
        tmp.replace(CACHE)
    return {**cache[key], "device": name}


def roofline(flops: float | None, nbytes: float | None, time_ms: float, dtype: str, ceil: dict) -> dict:
    """Achieved GB/s and TFLOP/s, and the fraction of the binding ceiling (the larger of the two floors)."""
    s = time_ms * 1e-3
    out: dict = {"gbps": nbytes / s / 1e9 if nbytes else None, "tflops": flops / s / 1e12 if flops else None}
    floors = {}
    if nbytes:
        floors["memory"] = nbytes / (ceil["copy_gbps"] * 1e9)
    rate = ceil.get(f"{dtype}_tflops")
    if flops and rate:
        floors["compute"] = flops / (rate * 1e12)
    if floors:
        bound = max(floors, key=floors.get)
        out["bottleneck"] = bound
        out["roofline_fraction"] = floors[bound] / s
    return out


def io_floor_ms(in_bytes: int, out_bytes: int, ceil: dict) -> float | None:
    """The time a call's inputs and outputs alone take to move once at the measured copy bandwidth."""
    gbps = ceil.get("copy_gbps")
    if not gbps:
        return None
    return (in_bytes + out_bytes) / (gbps * 1e9) * 1e3
