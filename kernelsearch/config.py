"""One typed config tree (pydantic, unknown keys rejected), loaded from YAML.

The settings types live in the rooms that use them (agent/settings.py: `llm`, `ideas`, `code`, `prices`;
search/settings.py: `search`, `budgets`, `targets`;
judge/settings.py: `evaluation`, with sandbox/settings.py's `evaluation.backend` and `ray`); `Config` composes them
with the run's own keys.

A bad key, a wrong type or a missing file is a `ConfigError` whose message is one line naming the key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from kernelsearch.agent.settings import LLMConfig, Price, RoleOverride, effective
from kernelsearch.model.settings import PlanSettings, VerifySettings
from kernelsearch.sandbox.settings import EvaluationConfig, RaySettings
from kernelsearch.search.settings import Budgets, SearchConfig, SearchSetup, Targets
from kernelsearch.store import DEFAULT_DB


class ConfigError(Exception):
    """The config cannot be used; the message names the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Config(_Strict):
    problem: Optional[str] = None                   # a built-in family (softmax) or a KernelBench .py file
    # or, in its place, a whole model: a .py file in the problem contract (Model, get_init_inputs, get_inputs),
    # profiled, split into problems, planned by Amdahl's law and searched as child runs (kernelsearch/model/)
    model: Optional[str] = None
    # a ModelNew file to start from; `none`: the coder writes round 0 from the reference (a KernelBench file with
    # no starter does so too); not given: a family's own starter.py
    starter: Optional[Union[Literal["none"], Path]] = None
    name: Optional[str] = None                      # the run's name; default: problem + time
    store: Path = DEFAULT_DB
    device: Literal["auto", "cpu", "cuda"] = "auto"
    llm: LLMConfig = LLMConfig()
    ideas: RoleOverride = RoleOverride()
    code: RoleOverride = RoleOverride()
    prices: dict[str, Price] = {}                   # model name -> $ per million tokens in and out
    search: SearchConfig = SearchConfig()
    budgets: Budgets = Budgets()
    targets: Targets = Targets()
    evaluation: EvaluationConfig = EvaluationConfig()   # the judge's settings and `backend: local | ray`
    ray: RaySettings = RaySettings()                # the cluster, under evaluation.backend: ray (README, Ray)
    plan: PlanSettings = PlanSettings()             # a model run's profile and Amdahl plan
    verify: VerifySettings = VerifySettings()       # a model run's check of the whole model with its kernels

    @model_validator(mode="after")
    def _keys_agree(self) -> "Config":
        """Every check between keys at once: a config with several problems names them all in one line."""
        from kernelsearch.judge.problem import ProblemError, family_names, parse_family_at

        problems: list[str] = []
        if self.problem is None and self.model is None:
            raise ValueError("problem: missing required key (or model: for a whole model)")
        if self.problem is not None and self.model is not None:
            raise ValueError("problem: give one of problem: (one operator) and model: (a whole model), not both")
        if self.model is not None:
            if not Path(self.model).is_file():
                problems.append(f"model: model file not found: {self.model}")
            if self.starter is not None:
                problems.append("starter: a model run starts each problem from its family's starter or its reference")
        try:
            at = parse_family_at(self.problem) if self.problem and not _is_file(self.problem) else None
        except ProblemError as err:
            raise ValueError(f"problem: {err}") from None
        is_file = self.problem is not None and _is_file(self.problem)
        if self.problem is None:
            pass
        elif is_file and not Path(self.problem).is_file():
            problems.append(f"problem: problem file not found: {self.problem}")
        elif not is_file and (at[0] if at else self.problem) not in family_names():
            problems.append(f"problem: unknown problem {self.problem!r}; built-in families: "
                            f"{', '.join(family_names())}")
        if isinstance(self.starter, Path) and not self.starter.is_file():
            problems.append(f"starter: file not found: {self.starter}")
        for role in ("ideas", "code"):
            r = self.role(role)
            if r.provider in ("openai", "anthropic", "openai-compatible") and not (r.model or r.models):
                problems.append(f"{role}: provider {r.provider!r} needs llm.model (or {role}.model)")
            if r.provider == "openai-compatible" and not r.base_url:
                problems.append(f"{role}: provider 'openai-compatible' needs llm.base_url")
            if r.provider == "replay" and not r.replay_file:
                problems.append(f"{role}: provider 'replay' needs llm.replay_file")
        if self.ray != RaySettings() and self.evaluation.backend != "ray":   # a stored config holds the defaults
            problems.append("ray: read only under evaluation.backend: ray (this config's backend is "
                            f"{self.evaluation.backend!r})")
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))
        return self

    @property
    def first_from_reference(self) -> bool:
        """Round 0 is written by the coder from the reference: `starter: none`, or a KernelBench file with no
        `starter:` (a family with no `starter:` starts from its own starter.py)."""
        if self.starter is None and self.search.language == "cuda" and self.problem and not _is_file(self.problem):
            from kernelsearch.judge.problem import FAMILIES_DIR, parse_family_at

            at = parse_family_at(self.problem)   # a family with no CUDA C++ starter: first kernels, in CUDA C++
            return not (FAMILIES_DIR / (at[0] if at else self.problem) / "starter_cuda.py").is_file()
        return self.starter == "none" or (self.starter is None and _is_file(self.problem or ""))

    def role(self, role: str) -> LLMConfig:
        """The effective LLM settings of a role: `llm` with the role's overrides on top."""
        return effective(self.llm, getattr(self, role))

    def search_setup(self) -> SearchSetup:
        """What the controller is given: the problem, the search's settings, each role's settings, the prices, and
        the torch operations a candidate may call (`evaluation.allow_torch`, which the prompts name)."""
        starter = self.starter if isinstance(self.starter, Path) else None
        return SearchSetup(problem=self.problem, starter=starter, first_from_reference=self.first_from_reference,
                           search=self.search, budgets=self.budgets,
                           targets=self.targets, ideas=self.role("ideas"), code=self.role("code"),
                           prices=self.prices, allow_torch=tuple(self.evaluation.allow_torch))


def _is_file(problem: str) -> bool:
    return problem.endswith(".py") or "/" in problem


def _format_error(err: ValidationError, source: str) -> str:
    """Every error pydantic found, in one line: `source: key: what; key: what`."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] == "missing":
            msg = "missing required key"
        parts.append(f"{loc}: {msg}" if loc else msg)   # a check between keys names its keys itself
    return f"{source}: " + "; ".join(parts)


def parse_config(data: dict, source: str = "config", base_dir: Path | None = None) -> Config:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not {type(data).__name__}")
    data = dict(data)
    if base_dir is not None:   # relative paths in a config file are relative to the file when not to the cwd
        for key in ("problem", "starter", "model"):
            p = data.get(key)
            if isinstance(p, str) and (p.endswith(".py") or "/" in p) and not Path(p).is_absolute() \
                    and not Path(p).exists():
                data[key] = str(base_dir / p)
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source)) from None


def load_config(path: str | Path) -> Config:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {str(err).splitlines()[0]}") from None
    return parse_config(data or {}, source=str(p), base_dir=p.parent)
