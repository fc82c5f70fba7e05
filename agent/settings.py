"""The agent's settings: which provider and model a role calls, how, and what its tokens cost.

These are the `llm:`, `ideas:`, `code:` and `prices:` keys of the config file (kernelsearch/config.py composes
them into the one config tree and loads YAML). Unknown keys are rejected here, so a typo is an error that names
the key. `effective(llm, override)` is a role's settings: `llm` with the role's overrides on top.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

ProviderName = Literal["offline", "replay", "openai", "anthropic", "openai-compatible"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Price(_Strict):
    """Dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class WeightedModel(_Strict):
    model: str
    weight: float = Field(default=1.0, gt=0)


class LLMConfig(_Strict):
    """The provider settings shared by both roles; `ideas:` and `code:` override any of them per role."""

    provider: ProviderName = "offline"
    model: Optional[str] = None                 # required for network providers
    models: Optional[list[WeightedModel]] = None  # several models, picked per call by weight
    base_url: Optional[str] = None              # openai-compatible servers (vLLM, SGLang, Ollama, ...)
    api_key_env: Optional[str] = None           # the NAME of the environment variable holding the key
    temperature: float = Field(default=0.7, ge=0, le=2)
    max_tokens: int = Field(default=8192, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=5, ge=0)
    retry_cap_s: float = Field(default=60.0, gt=0)
    requests_per_minute: Optional[float] = Field(default=None, gt=0)
    max_in_flight: int = Field(default=8, gt=0)
    replay_file: Optional[Path] = None          # provider: replay


class RoleOverride(_Strict):
    provider: Optional[ProviderName] = None
    model: Optional[str] = None
    models: Optional[list[WeightedModel]] = None
    base_url: Optional[str] = None
    api_key_env: Optional[str] = None
    temperature: Optional[float] = Field(default=None, ge=0, le=2)
    max_tokens: Optional[int] = Field(default=None, gt=0)
    timeout_s: Optional[float] = Field(default=None, gt=0)
    max_retries: Optional[int] = Field(default=None, ge=0)
    requests_per_minute: Optional[float] = Field(default=None, gt=0)
    max_in_flight: Optional[int] = Field(default=None, gt=0)
    replay_file: Optional[Path] = None


def effective(llm: LLMConfig, override: RoleOverride) -> LLMConfig:
    """A role's settings: `llm` with the fields the role's override sets on top."""
    return llm.model_copy(update=override.model_dump(exclude_none=True))
