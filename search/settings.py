"""The search's settings: the shape of a round, when to stop, and what one controller is given.

`SearchConfig`, `Budgets` and `Targets` are the `search:`, `budgets:` and `targets:` keys of the config file
(kernelsearch/config.py composes them into the one config tree and loads YAML); unknown keys are rejected here.
`SearchSetup` is everything the controller reads: those three, the problem and its starter, each role's
effective LLM settings, the price table and the torch operations a candidate may call (`evaluation.allow_torch`,
which the roles say in the contract they give the LLM). The CLI builds it from its config (`Config.search_setup()`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from kernelsearch.agent.settings import LLMConfig, Price


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


STRATEGIES = ("branching", "sequential", "best_of_n", "evolutionary")   # search/strategies.py says what each does


class SearchConfig(_Strict):
    # how parents and ideas are chosen each round (search/strategies.py): branching (several ideas on the fastest
    # diverse seeds, several branches each), sequential (one idea, one kernel a round, on the best so far),
    # best_of_n (independent kernels from the starting point, never revised), evolutionary (parents sampled from
    # the correct kernels by speed and novelty)
    strategy: Literal["branching", "sequential", "best_of_n", "evolutionary"] = "branching"
    rounds: int = Field(default=3, ge=1)
    ideas_per_round: int = Field(default=4, ge=1)
    branches_per_idea: int = Field(default=2, ge=1)
    seeds_per_round: int = Field(default=2, ge=1)
    # round 0 of a problem with no starter: how many first kernels the coder writes from the reference (and again
    # each round until one is correct); default: branches_per_idea
    first_kernels: Optional[int] = Field(default=None, ge=1)
    concurrency: int = Field(default=2, ge=1)   # candidates evaluated at once
    # the timings a finalist gets before its time is trusted: its evaluation and timings - 1 re-timings, full
    # evaluations of the same code (search/controller.py); 1: no re-timing. Re-timings are not new kernels: they do
    # not count against budgets.evaluations, but they stop at the wall-time budget
    timings: int = Field(default=3, ge=1)
    # a finalist whose timings so far (two or more) agree within this fraction of their median is re-timed no more:
    # a further timing would move that median by less than it (search/finalists.py); 0: always `timings`
    timings_agree: float = Field(default=0.01, ge=0)
    seed: int = 0                               # the offline provider's RNG and branch picks
    # the kernels' language (prompts/language_*.md give the coder its contract): triton (@triton.jit), cuda (CUDA
    # C++ built with torch.utils.cpp_extension.load_inline, launched on the current stream) or any (either; a
    # family's round 0 then starts from both starters). A stored kernel's language is what its evaluation found
    language: Literal["triton", "cuda", "any"] = "triton"


class Budgets(_Strict):
    evaluations: Optional[int] = Field(default=None, gt=0)
    tokens: Optional[int] = Field(default=None, gt=0)
    dollars: Optional[float] = Field(default=None, gt=0)
    wall_time_s: Optional[float] = Field(default=None, gt=0)


class Targets(_Strict):
    speedup: Optional[float] = Field(default=None, gt=0)
    roofline_fraction: Optional[float] = Field(default=None, gt=0, le=1)


@dataclass(frozen=True)
class SearchSetup:
    """What one controller is given to run a search (the evaluation settings travel with the pool; of them, only
    `allow_torch` is the search's too: the prompts name it)."""

    problem: str                    # a built-in family (softmax) or a KernelBench .py file
    starter: Optional[Path]         # a ModelNew file to start from; None: the family's own (or none, below)
    search: SearchConfig
    budgets: Budgets
    targets: Targets
    ideas: LLMConfig                # the idea writer's effective settings (llm: with ideas: on top)
    code: LLMConfig                 # the coder's
    prices: Mapping[str, Price]     # model name -> $ per million tokens in and out
    first_from_reference: bool = False   # no starter: round 0's kernels are written by the coder from the reference
    allow_torch: tuple[str, ...] = ()    # evaluation.allow_torch: the torch operations a candidate may call

    @property
    def first_kernels(self) -> int:
        return self.search.first_kernels or self.search.branches_per_idea
