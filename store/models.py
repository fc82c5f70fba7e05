"""Tables of the idea -> code -> result tree.

A Kernel with no Evaluation is queued work: resume is a query, not a log replay. A kernel has one evaluation that
judges it (`purpose` NULL) and, if it became a finalist, re-timings (`purpose` "retime": store/clock.py).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

from sqlalchemy import Index, text
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Run(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    problem: str
    config_json: str                      # the validated config, as given (secrets are never in it)
    status: str = "running"               # running | finished | failed | interrupted
    stop_reason: Optional[str] = None     # rounds_done | budget_evaluations | target_speedup | ...
    device: Optional[str] = None          # "cpu-interpreter" or the GPU's name
    elapsed_s: float = 0.0                # wall time spent running, summed over resumes
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: Optional[datetime] = None


class Idea(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    round: int = Field(index=True)
    parent_kernel_id: Optional[int] = Field(default=None, foreign_key="kernel.id")
    title: str
    text: str
    meta_json: str = "{}"                 # structured extras a provider returned (the offline one's params)
    branches_wanted: int = 1
    status: str = "open"                  # open: branches still to write | coded: every branch was attempted
    llm_call_id: Optional[int] = Field(default=None, foreign_key="llmcall.id")
    created_at: datetime = Field(default_factory=utcnow)


class Kernel(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True)
    idea_id: Optional[int] = Field(default=None, foreign_key="idea.id", index=True)  # None: the round-0 seed
    parent_kernel_id: Optional[int] = Field(default=None, foreign_key="kernel.id")
    round: int = 0
    branch: int = 0
    code: str
    language: str = "triton"              # triton | cuda
    code_hash: str = Field(index=True)
    llm_call_id: Optional[int] = Field(default=None, foreign_key="llmcall.id")
    created_at: datetime = Field(default_factory=utcnow)


class Evaluation(SQLModel, table=True):
    # one verdict a kernel, any number of re-timings. The index on kernel_id was unique before re-timings; an older
    # store's is replaced when it is opened for writing (store/database.py RELAXED_INDEXES)
    __table_args__ = (Index("ux_evaluation_verdict", "kernel_id", unique=True, sqlite_where=text("purpose IS NULL")),)

    id: Optional[int] = Field(default=None, primary_key=True)
    kernel_id: int = Field(foreign_key="kernel.id", index=True)
    status: str                           # ok | compile_error | incorrect | timeout | crash | rejected | harness_error
    reason: Optional[str] = None          # one line: why it is not ok (the check that failed)
    error_text: Optional[str] = None      # the longer text kept for the next prompt (traceback, mismatches)
    stage: Optional[str] = None           # the last stage reached: static | compile | correctness | compile_sm90 |
    #                                       timing | roofline, or worker (the pool) | feasibility (the controller)
    time_ms: Optional[float] = None       # candidate median on the timed case
    ref_time_ms: Optional[float] = None   # eager reference median, its own runner, interleaved with the candidate
    compile_ref_time_ms: Optional[float] = None  # torch.compile reference median, where asked
    speedup: Optional[float] = None       # ref_time_ms / time_ms: this evaluation's side-by-side ratio, kept as
    #                                       measured; views show and rank by the run's figure (store/clock.py)
    speedup_compile: Optional[float] = None
    gbps: Optional[float] = None
    tflops: Optional[float] = None
    roofline_fraction: Optional[float] = None
    bottleneck: Optional[str] = None      # memory | compute
    timing_kind: Optional[str] = None     # judge-wall-clock (GPU) | cpu-interpreter
    device: Optional[str] = None
    gpu_index: Optional[int] = None       # the lease the timing held
    detail_json: str = "{}"               # per-stage detail: cases, errors, spread, registers, output
    torch_ops: Optional[str] = None       # allowed torch operations (evaluation.allow_torch) the kernel calls:
    #                                       "matmul,linear"; "" none; None: not scanned, or stored before the column
    wall_s: Optional[float] = None
    purpose: Optional[str] = None         # None: the kernel's evaluation, its verdict; "retime": the same code
    #                                       evaluated again to time it (a finalist, store/clock.py); never a verdict
    created_at: datetime = Field(default_factory=utcnow)


class LLMCall(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: Optional[int] = Field(default=None, foreign_key="run.id", index=True)
    role: str                             # ideas | code
    provider: str
    model: str
    status: str = "ok"                    # ok | error | malformed | refused | truncated
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: Optional[float] = None     # None: the model has no price in the config
    latency_s: float = 0.0
    attempts: int = 1
    error: Optional[str] = None
    reply_text: Optional[str] = None
    created_at: datetime = Field(default_factory=utcnow)


class KernelExport(SQLModel, table=True):
    """A kernel written out in the Hugging Face `kernels` layout (`kernelsearch export`). A store made before this
    table existed gets it, empty, the first time it is opened for writing; read-only views never need it."""

    id: Optional[int] = Field(default=None, primary_key=True)
    kernel_id: int = Field(foreign_key="kernel.id", index=True)
    evaluation_id: Optional[int] = Field(default=None, foreign_key="evaluation.id")
    name: str                             # the kernel's name in the layout (metadata.json's `name`)
    path: str                             # the directory written, absolute
    language: str                         # triton | cuda
    kernel_sha256: str                    # of the evaluated candidate file, as stored (hex)
    checksum: str                         # sha256 of the export's SHA256SUMS: every file it wrote, with its digest
    forced: bool = False                  # written with --force for a kernel that never passed correctness
    created_at: datetime = Field(default_factory=utcnow)


class ModelRun(SQLModel, table=True):
    """A whole-model run (kernelsearch/model/): its Run row is the model's (problem `model:<file>`), its problems'
    searches are child runs. Made on first write like KernelExport: a store older than this table gets it, empty;
    read-only views check that it exists before they read it."""

    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", index=True, unique=True)
    model: str                            # the model file, absolute
    folder: str                           # the run's folder: generated problems, winning kernels, verify's files
    stage: str = "started"                # started | planned | searching | verifying | done
    profile_json: Optional[str] = None    # the grouped profile table, the ceilings, the output's shape
    plan_json: Optional[str] = None       # the Amdahl plan, printed before any search
    verify_json: Optional[str] = None     # the whole model with the winners: errors, times, per-problem results
    created_at: datetime = Field(default_factory=utcnow)


class ModelProblem(SQLModel, table=True):
    """One problem extracted from a model's profile, and the child run that searched it."""

    id: Optional[int] = Field(default=None, primary_key=True)
    model_run_id: int = Field(foreign_key="modelrun.id", index=True)
    key: str                              # unique in the model run: family or operator, sizes, dtype
    spec: str                             # the child run's problem: (family@shape, or the generated file)
    part_json: str                        # the extracted part: shapes, share, counts, how verify swaps it in
    order: int = 0                        # place in the plan (by expected gain)
    selected: bool = False                # searched, per the plan
    child_run: Optional[str] = None       # the child run's name
    child_run_id: Optional[int] = Field(default=None, foreign_key="run.id")
