"""The evaluation's settings: one type, read by the config (`evaluation:`), the pool, the judge and the runners.

The config file's `evaluation:` section is this model; the pool adds what only it knows (device mode, GPUs,
concurrency, the per-evaluation secret seed) and passes the same object to every process of an evaluation.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EvalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(default=300.0, gt=0)   # per candidate, whole evaluation; its processes are killed after
    trials: int = Field(default=2, ge=1)            # fresh-input correctness trials per shape case
    timing_iters: int = Field(default=50, ge=1)     # timed calls per side (GPU); the CPU interpreter uses fewer
    compare_compile: bool = False                   # also time torch.compile(reference), side by side
    allow_degenerate_problem: bool = False          # run even if the reference output barely varies
    fork_server: bool = True                        # processes forked from a torch-loaded parent (CPU and GPU)
    isolate_network: bool = True                    # candidate processes in an empty network namespace (where allowed)
    cpu_memory_gb: float = Field(default=8.0, gt=0)  # CPU candidate processes' address-space limit
    gpu_memory_fraction: float = Field(default=0.8, gt=0, le=1)  # each GPU process's share of the device memory
    aot_compile: bool = True                        # without a GPU: compile for sm_90 too (registers, spills)
