"""The timed outputs' check on a GPU: the torch form (correctness.agreement's chunked expression) against the one-pass
Triton kernel (judge/agree.py), per call, on the starters' timed outputs, with the kernel's first call in a fresh
process (its compile, or its load from Triton's cache) apart. Prints a table; GPU only.

    python3 bench/check_kernel_gpu.py
Expected on an H100 (2026-12-07, before any run): bf16 4096 x 32000 about 4.4 ms a call for the torch form (the
timing loop's 0.85 s over 192 calls) and about 0.2-0.3 ms for the kernel (two reads of 262 MB at ~2.5 TB/s)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelsearch.judge import agree, correctness  # noqa: E402
from kernelsearch.judge.correctness import agreement  # noqa: E402


def torch_form(g, h, atol, rtol):
    """correctness.agreement with its one-pass kernel turned off: the torch form the kernel replaced."""
    devices, correctness.ONE_PASS_DEVICES = correctness.ONE_PASS_DEVICES, set()
    try:
        return agreement(g, g, h, atol, rtol)
    finally:
        correctness.ONE_PASS_DEVICES = devices


def per_call_ms(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("GPU only")
    rows = []
    first = True
    for name, shape, dtype, tol in (("softmax bf16", (4096, 32000), torch.bfloat16, (1e-2, 1e-2)),
                                    ("rmsnorm bf16", (8192, 4096), torch.bfloat16, (1e-2, 1e-2)),
                                    ("softmax fp32", (8192, 8191), torch.float32, (1e-5, 1e-4))):
        h = torch.randn(shape, device="cuda").to(dtype)
        g = h.clone()
        if first:   # a fresh process's first call: the kernel's compile or its load from the cache
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            agree.count_over(g, h, *tol)
            torch.cuda.synchronize()
            rows.append(("first call (compile or cache load)", f"{(time.perf_counter() - t0) * 1e3:.1f} ms"))
            first = False
        assert bool(torch_form(g, h, *tol)) and int(agree.count_over(g, h, *tol)[0]) == 0
        bad = g.clone()
        bad.view(-1)[-1] += 1
        assert not bool(torch_form(bad, h, *tol)) and int(agree.count_over(bad, h, *tol)[0]) == 1
        t_torch = per_call_ms(lambda: torch_form(g, h, *tol))
        t_kernel = per_call_ms(lambda: agree.count_over(g, h, *tol)[0] == 0)
        gbps = 2 * g.numel() * g.element_size() / (t_kernel * 1e-3) / 1e9
        rows.append((f"{name} {tuple(shape)}", f"torch form {t_torch:.3f} ms, kernel {t_kernel:.3f} ms "
                                               f"({t_torch / t_kernel:.1f}x, kernel {gbps:.0f} GB/s read)"))
        print(rows[-1], flush=True)
    print("\n| check | figure |\n|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} |")


if __name__ == "__main__":
    main()
