"""Split-K and GEMV (issue 33) on a GPU: CUDA-event times of the matmul family's points at KernelBench level 1's
6_Matmul_with_large_K_dimension_ (256 x 524288 @ 524288 x 256 fp32) and 4_Matrix_vector_multiplication_
(2048 x 1048576 @ 1048576 x 1 fp32), against torch.matmul (TF32 off, as the judge pins it).

    python bench/matmul_splitk_gpu.py            # both shapes; lines appended to $OUT/matmul_splitk.txt as they come
    python bench/matmul_splitk_gpu.py gemv       # one shape (splitk | gemv)

Each point: median of 10 calls after 3 warm-ups (operands of 1 GB and 8.6 GB: L2 holds none of them), its error as a
multiple of the judge's long-sum bound (judge/numerics.py sum_bound: atol 1e-5 + rtol 1e-4 |y| + 4 u (sqrt(K) |y| +
S), S = |y| for torch.rand inputs; <= 1 passes), and GB/s or TFLOP/s.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import torch

from kernelsearch.families.matmul.space import SPACE
from kernelsearch.judge.numerics import pin_precision, sum_bound
from kernelsearch.judge.problem import load_source_module

OUT = Path(os.environ.get("OUT", ".")) / "matmul_splitk.txt"
TODAY = {"variant": "tiled", "BM": 64, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": 3, "split_k": 1,
         "fp32_precision": "ieee"}   # what the matcher started both problems from before split-K and gemv
SHAPES = {
    "splitk": ((256, 524288, 256), [
        ("no split (before)", TODAY),
        ("split 8 ieee", {**TODAY, "split_k": 8}),
        ("split 16 ieee (start)", {**TODAY, "split_k": 16}),
        ("split 32 ieee", {**TODAY, "split_k": 32}),
        ("split 16 tf32x3", {**TODAY, "split_k": 16, "fp32_precision": "tf32x3"}),
        ("split 32 tf32x3", {**TODAY, "split_k": 32, "fp32_precision": "tf32x3"}),
        ("128x128 w8 split 32 tf32x3", {**TODAY, "BM": 128, "BN": 128, "num_warps": 8, "split_k": 32,
                                        "fp32_precision": "tf32x3"}),
        ("split 16 ieee w8", {**TODAY, "split_k": 16, "num_warps": 8}),
    ]),
    "gemv": ((2048, 1048576, 1), [
        ("tiled 64x64 (before)", TODAY),
        ("gemv rows 4 bk 1024 (start)", {"variant": "gemv", "num_warps": 4, "gemv_rows": 4, "gemv_block_k": 1024}),
        ("gemv rows 2", {"variant": "gemv", "num_warps": 4, "gemv_rows": 2, "gemv_block_k": 1024}),
        ("gemv rows 8", {"variant": "gemv", "num_warps": 4, "gemv_rows": 8, "gemv_block_k": 1024}),
        ("gemv rows 1 bk 2048", {"variant": "gemv", "num_warps": 4, "gemv_rows": 1, "gemv_block_k": 2048}),
        ("gemv rows 4 bk 512", {"variant": "gemv", "num_warps": 4, "gemv_rows": 4, "gemv_block_k": 512}),
        ("gemv rows 8 w8", {"variant": "gemv", "num_warps": 8, "gemv_rows": 8, "gemv_block_k": 1024}),
        ("gemv rows 4 split 2", {"variant": "gemv", "num_warps": 4, "gemv_rows": 4, "gemv_block_k": 1024,
                                 "split_k": 2}),
    ]),
}


def log(line: str) -> None:
    print(line, flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as f:
        f.write(line + "\n")


def timed(fn, warmup: int = 3, iters: int = 10) -> float:
    from kernelsearch.judge.roofline import events_ms  # the one copy of a CUDA-event median

    return events_ms(fn, reps=iters, warmup=warmup)


def main(argv: list[str]) -> None:
    pin_precision()
    tmp = Path(tempfile.mkdtemp(prefix="ks-splitk-"))
    log(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for name in argv or list(SHAPES):
        (m, k, n), points = SHAPES[name]
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.rand(m, k, device="cuda", generator=gen)
        b = torch.rand(k, n, device="cuda", generator=gen)
        y = (a.double() @ b.double())
        gb, tflop = (m * k + k * n + m * n) * 4 / 1e9, 2 * m * n * k / 1e12
        bound = sum_bound(k, y, y, 1e-5, 1e-4)

        def report(label, fn):
            try:
                out = fn()
                err = float(((out.double() - y).abs() / bound).max())
                ms = timed(fn)
                log(f"{name} {m}x{k}x{n} | {label:32s} | {ms:9.3f} ms | {gb / ms:7.1f} GB/s | "
                    f"{tflop / ms * 1e3:6.1f} TFLOP/s | err/bound {err:.3f}")
                return ms
            except Exception as exc:   # a point that fails to compile or run is reported, the rest go on
                log(f"{name} {m}x{k}x{n} | {label:32s} | FAILED {type(exc).__name__}: {str(exc)[:200]}")
                return None

        eager = report("torch.matmul (eager)", lambda: a @ b)
        for i, (label, point) in enumerate(points):
            params = {**SPACE.default, **point}
            path = tmp / f"p{name}{i}.py"
            path.write_text(SPACE.render(params))
            mod = load_source_module(path.read_text(), f"ks_splitk_{name}_{i}", str(path))
            ms = report(label, lambda: mod.matmul(a, b))
            if ms and eager:
                log(f"{name} {m}x{k}x{n} | {label:32s} | speedup over eager {eager / ms:.2f}x")
        del a, b, y, bound
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
