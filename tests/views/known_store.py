"""A store with a known idea tree, written row by row, for the views' and the queries' tests.

Run "alpha" (softmax, CPU interpreter, finished after 2 rounds):

    k1 seed ok 1.00x                                  (the starter)
    ├── i1 r1 "one pass with an online max"
    │   ├── k2 b0 ok 1.50x (compile 1.20x, 30% roofline)
    │   │   ├── i3 r2 "keep the row in registers"
    │   │   │   ├── k6 b0 ok 2.50x (compile 2.00x, 55% roofline)   <- the best
    │   │   │   └── k7 b1 timeout
    │   │   └── i5 r2 "unroll the reduction"           (no branch written)
    │   └── k3 b1 incorrect "max abs err 3.1e-02 at case odd_1 (row 7)"
    └── i2 r1 "BLOCK 4096 with 8 warps"
        ├── k4 b0 compile_error
        └── k5 b1 ok 1.20x
            └── i4 r2 "vectorized loads"
                ├── k8 b0 crash
                └── k9 b1 queued (no evaluation)

Run "beta" (softmax, cuda-events timings): k20 seed ok 1.00x, i20 -> k21 ok 3.00x.
"""
from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlmodel import Session

from kernelsearch.store.database import open_store
from kernelsearch.store.models import Evaluation, Idea, Kernel, LLMCall, Run

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)

STARTER = '''import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * n_cols + offs, e / tl.sum(e, axis=0), mask=offs < n_cols)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
        return y
'''


def variant(tag: str, block: int = 1024, warps: int = 4) -> str:
    code = STARTER.replace("BLOCK=1024)", f"BLOCK={block}, num_warps={warps})")
    return code.replace("import torch\n", f"import torch  # variant: {tag}\n", 1)


CODES = {
    1: STARTER,
    2: variant("online max", 2048),
    3: variant("online max, wrong mask", 2048).replace("mask=offs < n_cols)", "mask=offs <= n_cols)"),
    4: variant("block 4096", 4096, 8).replace("tl.exp(x)", "tl.exp(x, bogus=1)"),
    5: variant("block 4096", 4096, 8),
    6: variant("registers", 2048, 8),
    7: variant("registers, spin", 2048, 16),
    8: variant("vectorized", 8192, 8),
    9: variant("vectorized, queued", 8192, 4),
    20: STARTER.replace("BLOCK=1024)", "BLOCK=512)"),
    21: variant("gpu", 4096, 16),
}


def _h(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def _ev(kid: int, status: str, minute: float, **kw) -> Evaluation:
    timing_kind = kw.pop("timing_kind", "cpu-interpreter")
    device = kw.pop("device", "cpu-interpreter")
    detail = kw.pop("detail", {"correctness": {"cases": 3, "passed": 3 if status == "ok" else 1}})
    return Evaluation(kernel_id=kid, status=status, timing_kind=timing_kind, device=device,
                      created_at=T0 + timedelta(minutes=minute), detail_json=json.dumps(detail), **kw)


def build_known_store(path: Path | str) -> Path:
    """Write the known tree into a fresh SQLite file at `path` and return the path."""
    path = Path(path)
    engine = open_store(path)
    with Session(engine) as s:
        s.add(Run(id=1, name="alpha", problem="softmax", config_json="{}", status="finished",
                  stop_reason="rounds_done", device="cpu-interpreter", elapsed_s=590.0,
                  started_at=T0, finished_at=T0 + timedelta(minutes=10)))
        s.add(Run(id=2, name="beta", problem="softmax", config_json="{}", status="finished",
                  stop_reason="target_speedup", device="NVIDIA H200", elapsed_s=120.0,
                  started_at=T0, finished_at=T0 + timedelta(minutes=2)))
        s.flush()   # rows of different tables go in the order written (foreign keys are on)
        s.add_all([
            LLMCall(id=1, run_id=1, role="ideas", provider="offline", model="rules", tokens_in=1000,
                    tokens_out=500, cost_usd=0.01, latency_s=1.0, created_at=T0 + timedelta(minutes=1)),
            LLMCall(id=2, run_id=1, role="code", provider="offline", model="rules", tokens_in=2000,
                    tokens_out=1000, cost_usd=0.02, latency_s=2.0, created_at=T0 + timedelta(minutes=2)),
            LLMCall(id=3, run_id=1, role="ideas", provider="offline", model="rules", tokens_in=1500,
                    tokens_out=700, cost_usd=0.015, latency_s=1.5, created_at=T0 + timedelta(minutes=5)),
            LLMCall(id=4, run_id=1, role="code", provider="openai", model="gpt-x", status="error",
                    tokens_in=300, tokens_out=0, cost_usd=None, latency_s=30.0, error="HTTP 503",
                    created_at=T0 + timedelta(minutes=6)),
            LLMCall(id=5, run_id=2, role="ideas", provider="anthropic", model="claude-x", tokens_in=4000,
                    tokens_out=2000, cost_usd=0.5, latency_s=5.0, created_at=T0 + timedelta(minutes=1)),
        ])
        s.flush()

        def kernel(kid: int, run: int, idea: int | None, parent: int | None, rnd: int, branch: int,
                   call: int | None = None) -> Kernel:
            return Kernel(id=kid, run_id=run, idea_id=idea, parent_kernel_id=parent, round=rnd, branch=branch,
                          code=CODES[kid], code_hash=_h(CODES[kid]), llm_call_id=call,
                          created_at=T0 + timedelta(minutes=kid % 10 + 0.5))

        s.add(kernel(1, 1, None, None, 0, 0))
        s.add(kernel(20, 2, None, None, 0, 0))
        s.flush()
        s.add_all([
            Idea(id=1, run_id=1, round=1, parent_kernel_id=1, title="one pass with an online max",
                 text="Track the running max and sum in one pass over the row.\nSaves one read of x.",
                 branches_wanted=2, status="coded", llm_call_id=1, created_at=T0 + timedelta(minutes=1)),
            Idea(id=2, run_id=1, round=1, parent_kernel_id=1, title="BLOCK 4096 with 8 warps",
                 text="Bigger blocks, more warps.", branches_wanted=2, status="coded", llm_call_id=1,
                 created_at=T0 + timedelta(minutes=1)),
            Idea(id=20, run_id=2, round=1, parent_kernel_id=20, title="wide rows on the GPU", text="-",
                 branches_wanted=1, status="coded", llm_call_id=5, created_at=T0 + timedelta(minutes=1)),
        ])
        s.flush()
        s.add_all([kernel(2, 1, 1, 1, 1, 0, 2), kernel(3, 1, 1, 1, 1, 1, 2), kernel(4, 1, 2, 1, 1, 0, 2),
                   kernel(5, 1, 2, 1, 1, 1, 2), kernel(21, 2, 20, 20, 1, 0)])
        s.flush()
        s.add_all([
            Idea(id=3, run_id=1, round=2, parent_kernel_id=2, title="keep the row in registers",
                 text="Load the row once and keep it in registers.", branches_wanted=2, status="coded",
                 llm_call_id=3, created_at=T0 + timedelta(minutes=5)),
            Idea(id=4, run_id=1, round=2, parent_kernel_id=5, title="vectorized loads", text="128-bit loads.",
                 branches_wanted=2, status="open", llm_call_id=3, created_at=T0 + timedelta(minutes=5)),
            Idea(id=5, run_id=1, round=2, parent_kernel_id=2, title="unroll the reduction", text="Unroll.",
                 branches_wanted=2, status="open", llm_call_id=3, created_at=T0 + timedelta(minutes=5)),
        ])
        s.flush()
        s.add_all([kernel(6, 1, 3, 2, 2, 0), kernel(7, 1, 3, 2, 2, 1), kernel(8, 1, 4, 5, 2, 0),
                   kernel(9, 1, 4, 5, 2, 1)])
        s.flush()
        s.add_all([
            _ev(1, "ok", 0.9, stage="timing", time_ms=2.0, ref_time_ms=2.0, compile_ref_time_ms=1.6, speedup=1.0,
                speedup_compile=0.8, roofline_fraction=0.10, gbps=10.0, tflops=0.01, bottleneck="memory",
                wall_s=3.0),
            _ev(2, "ok", 2.5, stage="timing", time_ms=4 / 3, ref_time_ms=2.0, compile_ref_time_ms=1.6, speedup=1.5,
                speedup_compile=1.2, roofline_fraction=0.30, gbps=30.0, tflops=0.02, bottleneck="memory",
                detail={"timings": {"candidate": {"median_ms": 1.3333, "spread": 0.02}}, "peak_vram_mb": 12.5}),
            _ev(3, "incorrect", 2.6, stage="correctness", reason="max abs err 3.1e-02 at case odd_1 (row 7)",
                error_text="mismatch at [7, 1000]: got 0.031, want 0.0"),
            _ev(4, "compile_error", 2.7, stage="compile", reason="CompilationError: exp() got an unexpected "
                "keyword argument 'bogus'", error_text="Traceback (most recent call last):\n  ...\nTypeError"),
            _ev(5, "ok", 2.8, stage="timing", time_ms=2.0 / 1.2, ref_time_ms=2.0, speedup=1.2,
                roofline_fraction=0.22, bottleneck="memory"),
            _ev(6, "ok", 6.0, stage="timing", time_ms=0.8, ref_time_ms=2.0, compile_ref_time_ms=1.6, speedup=2.5,
                speedup_compile=2.0, roofline_fraction=0.55, gbps=55.0, tflops=0.05, bottleneck="memory"),
            _ev(7, "timeout", 7.0, stage="timing", reason="no result within 120 s; the process group was killed"),
            _ev(8, "crash", 7.5, stage="correctness", reason="worker died with SIGSEGV (illegal memory access)"),
            _ev(20, "ok", 0.5, stage="timing", time_ms=0.01, ref_time_ms=0.01, speedup=1.0,
                timing_kind="cuda-events", device="NVIDIA H200"),
            _ev(21, "ok", 1.5, stage="timing", time_ms=0.01 / 3, ref_time_ms=0.01, speedup=3.0,
                roofline_fraction=0.8, timing_kind="cuda-events", device="NVIDIA H200", gpu_index=0),
        ])
        s.commit()
    engine.dispose()
    return path


# What the tree of "alpha" is, for assertions.
ALPHA_BEST = 6
ALPHA_BEST_PATH = [1, 2, 6]
ALPHA_STATUS = {1: "ok", 2: "ok", 3: "incorrect", 4: "compile_error", 5: "ok", 6: "ok", 7: "timeout",
                8: "crash", 9: "queued"}
ALPHA_SPEEDUP = {1: 1.0, 2: 1.5, 5: 1.2, 6: 2.5}
ALPHA_IDEA_OF = {2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3, 8: 4, 9: 4}
ALPHA_IDEA_PARENT = {1: 1, 2: 1, 3: 2, 4: 5, 5: 2}
