"""The evaluation's settings: one type, read by the config (`evaluation:`), the pool, the judge and the runners.

The config file's `evaluation:` section is this model; the pool adds what only it knows (device mode, GPUs,
concurrency, the per-evaluation secret seed) and passes the same object to every process of an evaluation.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

# a re-timing group's candidates at most (judge/group.py): each is a side of every batch, whose calls share the memory
GROUP_MAX = 4


class EvalSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(default=300.0, gt=0)   # per candidate, whole evaluation; its processes are killed after
    trials: int = Field(default=2, ge=1)            # fresh-input correctness trials per shape case
    timing_iters: int = Field(default=128, ge=1)    # timed calls per side (GPU); the CPU interpreter uses fewer
    compare_compile: bool = False                   # also time torch.compile(reference), side by side
    allow_degenerate_problem: bool = False          # run even if the reference output barely varies
    fork_server: bool = True                        # processes forked from a torch-loaded parent (CPU and GPU)
    isolate_network: bool = True                    # candidate processes in an empty network namespace (where allowed)
    cpu_memory_gb: float = Field(default=8.0, gt=0)  # CPU candidate processes' address-space limit
    gpu_memory_fraction: float = Field(default=0.8, gt=0, le=1)  # each GPU process's share of the device memory
    aot_compile: bool = True                        # without a GPU: compile for sm_90 too (registers, spills)
    # a re-timing of a kernel already judged correct (search/finalists.py): the correctness stage checks the timed case
    # once (every output of every timed call is checked again by the clock), no range, stability or sm_90 stage
    retime: bool = False
    # first evaluations of one problem queued beyond the free slots: up to this many in one evaluation, each checked
    # in full (one after another, its own verdict), those that pass timed side by side in one timing stage
    # (judge/group.py, sandbox/groups.py); 1: each alone
    group_first: int = Field(default=1, ge=1, le=GROUP_MAX)
    # the memory the judge plans its own work with (float64 references, comparison chunks, timed batch sizes);
    # None: measured (the GPU's free memory, the host's available memory on the CPU). judge/memory.py
    judge_memory_mb: float | None = Field(default=None, gt=0)
    # torch operations a candidate's host code may call for this problem (KernelBench lets a level-2 solution keep
    # its GEMM in cuBLAS): names from scan.ALLOWABLE_TORCH, enforced by the static scan; empty is the strict default
    allow_torch: list[str] = Field(default_factory=list)

    @field_validator("allow_torch")
    @classmethod
    def _known_ops(cls, names: list[str]) -> list[str]:
        from kernelsearch.judge.scan import ALLOWABLE_TORCH

        unknown = [n for n in names if n not in ALLOWABLE_TORCH]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not an operation that can be allowed; the names are "
                             f"{', '.join(ALLOWABLE_TORCH)}")
        return sorted(set(names), key=list(ALLOWABLE_TORCH).index)
