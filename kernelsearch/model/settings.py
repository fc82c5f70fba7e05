"""The `plan:` and `verify:` sections of a model run's config (a config with `model:` in place of `problem:`)."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlanSettings(_Strict):
    profile_iters: int = Field(default=3, ge=1)           # profiled forwards (after one warm-up); times are per forward
    min_share: float = Field(default=0.02, ge=0, lt=1)     # an operator group below this share of the model is not hot
    min_gain: float = Field(default=0.01, ge=0)            # stop when the rest together cannot speed the model up more
    max_problems: int = Field(default=6, ge=1)             # searched problems at most, by expected gain
    attainable: float = Field(default=0.8, gt=0, le=1)     # fraction of the roofline a found kernel is assumed to reach
    max_speedup: float = Field(default=20.0, gt=1)         # the possible speedup of one problem is capped here
    # a searched problem whose share of the evaluation budget is under this is left out (lowest gain first) and its
    # share goes to the others: 2 evaluations are its starter and one branch, too few to leave the starter
    min_evaluations: int = Field(default=4, ge=0)           # 0: no problem is left out for this


class VerifySettings(_Strict):
    # relative L2 error of the model's output against the original's, per output dtype (a whole model's rounding
    # differences add up over its layers, so the check is on the norm, not element by element)
    tolerance: dict[str, float] = Field(default_factory=lambda: {"float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2,
                                                                 "float64": 1e-8})
    iters: int = Field(default=10, ge=1)                   # timed forwards per variant (median)
    compile: Literal["auto", "on", "off"] = "auto"         # time torch.compile(model) too; auto: on a GPU only
    timeout_s: float = Field(default=1200.0, gt=0)         # the verify subprocess is killed after this
    seed: Optional[int] = None                             # fresh inputs' seed; None: drawn per verify
