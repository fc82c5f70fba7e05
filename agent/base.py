"""The provider Protocol: one async call that takes messages and returns text plus usage, and the typed tasks a
request carries.

Every provider (offline, replay, openai, anthropic, openai-compatible) implements `complete`. `ChatRequest.task`
is the structured task a prompt was rendered from: an `IdeaTask` (the idea writer's) or a `CodeTask` (the coder's);
network providers and the replay provider ignore it, the offline provider reads it instead of the prose. Failures
raise from the tree in `agent/errors.py`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class SeedTask:
    """A seed of an idea task: a kernel the ideas are about, and the ideas its lineage has tried."""

    kernel_id: int
    code: str
    tried: tuple[tuple[str, str], ...] = ()   # (title, text) of each idea tried on it or on an ancestor


@dataclass(frozen=True)
class IdeaTask:
    """What the idea writer is asked: `n` ideas about `seeds` in round `round` of a search of `problem`."""

    problem: Mapping[str, Any]        # the problem's reference, as families.load_problem takes it ({"builtin": ...})
    round: int
    n: int
    seeds: tuple[SeedTask, ...]
    seen_codes: tuple[str, ...] = ()  # every kernel the run has written, which an idea need not redo
    language: str = "triton"          # search.language: triton | cuda | any


@dataclass(frozen=True)
class IdeaBrief:
    """One idea as the coder is given it: its stored id, title and text, and the provider's extras (`meta`:
    parameters, the knobs it fixes, `first_kernel` for first kernels written from the reference)."""

    id: int | None
    title: str
    description: str
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CodeTask:
    """What the coder is asked: branch `branch` of `branches` of `idea` on `seed_code` ("" for a first kernel)."""

    problem: Mapping[str, Any]
    idea: IdeaBrief
    branch: int
    branches: int
    seed_code: str = ""
    earlier_codes: tuple[str, ...] = ()   # the kernels of earlier rounds, which a branch need not write again
    language: str = "triton"              # search.language: triton | cuda | any


Task = IdeaTask | CodeTask


@dataclass
class ChatRequest:
    messages: list[Message]
    role: str                        # "ideas" | "code": which role of the search is asking
    max_tokens: int = 4096
    temperature: float = 0.7
    task: Task | None = None         # the IdeaTask ("ideas") or CodeTask ("code") the prompt was rendered from


@dataclass
class ChatReply:
    text: str
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    finish_reason: str = "stop"      # "stop" | "length" (truncated) | "refusal" | ...
    attempts: int = 1                # how many HTTP attempts the retry layer made


@runtime_checkable
class Provider(Protocol):
    name: str

    async def complete(self, request: ChatRequest) -> ChatReply: ...
