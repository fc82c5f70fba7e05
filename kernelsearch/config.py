"""One typed config tree (pydantic, unknown keys rejected), loaded from YAML.

The settings types live in the rooms that use them (agent/settings.py: `llm`, `ideas`, `code`, `prices`;
search/settings.py: `search`, `budgets`, `targets`; evaluators/settings.py: `evaluation`); `Config` composes them with the run's own keys.

A bad key, a wrong type or a missing file is a `ConfigError` whose message is one line naming the key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from kernelsearch.agent.settings import LLMConfig, Price, RoleOverride, effective
from kernelsearch.evaluators.settings import EvalSettings
from kernelsearch.search.settings import Budgets, SearchConfig, SearchSetup, Targets
from kernelsearch.store import DEFAULT_DB


class ConfigError(Exception):
    """The config cannot be used; the message names the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Config(_Strict):
    problem: str                                    # a built-in family (softmax) or a KernelBench .py file
    starter: Optional[Path] = None                  # a ModelNew file to start from (a family has its own)
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
    evaluation: EvalSettings = EvalSettings()

    @field_validator("problem")
    @classmethod
    def _problem_exists(cls, v: str) -> str:
        from kernelsearch.evaluators.problem import family_names

        if v.endswith(".py") or "/" in v:
            if not Path(v).is_file():
                raise ValueError(f"problem file not found: {v}")
        elif v not in family_names():
            raise ValueError(f"unknown problem {v!r}; built-in families: {', '.join(family_names())}")
        return v

    @model_validator(mode="after")
    def _starter_known(self) -> "Config":
        is_file = self.problem.endswith(".py") or "/" in self.problem
        if self.starter is not None and not self.starter.is_file():
            raise ValueError(f"starter: file not found: {self.starter}")
        if is_file and self.starter is None:
            raise ValueError(f"starter: problem {self.problem} is a KernelBench file, which has no starter kernel: "
                             "give `starter:` (a file defining ModelNew) to seed round 0")
        if is_file and "offline" in (self.role("ideas").provider, self.role("code").provider):
            raise ValueError("llm.provider: the offline provider searches a built-in family's space; a KernelBench "
                             "file needs an LLM provider (openai, anthropic, openai-compatible) or replay")
        return self

    @model_validator(mode="after")
    def _roles_complete(self) -> "Config":
        for role in ("ideas", "code"):
            r = self.role(role)
            if r.provider in ("openai", "anthropic", "openai-compatible") and not (r.model or r.models):
                raise ValueError(f"{role}: provider {r.provider!r} needs llm.model (or {role}.model)")
            if r.provider == "openai-compatible" and not r.base_url:
                raise ValueError(f"{role}: provider 'openai-compatible' needs llm.base_url")
            if r.provider == "replay" and not r.replay_file:
                raise ValueError(f"{role}: provider 'replay' needs llm.replay_file")
        return self

    def role(self, role: str) -> LLMConfig:
        """The effective LLM settings of a role: `llm` with the role's overrides on top."""
        return effective(self.llm, getattr(self, role))

    def search_setup(self) -> SearchSetup:
        """What the controller is given: the problem, the search's settings, each role's settings, the prices."""
        return SearchSetup(problem=self.problem, starter=self.starter, search=self.search, budgets=self.budgets,
                           targets=self.targets, ideas=self.role("ideas"), code=self.role("code"),
                           prices=self.prices)


def _format_error(err: ValidationError, source: str) -> str:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        msg = "unknown key"
    elif e["type"] == "missing":
        msg = "missing required key"
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{source}: {loc}: {msg}{more}"


def parse_config(data: dict, source: str = "config", base_dir: Path | None = None) -> Config:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not {type(data).__name__}")
    data = dict(data)
    if base_dir is not None:   # relative paths in a config file are relative to the file when not to the cwd
        for key in ("problem", "starter"):
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
