"""The network providers: OpenAI, Anthropic (native Messages API) and OpenAI-compatible servers.

    provider: openai              AsyncOpenAI, key from $OPENAI_API_KEY (or llm.api_key_env)
    provider: anthropic           AsyncAnthropic, key from $ANTHROPIC_API_KEY (or llm.api_key_env)
    provider: openai-compatible   AsyncOpenAI with llm.base_url (vLLM, SGLang, Ollama, llama.cpp server,
                                  LiteLLM proxy); a key only if llm.api_key_env names one

`make_network_provider(cfg)` builds one from a role's effective `LLMConfig` (`Config.role("ideas")`).

Each vendor client is made with `max_retries=0` and `timeout=cfg.timeout_s`: the one retry layer is
`agent/retry.py` (tenacity), which retries 429, 408/409, 5xx, timeouts and dropped connections and raises
`AuthError` (401/403) or `BadRequestError` (400, 404, 422, ...) at once. `ChatReply.attempts` and
`ProviderError.attempts` count HTTP attempts.

The key is read once from the environment variable the config names and kept in a `_Secret`, whose repr is
masked; error messages are built here from the status and the server's message with the key (and anything
shaped like a key) masked, and are raised `from None` so the SDK's exception (which holds the request and its
headers) is not printed in a traceback. openai-compatible never falls back to $OPENAI_API_KEY: a real OpenAI
key is not sent to a local server unless the config names that variable.

Temperature and max_tokens come from the `ChatRequest` (the caller fills them from the role's config;
Anthropic takes no temperature, see `AnthropicProvider`); the typed `task` is ignored here. When the role lists
weighted `models`, each call picks one (`random.Random`); `ChatReply.model` is the name that was asked for,
the key of the price table, not the server's echo of it.
"""
from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import re
import time
from collections.abc import Mapping
from typing import Any

from kernelsearch.agent.base import ChatReply, ChatRequest, Message, Provider
from kernelsearch.agent.errors import AuthError, BadRequestError, ProviderError
from kernelsearch.agent.retry import Limiter, TransientError, with_retries
from kernelsearch.agent.settings import LLMConfig

log = logging.getLogger(__name__)
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
NO_KEY = "not-needed"  # what openai-compatible sends when the config names no key; servers ignore it
RETRY_STATUSES = frozenset({408, 409, 425, 429})  # and every 5xx
_DETAIL_MAX = 300
# Shapes of API keys and bearer tokens that a server may echo back in an error body.
_KEYISH = re.compile(r"\b(sk-(?:ant-|proj-)?)[\w\-*.]{6,}|(Bearer\s+)\S+", re.IGNORECASE)


class _Secret:
    """An API key that does not show itself in a repr, str or log line."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        if len(self._value) >= 4:
            text = text.replace(self._value, "***")
        return _KEYISH.sub(lambda m: (m.group(1) or m.group(2)) + "***", text)

    def __repr__(self) -> str:
        return "_Secret('***')"

    __str__ = __repr__


def _key_env(cfg: LLMConfig) -> str | None:
    return cfg.api_key_env or DEFAULT_KEY_ENV.get(cfg.provider)


def resolve_api_key(cfg: LLMConfig, env: Mapping[str, str] | None = None) -> _Secret:
    """The key for `cfg` from the environment variable it names; AuthError (naming the variable) if unset."""
    env = os.environ if env is None else env
    name = _key_env(cfg)
    if name is None:  # openai-compatible with no api_key_env: a local server that needs no key
        return _Secret(NO_KEY)
    value = env.get(name, "").strip()
    if not value:
        raise AuthError(f"{cfg.provider}: no API key: the environment variable {name} is unset or empty "
                        f"(llm.api_key_env names the variable to read)", status=None, attempts=0)
    return _Secret(value)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` (seconds or an HTTP date); None if absent."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _server_detail(body: object, fallback: str) -> str:
    """The human part of an error body: error.message (OpenAI, Anthropic) or message, else the SDK text."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
        if isinstance(body.get("message"), str):
            return body["message"]
    return fallback


class _NetworkProvider:
    """What the three providers share: key, model choice, rate limit, retries, error mapping."""

    name: str

    def __init__(self, cfg: LLMConfig, *, rng: random.Random | None = None,
                 env: Mapping[str, str] | None = None):
        if cfg.provider not in ("openai", "anthropic", "openai-compatible"):
            raise ValueError(f"not a network provider: {cfg.provider!r}")
        if not (cfg.model or cfg.models):
            raise ValueError(f"{cfg.provider}: llm.model (or llm.models) is required")
        self.name = cfg.provider
        self.cfg = cfg
        self._key = resolve_api_key(cfg, env)
        self._key_env = _key_env(cfg)
        if cfg.models:
            self._models = [m.model for m in cfg.models]
            self._weights = [m.weight for m in cfg.models]
        else:
            self._models, self._weights = [cfg.model], [1.0]
        self._rng = rng if rng is not None else random.Random()
        self._limiter = Limiter(cfg.requests_per_minute, cfg.max_in_flight)
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        where = f", base_url={self.cfg.base_url!r}" if self.cfg.base_url else ""
        return f"{type(self).__name__}(name={self.name!r}, models={self._models!r}{where})"

    # -- the Protocol

    async def complete(self, request: ChatRequest) -> ChatReply:
        model = self.pick_model()
        async with self._limiter.in_flight():
            try:
                reply, attempts = await with_retries(
                    lambda: self._attempt(model, request),
                    max_retries=self.cfg.max_retries,
                    cap_s=self.cfg.retry_cap_s,
                    base_s=min(1.0, self.cfg.retry_cap_s),
                    what=f"{self.name} {model}",
                    before_attempt=self._limiter.before_request,
                )
            except ProviderError as exc:
                exc.model = model  # which of the role's models failed, for the LLMCall row
                raise
        reply.attempts = attempts
        return reply

    async def aclose(self) -> None:
        """Close the HTTP client (call from the loop that used it)."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    # -- shared pieces

    def pick_model(self) -> str:
        if len(self._models) == 1:
            return self._models[0]
        return self._rng.choices(self._models, weights=self._weights, k=1)[0]

    def _client_for_loop(self) -> Any:
        """The SDK client, made once per event loop: its connection pool belongs to the loop it ran in."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client, self._client_loop = self._make_client(), loop
        return self._client

    def _make_client(self) -> Any:
        raise NotImplementedError

    async def _attempt(self, model: str, request: ChatRequest) -> ChatReply:
        raise NotImplementedError

    def _status_error(self, model: str, status: int, headers: Mapping[str, str] | None, body: object,
                      fallback: str) -> ProviderError:
        detail = self._key.redact(_server_detail(body, fallback))[:_DETAIL_MAX]
        where = f"{self.name} {model}"
        if status in (401, 403):
            hint = f"the API rejected the key from ${self._key_env}" if self._key_env else \
                "the server wants a key: set llm.api_key_env to the name of the variable holding it"
            what = "unauthorized" if status == 401 else "forbidden"
            return AuthError(f"{where}: HTTP {status} {what}: {hint}: {detail}", status=status)
        if status in RETRY_STATUSES or status >= 500:
            return TransientError(f"{where}: HTTP {status}: {detail}", status=status,
                                  retry_after=parse_retry_after(headers))
        return BadRequestError(f"{where}: HTTP {status}: {detail}", status=status)

    def _transport_error(self, model: str, timed_out: bool, exc: BaseException) -> TransientError:
        if timed_out:
            return TransientError(f"{self.name} {model}: no reply within {self.cfg.timeout_s:g} s")
        cause = exc.__cause__ or exc.__context__
        why = f" ({type(cause).__name__})" if cause is not None else ""
        return TransientError(f"{self.name} {model}: connection failed or dropped{why}")


class OpenAIProvider(_NetworkProvider):
    """OpenAI's Chat Completions API, or any server that speaks it (`provider: openai-compatible`)."""

    def _make_client(self) -> Any:
        import openai

        return openai.AsyncOpenAI(
            api_key=self._key.reveal(),
            base_url=self.cfg.base_url or "https://api.openai.com/v1",
            max_retries=0,
            timeout=self.cfg.timeout_s,
        )

    async def _attempt(self, model: str, request: ChatRequest) -> ChatReply:
        import openai

        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
        }
        # OpenAI's own API wants max_completion_tokens (reasoning models reject max_tokens); servers that
        # imitate it (vLLM, Ollama, llama.cpp) all read max_tokens.
        if self.name == "openai":
            kwargs["max_completion_tokens"] = request.max_tokens
        else:
            kwargs["max_tokens"] = request.max_tokens
        client = self._client_for_loop()
        try:
            resp = await client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            raise self._status_error(model, exc.status_code, exc.response.headers, exc.body,
                                     exc.message) from None
        except openai.APIConnectionError as exc:
            raise self._transport_error(model, isinstance(exc, openai.APITimeoutError), exc) from None
        except openai.APIError as exc:
            raise ProviderError(f"{self.name} {model}: unusable response: "
                                f"{self._key.redact(str(exc))[:_DETAIL_MAX]}") from None
        if not getattr(resp, "choices", None):
            raise TransientError(f"{self.name} {model}: the response has no choices")
        choice = resp.choices[0]
        msg = choice.message
        refusal = getattr(msg, "refusal", None)
        text = msg.content or refusal or ""
        finish = choice.finish_reason or "stop"
        if refusal or finish == "content_filter":
            finish = "refusal"
        usage = resp.usage
        return ChatReply(
            text=text,
            model=model,
            tokens_in=(usage.prompt_tokens or 0) if usage else 0,
            tokens_out=(usage.completion_tokens or 0) if usage else 0,
            finish_reason=finish,
        )


_ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}


def _anthropic_turns(messages: list[Message]) -> tuple[str, list[dict[str, str]]]:
    """System text apart (the Messages API takes it as `system`), consecutive same-role turns joined."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system":
            continue
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["content"] += "\n\n" + m.content
        else:
            turns.append({"role": m.role, "content": m.content})
    return system, turns


class AnthropicProvider(_NetworkProvider):
    """Anthropic's native Messages API through the official SDK (not an OpenAI-compatible shim).

    The temperature is not sent: the SDK (2.x) has no sampling parameters, and the API version it speaks
    rejects them. A config that sets one for an anthropic role gets a warning when the provider is made.
    """

    def __init__(self, cfg: LLMConfig, *, rng: random.Random | None = None,
                 env: Mapping[str, str] | None = None):
        super().__init__(cfg, rng=rng, env=env)
        if "temperature" in cfg.model_fields_set:
            log.warning("anthropic: llm.temperature=%g is not sent: the Messages API of the anthropic SDK 2.x "
                        "takes no sampling parameters", cfg.temperature)

    def _make_client(self) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(
            api_key=self._key.reveal(),
            base_url=self.cfg.base_url or "https://api.anthropic.com",
            max_retries=0,
            timeout=self.cfg.timeout_s,
        )

    async def _attempt(self, model: str, request: ChatRequest) -> ChatReply:
        import anthropic

        system, turns = _anthropic_turns(request.messages)
        # No temperature: SDK 2.x speaks API version 2026-10-21, which answers 400 to any sampling parameter.
        kwargs: dict[str, Any] = {"model": model, "messages": turns, "max_tokens": request.max_tokens}
        if system:
            kwargs["system"] = system
        client = self._client_for_loop()
        try:
            resp = await client.messages.create(**kwargs)
        except anthropic.APIStatusError as exc:
            raise self._status_error(model, exc.status_code, exc.response.headers, exc.body,
                                     exc.message) from None
        except anthropic.APIConnectionError as exc:
            raise self._transport_error(model, isinstance(exc, anthropic.APITimeoutError), exc) from None
        except anthropic.APIError as exc:
            raise ProviderError(f"{self.name} {model}: unusable response: "
                                f"{self._key.redact(str(exc))[:_DETAIL_MAX]}") from None
        text = "".join(getattr(b, "text", "") for b in (resp.content or []) if getattr(b, "type", "") == "text")
        usage = resp.usage
        return ChatReply(
            text=text,
            model=model,
            tokens_in=(usage.input_tokens or 0) if usage else 0,
            tokens_out=(usage.output_tokens or 0) if usage else 0,
            finish_reason=_ANTHROPIC_FINISH.get(resp.stop_reason or "end_turn", resp.stop_reason),
        )


def make_network_provider(cfg: LLMConfig, *, rng: random.Random | None = None,
                          env: Mapping[str, str] | None = None) -> Provider:
    """The provider for a role's effective config (`Config.role(...)`); raises AuthError if its key is unset.

    `rng` picks among weighted `models` (pass a seeded one for a reproducible mix); `env` replaces
    os.environ when reading the key (tests).
    """
    if cfg.provider == "anthropic":
        return AnthropicProvider(cfg, rng=rng, env=env)
    if cfg.provider in ("openai", "openai-compatible"):
        return OpenAIProvider(cfg, rng=rng, env=env)
    raise ValueError(f"not a network provider: {cfg.provider!r} (offline and replay are built elsewhere)")
