"""Where evaluations run: the config's `evaluation.backend` and its `ray:` section.

`evaluation:` is the judge's EvalSettings (judge/settings.py) plus `backend`, which only the sandbox reads: the
judge is handed `judge_settings()`, the same object it always got. `ray:` is read only when `backend: ray`
(sandbox/ray_backend.py); config.py refuses a `ray:` section under `backend: local`, where it would do nothing.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from kernelsearch.judge.settings import EvalSettings


class EvaluationConfig(EvalSettings):
    # local: the pool on this machine (sandbox/pool.py); ray: the same pool inside one long-lived actor per GPU of a
    # Ray cluster (sandbox/ray_backend.py)
    backend: Literal["local", "ray"] = "local"

    def judge_settings(self) -> EvalSettings:
        """What the pool passes to every judge: the evaluation's settings without the backend."""
        return EvalSettings(**self.model_dump(exclude={"backend"}))


class RaySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # auto (the cluster this machine joined with `ray start`), ray://host:10001 (Ray Client), host:6379; not given:
    # a cluster of this machine alone, started on demand and stopped with the run
    address: Optional[str] = None
    # evaluations at once on one actor (one GPU): correctness checks side by side, timings one at a time and alone,
    # as the local pool does on one GPU
    evaluations_per_actor: int = Field(default=2, ge=1)
    # CPUs each actor reserves beside its GPU; without GPUs (device: cpu, or a cluster with none: the interpreter and
    # the sm_90 compile, work that needs no GPU) each actor reserves only these, and the cluster's CPUs set how many
    cpus_per_actor: float = Field(default=1.0, gt=0)
    # at most this many actors (GPUs) for this process: how two runs of kernelsearch divide one cluster; not given:
    # every GPU (or every cpus_per_actor CPUs) of the cluster
    max_actors: Optional[int] = Field(default=None, ge=1)
    # how long to wait for the first actor to be placed and start (the cluster's GPUs may all be held)
    start_timeout_s: float = Field(default=300.0, gt=0)
