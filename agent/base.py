"""The provider Protocol: one async call that takes messages and returns text plus usage.

Every provider (offline, replay, openai, anthropic, openai-compatible) implements `complete`. `hints` carries
the structured task a prompt was rendered from (role, problem, seeds, idea); network providers ignore it, the
offline provider reads it instead of the prose. Failures raise from the tree in `agent/errors.py`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass
class ChatRequest:
    messages: list[Message]
    role: str                        # "ideas" | "code": which role of the search is asking
    max_tokens: int = 4096
    temperature: float = 0.7
    hints: dict[str, Any] = field(default_factory=dict)


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
