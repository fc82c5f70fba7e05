"""One typed evaluation result: produced by the judge, serialized once (to_json) by the judge's process, parsed
once (from_json) by the pool, and stored by one store function (store.queries.add_evaluation via `row`).

The judge decides every field; nothing the candidate's process sends becomes a field except through the judge.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

from kernelsearch.judge.status import Status
from kernelsearch.store.models import Evaluation


@dataclass
class EvalResult:
    status: Status
    reason: Optional[str] = None          # one line: why it is not ok (the check that failed)
    error_text: Optional[str] = None      # the longer text kept for the next prompt
    stage: Optional[str] = None           # the last stage reached
    time_ms: Optional[float] = None       # candidate per-call time on the timed case (the judge's clock)
    ref_time_ms: Optional[float] = None   # eager reference, timed the same way, interleaved
    compile_ref_time_ms: Optional[float] = None
    speedup: Optional[float] = None
    speedup_compile: Optional[float] = None
    gbps: Optional[float] = None
    tflops: Optional[float] = None
    roofline_fraction: Optional[float] = None
    bottleneck: Optional[str] = None
    timing_kind: Optional[str] = None     # judge-wall-clock (GPU) | cpu-interpreter
    device: Optional[str] = None
    gpu_index: Optional[int] = None
    wall_s: Optional[float] = None
    peak_vram_mb: Optional[float] = None  # the candidate's process, largest CUDA allocation seen (GPU)
    torch_ops: Optional[str] = None       # the allowed torch operations (evaluation.allow_torch) its host code calls,
    #                                       comma-separated; "" none; None: not scanned (refused before the scan)
    detail: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.ok

    @classmethod
    def failure(cls, status: Status, reason: str, *, stage: str, error_text: str | None = None,
                **extra: Any) -> "EvalResult":
        return cls(status=status, reason=reason, stage=stage, error_text=error_text, **extra)

    def to_json(self) -> str:
        d = asdict(self)
        d["status"] = self.status.value
        return json.dumps(d, default=str)

    @classmethod
    def from_json(cls, text: str | bytes) -> "EvalResult":
        """Parse what a judge process sent; anything malformed raises ValueError naming what is wrong."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"an evaluation result must be an object, not {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown result fields: {', '.join(sorted(unknown))}")
        data["status"] = Status(data.get("status"))
        if not isinstance(data.get("detail", {}), dict):
            raise ValueError("result detail must be an object")
        return cls(**data)

    def row(self, kernel_id: int) -> Evaluation:
        """The store's row for this result."""
        cols = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("detail", "peak_vram_mb")}
        cols["status"] = self.status.value
        detail = dict(self.detail)
        if self.peak_vram_mb is not None:
            detail["peak_vram_mb"] = self.peak_vram_mb
        return Evaluation(kernel_id=kernel_id, detail_json=json.dumps(detail, default=str), **cols)
