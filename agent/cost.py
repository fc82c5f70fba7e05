"""The dollar cost of one LLM call, from the config's price table.

`prices` maps a model name to `Price(input, output)` in dollars per million tokens. The model name is matched
exactly (the name the provider was asked for, which is what `ChatReply.model` carries): a prefix match would
price `gpt-4o-mini` as `gpt-4o`, 16 times too high. A model with no price has an unknown cost, `None`, not
0.0; `unpriced_models` lists them so the CLI can warn before a run whose dollar budget could not count them.

`metered_call` wraps one `Provider.complete` with what an LLMCall row needs: tokens, cost, latency, attempts,
and the error of a call that failed for good.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from kernelsearch.agent.base import ChatReply, ChatRequest, Provider
from kernelsearch.agent.errors import ProviderError
from kernelsearch.agent.settings import LLMConfig, Price

_PER = 1_000_000


def call_cost(prices: Mapping[str, Price], model: str, tokens_in: int, tokens_out: int) -> float | None:
    """Dollars for one call, or None when `model` has no entry in `prices`."""
    price = prices.get(model)
    if price is None:
        return None
    return (tokens_in * price.input + tokens_out * price.output) / _PER


def role_models(cfg: LLMConfig) -> list[str]:
    """Every model a role may call: the weighted `models` list if set, else `model`."""
    if cfg.models:
        return [m.model for m in cfg.models]
    return [cfg.model] if cfg.model else []


def unpriced_models(prices: Mapping[str, Price], roles: Iterable[LLMConfig]) -> list[str]:
    """The models of network roles that `prices` has no entry for, each once, in order of first use."""
    missing: list[str] = []
    for cfg in roles:
        if cfg.provider not in ("openai", "anthropic", "openai-compatible"):
            continue
        for m in role_models(cfg):
            if m not in prices and m not in missing:
                missing.append(m)
    return missing


@dataclass
class CallRecord:
    """What one provider call cost, for an LLMCall row (`as_row()`); `status` is "ok" or "error" here, and
    the caller sets it to a ReplyError's kind when the reply then fails to parse."""

    role: str
    provider: str
    model: str
    status: str = "ok"
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = 0.0        # None: the model has no price in the table
    latency_s: float = 0.0
    attempts: int = 1
    error: str | None = None
    reply_text: str | None = None

    def as_row(self) -> dict[str, object]:
        """Keyword arguments for `store.models.LLMCall` (an unpriced call is stored as 0.0 dollars)."""
        row = asdict(self)
        row["cost_usd"] = self.cost_usd or 0.0
        return row


async def metered_call(provider: Provider, request: ChatRequest, prices: Mapping[str, Price],
                       *, model_hint: str = "") -> tuple[ChatReply | None, CallRecord]:
    """Call `provider` once (its retries included) and measure it: (the reply or None, the record).

    A `ProviderError` does not propagate: it becomes a record with status "error", its message (which
    carries no key) and its attempt count, so the search records it and goes on. The network providers tag
    the error with the model they picked; `model_hint` names it for providers that do not.
    """
    t0 = time.monotonic()
    try:
        reply = await provider.complete(request)
    except ProviderError as exc:
        model = getattr(exc, "model", None) or model_hint
        return None, CallRecord(role=request.role, provider=provider.name, model=model, status="error",
                                latency_s=time.monotonic() - t0, attempts=exc.attempts, error=str(exc))
    return reply, CallRecord(
        role=request.role, provider=provider.name, model=reply.model,
        tokens_in=reply.tokens_in, tokens_out=reply.tokens_out,
        cost_usd=call_cost(prices, reply.model, reply.tokens_in, reply.tokens_out),
        latency_s=time.monotonic() - t0, attempts=reply.attempts, reply_text=reply.text,
    )
