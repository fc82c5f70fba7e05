"""How long `kernelsearch tree` and `kernelsearch report` take on a 10,000-kernel run.

Builds a synthetic store in a temporary file (one run: a starter, then rounds of ideas with 4 branches each,
seeds drawn from the best kernels so far, 2.5 kB of distinct code per kernel, the usual mix of statuses),
then times each command as a user runs it (a fresh `kernelsearch` process, imports included) and in process.
The target (issue 7) is under 2 s each.

    .venv/bin/python bench/bench_views.py [--kernels 10000] [--keep DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import insert
from sqlmodel import Session

from kernelsearch.store.database import open_store
from kernelsearch.store.models import Evaluation, Idea, Kernel, LLMCall, Run

BRANCHES = 4
FAILS = [("incorrect", "correctness", "max abs err 4.2e-02 at case odd_3 (row 17)"),
         ("compile_error", "compile", "CompilationError: at 12:4: unsupported tensor shape"),
         ("timeout", "timing", "no result within 120 s; the process group was killed"),
         ("crash", "correctness", "worker died with SIGSEGV (illegal memory access)"),
         ("rejected", "static", "the candidate calls torch.softmax")]
TEMPLATE = '''import torch
import triton
import triton.language as tl

# variant {n}: BLOCK={block}, num_warps={warps}, stages={stages}


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    """One program per row; the row is read once and kept in registers (bytes moved: 2 * rows * cols * 4)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride_x + offs, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + offs, e / s, mask=mask)


def _launch(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    if cols > {block}:
        raise ValueError(f"row of {{cols}} does not fit one block of {block}")
    y = torch.empty_like(x)
    _softmax_kernel[(rows,)](x, y, x.stride(0), y.stride(0), cols, BLOCK={block}, num_warps={warps},
                             num_stages={stages})
    return y


class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _launch(x)
'''


def build(path: Path, n_kernels: int, seed: int = 0) -> str:
    """Write one run of about n_kernels kernels; return its name."""
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    engine = open_store(path)
    name = "bench10k"
    ideas_per_round = 100
    with Session(engine) as s:
        s.add(Run(id=1, name=name, problem="softmax", config_json="{}", status="finished",
                  stop_reason="budget_evaluations", device="NVIDIA H200", started_at=t0, elapsed_s=8 * 3600.0,
                  finished_at=t0 + timedelta(hours=8)))
        s.commit()
        kernels, evals, ideas, calls = [], [], [], []
        ok_pool: list[tuple[float, int]] = []
        kid = iid = cid = 0

        def add_kernel(idea_id, parent, rnd, branch, at, base_speedup):
            nonlocal kid
            kid += 1
            code = TEMPLATE.format(n=kid, block=rng.choice([1024, 2048, 4096, 8192]), warps=rng.choice([4, 8, 16]),
                                   stages=rng.choice([1, 2, 3]))
            kernels.append(dict(id=kid, run_id=1, idea_id=idea_id, parent_kernel_id=parent, round=rnd, branch=branch,
                                code=code, language="triton", code_hash=hashlib.sha256(code.encode()).hexdigest()[:16],
                                created_at=at))
            r = rng.random()
            if r < 0.02 and rnd > 0:
                return                                   # queued
            if r < 0.70 or rnd == 0:
                sp = max(0.2, base_speedup * rng.uniform(0.75, 1.06))
                evals.append(dict(kernel_id=kid, status="ok", stage="timing", time_ms=0.05 / sp, ref_time_ms=0.05,
                                  compile_ref_time_ms=0.04, speedup=sp, speedup_compile=sp * 0.8,
                                  roofline_fraction=min(0.95, 0.3 * sp), gbps=1000 * sp, tflops=0.01 * sp,
                                  bottleneck="memory", timing_kind="cuda-events", device="NVIDIA H200",
                                  detail_json=json.dumps({"timings": {"candidate": {"median_ms": 0.05 / sp}}}),
                                  created_at=at + timedelta(seconds=30)))
                ok_pool.append((sp, kid))
            else:
                status, stage, reason = rng.choice(FAILS)
                evals.append(dict(kernel_id=kid, status=status, stage=stage, reason=reason,
                                  error_text="Traceback (most recent call last):\n" + "  ...\n" * 5 + reason,
                                  timing_kind="cuda-events", device="NVIDIA H200", detail_json="{}",
                                  created_at=at + timedelta(seconds=30)))

        add_kernel(None, None, 0, 0, t0, 1.0)
        rnd = 0
        while kid < n_kernels:
            rnd += 1
            ok_pool.sort(reverse=True)
            seeds = ok_pool[:8]
            for _ in range(ideas_per_round):
                if kid >= n_kernels:
                    break
                iid += 1
                cid += 1
                at = t0 + timedelta(seconds=rnd * 1000 + iid % ideas_per_round)
                calls.append(dict(id=cid, run_id=1, role="ideas", provider="anthropic", model="claude-x",
                                  status="ok", tokens_in=3000, tokens_out=800, cost_usd=0.02, latency_s=4.0,
                                  attempts=1, created_at=at))
                sp, parent = rng.choice(seeds)
                ideas.append(dict(id=iid, run_id=1, round=rnd, parent_kernel_id=parent, llm_call_id=cid,
                                  title=f"idea {iid}: BLOCK {rng.choice([1024, 4096])} with {rng.choice([4, 8])} "
                                        "warps and the row kept in registers",
                                  text="Keep the row in registers and use an online max. " * 3, meta_json="{}",
                                  branches_wanted=BRANCHES, status="coded", created_at=at))
                for b in range(BRANCHES):
                    if kid >= n_kernels:
                        break
                    add_kernel(iid, parent, rnd, b, at + timedelta(seconds=b), sp * 1.03)
        s.execute(insert(LLMCall), calls)
        for r in range(rnd + 1):   # foreign keys are on: a round's ideas before its kernels, after their seeds
            rows = [i for i in ideas if i["round"] == r]
            if rows:
                s.execute(insert(Idea), rows)
            s.execute(insert(Kernel), [k for k in kernels if k["round"] == r])
        s.execute(insert(Evaluation), evals)
        s.commit()
    engine.dispose()
    return name


def _time_cli(args: list[str]) -> float:
    exe = Path(sys.executable).with_name("kernelsearch")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "kernelsearch"]
    t = time.perf_counter()
    subprocess.run(cmd + args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, help="keep the store and the report in this folder")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ks-bench-"))
    try:
        db = tmp / "bench.db"
        t = time.perf_counter()
        name = build(db, a.kernels)
        print(f"built {a.kernels} kernels in {time.perf_counter() - t:.1f} s ({db.stat().st_size / 1e6:.1f} MB)")

        from typer.testing import CliRunner

        from kernelsearch.cli import app

        runner = CliRunner()
        rows = []
        for label, args in [("tree", ["tree", name, "--db", str(db)]),
                            ("tree --json", ["tree", name, "--db", str(db), "--json"]),
                            ("report", ["report", name, "--db", str(db), "-o", str(tmp / "report.html")])]:
            t = time.perf_counter()
            with redirect_stdout(io.StringIO()):
                res = runner.invoke(app, args)
            inproc = time.perf_counter() - t
            if res.exit_code != 0:
                raise SystemExit(f"{label} failed: {res.output[-2000:]}")
            cli = min(_time_cli(args) for _ in range(2))
            rows.append((label, inproc, cli))
        size = (tmp / "report.html").stat().st_size / 1e6
        print(f"{'command':<14}{'in process':>12}{'new process':>14}   (target: < 2 s)")
        for label, inproc, cli in rows:
            flag = "" if cli < 2.0 else "  OVER"
            print(f"{label:<14}{inproc:>10.2f} s{cli:>12.2f} s{flag}")
        print(f"report.html: {size:.1f} MB")
        if a.keep:
            a.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(db, a.keep / "bench.db")
            shutil.copy(tmp / "report.html", a.keep / "report.html")
            print(f"kept in {a.keep}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
