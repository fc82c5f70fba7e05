"""The network providers, through the real openai and anthropic SDKs, over real HTTP to a loopback server.

Each test scripts what the server answers and asserts what it saw (requests, headers, bodies), what the
provider returned (text, tokens, finish reason, attempts) and what a call costs.
"""
from __future__ import annotations

import asyncio
import logging
import random
import re
import time

import pytest

from kernelsearch.agent.base import ChatRequest, Message
from kernelsearch.agent.cost import call_cost, metered_call
from kernelsearch.agent.errors import AuthError, BadRequestError, ProviderError, ReplyError
from kernelsearch.agent.network import (
    AnthropicProvider,
    OpenAIProvider,
    make_network_provider,
    parse_retry_after,
)
from kernelsearch.agent.parsing import extract_code, parse_ideas
from kernelsearch.agent.retry import Limiter
from kernelsearch.agent.settings import LLMConfig, Price, WeightedModel
from tests.agent.loopback import Drop, Fail, LoopbackLLM, Reply

APIS = ["openai", "openai-compatible", "anthropic"]
KEY = "sk-test-0123456789abcdefSECRET"
ENV = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
PRICES = {"model-a": Price(input=3.0, output=15.0), "model-b": Price(input=0.5, output=1.5)}


@pytest.fixture
def llm():
    server = LoopbackLLM().start()
    yield server
    server.stop()


def make(llm: LoopbackLLM, api: str, **over) -> OpenAIProvider | AnthropicProvider:
    base = llm.anthropic_base_url if api == "anthropic" else llm.openai_base_url
    fields = dict(provider=api, model="model-a", base_url=base, timeout_s=5.0, max_retries=3, retry_cap_s=0.05)
    if api == "openai-compatible":
        fields["api_key_env"] = "OPENAI_API_KEY"
    fields.update(over)
    return make_network_provider(LLMConfig(**fields), env=ENV)


def request(text: str = "Write a kernel.", role: str = "code", max_tokens: int = 512) -> ChatRequest:
    return ChatRequest(messages=[Message("system", "You write Triton kernels."), Message("user", text)],
                       role=role, max_tokens=max_tokens, temperature=0.2)


def call(provider, req: ChatRequest | None = None):
    async def go():
        try:
            return await provider.complete(req or request())
        finally:
            await provider.aclose()

    return asyncio.run(go())


# ------------------------------------------------------------------------------------------- replies


@pytest.mark.parametrize("api", APIS)
def test_normal_reply_tokens_cost_and_wire_format(llm, api):
    llm.script(Reply("Here:\n```python\nclass ModelNew: pass\n```\n", tokens_in=1200, tokens_out=345))
    p = make(llm, api)
    assert p.name == api
    reply = call(p)
    assert reply.text.startswith("Here:")
    assert extract_code(reply.text) == "class ModelNew: pass\n"
    assert (reply.model, reply.tokens_in, reply.tokens_out) == ("model-a", 1200, 345)
    assert (reply.finish_reason, reply.attempts) == ("stop", 1)
    assert call_cost(PRICES, reply.model, reply.tokens_in, reply.tokens_out) == pytest.approx(
        (1200 * 3.0 + 345 * 15.0) / 1e6)

    assert llm.count() == 1
    seen = llm.requests[0]
    assert seen.body["model"] == "model-a"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    if api == "anthropic":
        assert seen.path == "/v1/messages"
        assert seen.body["system"] == "You write Triton kernels."
        assert seen.body["messages"] == [{"role": "user", "content": "Write a kernel."}]
        assert seen.body["max_tokens"] == 512
        assert "temperature" not in seen.body          # the API version of SDK 2.x rejects it
    else:
        assert seen.path == "/v1/chat/completions"
        assert [m["role"] for m in seen.body["messages"]] == ["system", "user"]
        assert seen.body["temperature"] == 0.2
        tokens_key = "max_completion_tokens" if api == "openai" else "max_tokens"
        assert seen.body[tokens_key] == 512


def test_anthropic_joins_turns_of_one_role(llm):
    llm.script(Reply("ok"))
    req = ChatRequest(messages=[Message("system", "a"), Message("system", "b"), Message("user", "u1"),
                                Message("user", "u2"), Message("assistant", "x"), Message("user", "u3")],
                      role="ideas")
    call(make(llm, "anthropic"), req)
    body = llm.requests[0].body
    assert body["system"] == "a\n\nb"
    assert body["messages"] == [{"role": "user", "content": "u1\n\nu2"}, {"role": "assistant", "content": "x"},
                                {"role": "user", "content": "u3"}]


@pytest.mark.parametrize("api", APIS)
def test_truncated_reply_is_length_and_parsing_says_truncated(llm, api):
    llm.script(Reply("```python\nimport triton\n@triton.jit\ndef _k(x_ptr,", finish="length", tokens_out=512))
    reply = call(make(llm, api))
    assert reply.finish_reason == "length"
    assert reply.tokens_out == 512
    with pytest.raises(ReplyError) as err:
        extract_code(reply.text, finish_reason=reply.finish_reason)
    assert err.value.kind == "truncated"


@pytest.mark.parametrize("api", APIS)
def test_refusal_is_mapped(llm, api):
    llm.script(Reply("I can't help with that request.", finish="refusal"))
    reply = call(make(llm, api))
    assert reply.finish_reason == "refusal"
    assert reply.text == "I can't help with that request."
    with pytest.raises(ReplyError) as err:
        parse_ideas(reply.text, finish_reason=reply.finish_reason)
    assert err.value.kind == "refused"


@pytest.mark.parametrize("api", ["openai-compatible", "anthropic"])
def test_malformed_ideas_reply(llm, api):
    llm.script(Reply("Sure! 1. Tile the rows. 2. Use more warps.", tokens_in=50, tokens_out=12))
    reply = call(make(llm, api), request('Reply with {"ideas": [...]}: 4 ideas', role="ideas"))
    assert (reply.finish_reason, reply.attempts, reply.tokens_out) == ("stop", 1, 12)
    with pytest.raises(ReplyError) as err:
        parse_ideas(reply.text, finish_reason=reply.finish_reason, min_ideas=4)
    assert err.value.kind == "malformed"


# ------------------------------------------------------------------------------------------- retries


@pytest.mark.parametrize("api", APIS)
def test_429_waits_retry_after_then_succeeds(llm, api):
    # 0.3 s, well apart from the backoff the retry layer would choose itself here (1 s + up to 1 s jitter)
    llm.script(Fail(429, "slow down", retry_after=0.3), Reply("done", tokens_in=10, tokens_out=2))
    reply = call(make(llm, api, retry_cap_s=5.0))
    assert (reply.text, reply.attempts, reply.tokens_in) == ("done", 2, 10)
    assert llm.count() == 2
    gap = llm.requests[1].at - llm.requests[0].at
    assert 0.28 <= gap < 0.8, gap


def test_429_retry_after_in_whole_seconds(llm):
    llm.script(Fail(429, retry_after=1), Reply("done"))
    reply = call(make(llm, "anthropic", retry_cap_s=5.0))
    assert reply.attempts == 2
    gap = llm.requests[1].at - llm.requests[0].at
    assert 0.95 <= gap < 1.5, gap


def test_backoff_without_retry_after_is_capped(llm, caplog):
    llm.script(Fail(503), Fail(503), Reply("done"))
    with caplog.at_level(logging.WARNING, logger="kernelsearch.agent.retry"):
        reply = call(make(llm, "openai-compatible", retry_cap_s=0.4))  # base 0.4 s: 0.4-0.8, then 0.8-1.6; cap 0.4
    assert reply.attempts == 3
    # The waits chosen (logged before each sleep) are the cap itself; uncapped, the second is at least 0.8 s.
    waits = [float(m) for m in re.findall(r"retrying in ([0-9.]+) s", caplog.text)]
    assert waits == [0.4, 0.4], caplog.text
    # ...and were slept: the server saw each retry no sooner than the wait (an upper bound here would be a
    # timing race on a loaded 2-core machine; the cap is asserted above, from the chosen waits).
    at = [r.at for r in llm.requests]
    assert 0.38 <= at[1] - at[0] < 5 and 0.38 <= at[2] - at[1] < 5


def test_retry_after_is_capped(llm):
    llm.script(Fail(429, retry_after=30), Reply("done"))
    t0 = time.monotonic()
    reply = call(make(llm, "openai-compatible", retry_cap_s=0.2))
    assert reply.attempts == 2
    assert time.monotonic() - t0 < 2.0
    gap = llm.requests[1].at - llm.requests[0].at
    assert 0.15 <= gap < 1.0, gap


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("status", [500, 503, 529])
def test_5xx_then_success(llm, api, status):
    llm.script(Fail(status, "upstream trouble"), Reply("fine", tokens_in=7, tokens_out=3))
    reply = call(make(llm, api))
    assert (reply.text, reply.attempts, reply.tokens_in, reply.tokens_out) == ("fine", 2, 7, 3)
    assert llm.count() == 2


@pytest.mark.parametrize("api", APIS)
def test_timeout_then_success(llm, api):
    llm.script(Reply("too late", delay_s=1.5), Reply("in time"))
    t0 = time.monotonic()
    reply = call(make(llm, api, timeout_s=0.4))
    elapsed = time.monotonic() - t0
    assert (reply.text, reply.attempts) == ("in time", 2)
    assert llm.count() == 2
    assert 0.35 <= elapsed < 1.4, elapsed  # gave up on the first at ~0.4 s, did not wait out the 1.5 s


@pytest.mark.parametrize("api", APIS)
def test_dropped_connection_then_success(llm, api):
    llm.script(Drop(), Reply("back"))
    reply = call(make(llm, api))
    assert (reply.text, reply.attempts) == ("back", 2)
    assert llm.count() == 2


@pytest.mark.parametrize("api", APIS)
def test_gives_up_after_max_retries(llm, api):
    llm.script(*[Fail(503, "down")] * 5)
    with pytest.raises(ProviderError) as err:
        call(make(llm, api, max_retries=2))
    e = err.value
    assert type(e) is ProviderError
    assert (e.status, e.attempts) == (503, 3)
    assert "gave up after 3 attempts" in str(e) and "HTTP 503" in str(e)
    assert e.model == "model-a"
    assert llm.count() == 3 and llm.pending() == 2


@pytest.mark.parametrize("api", APIS)
def test_401_is_auth_error_without_retry(llm, api):
    llm.script(Fail(401, "invalid x-api-key"), Reply("never sent"))
    with pytest.raises(AuthError) as err:
        call(make(llm, api))
    e = err.value
    assert (e.status, e.attempts) == (401, 1)
    var = "ANTHROPIC_API_KEY" if api == "anthropic" else "OPENAI_API_KEY"
    assert "HTTP 401" in str(e) and f"${var}" in str(e)
    assert llm.count() == 1 and llm.pending() == 1


@pytest.mark.parametrize("status,exc", [(403, AuthError), (400, BadRequestError), (404, BadRequestError),
                                        (422, BadRequestError)])
def test_other_4xx_are_not_retried(llm, status, exc):
    llm.script(Fail(status, "model 'model-a' does not exist"), Reply("never sent"))
    with pytest.raises(exc) as err:
        call(make(llm, "openai-compatible"))
    assert (err.value.status, err.value.attempts) == (status, 1)
    assert "does not exist" in str(err.value)
    assert llm.count() == 1


# ------------------------------------------------------------------------------------------- keys


def test_missing_key_names_the_variable_and_sends_nothing(llm):
    for api, var in [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]:
        with pytest.raises(AuthError) as err:
            make_network_provider(LLMConfig(provider=api, model="m", base_url=llm.url), env={})
        assert var in str(err.value)
    with pytest.raises(AuthError) as err:
        make_network_provider(LLMConfig(provider="openai", model="m", api_key_env="MY_KEY"),
                              env={"MY_KEY": "  "})
    assert "MY_KEY" in str(err.value)
    assert llm.count() == 0


def test_key_from_os_environ_by_configured_name(llm, monkeypatch):
    monkeypatch.setenv("KS_TEST_KEY", "sk-from-environ-0001")
    llm.script(Reply("ok"))
    p = make_network_provider(LLMConfig(provider="openai", model="m", base_url=llm.openai_base_url,
                                        api_key_env="KS_TEST_KEY"))
    call(p)
    assert llm.requests[0].headers["authorization"] == "Bearer sk-from-environ-0001"


def test_openai_compatible_without_key_never_sends_openai_key(llm):
    llm.script(Reply("ok"))
    p = make_network_provider(LLMConfig(provider="openai-compatible", model="m", base_url=llm.openai_base_url),
                              env=ENV)
    call(p)
    assert llm.requests[0].headers["authorization"] == "Bearer not-needed"


@pytest.mark.parametrize("api", APIS)
def test_key_never_in_error_repr_or_logs(api, caplog):
    with LoopbackLLM(require_key="the-right-key") as server:  # its 401 echoes the key it got, in full
        p = make(server, api, max_retries=2)
        caplog.set_level(logging.DEBUG)
        with pytest.raises(AuthError) as err:
            call(p)
        assert server.count() == 1
        assert KEY in server.requests[0].headers["authorization"]   # the key did go out, to the server
    text = str(err.value) + repr(err.value) + repr(p) + str(vars(p)) + caplog.text
    assert KEY not in text and KEY[3:] not in text and "0123456789abcdef" not in text
    assert "Incorrect API key provided: ***" in str(err.value)


# ------------------------------------------------------------------------------------------- models, limits


def test_weighted_models_pick_per_call(llm):
    cfg = LLMConfig(provider="openai-compatible", models=[WeightedModel(model="model-a", weight=3),
                                                          WeightedModel(model="model-b", weight=1)],
                    base_url=llm.openai_base_url, retry_cap_s=0.05)
    p = make_network_provider(cfg, rng=random.Random(7))

    async def go():
        try:
            return await asyncio.gather(*[p.complete(request()) for _ in range(40)])
        finally:
            await p.aclose()

    replies = asyncio.run(go())
    used = [r.model for r in replies]
    assert sorted(used) == sorted(s.body["model"] for s in llm.requests)
    assert 20 <= used.count("model-a") <= 38 and used.count("model-b") >= 2


def test_weighted_pick_is_reproducible():
    cfg = LLMConfig(provider="openai-compatible", base_url="http://127.0.0.1:9/v1",
                    models=[WeightedModel(model="a", weight=1), WeightedModel(model="b", weight=1)])
    p1 = make_network_provider(cfg, rng=random.Random(3))
    p2 = make_network_provider(cfg, rng=random.Random(3))
    picks = [p1.pick_model() for _ in range(30)]
    assert picks == [p2.pick_model() for _ in range(30)]
    assert set(picks) == {"a", "b"}


def test_in_flight_cap(llm):
    llm.script(*[Reply(f"r{i}", delay_s=0.8) for i in range(4)])   # long, so a loaded machine's lag stays small
    p = make(llm, "openai-compatible", max_in_flight=2)

    async def go():
        try:
            return await asyncio.gather(*[p.complete(request()) for _ in range(4)])
        finally:
            await p.aclose()

    t0 = time.monotonic()
    replies = asyncio.run(go())
    assert len(replies) == 4 and all(r.attempts == 1 for r in replies)
    assert time.monotonic() - t0 >= 1.55
    at = sorted(s.at for s in llm.requests)
    assert at[1] - at[0] < 0.5          # two went out together (one after the other: >= 0.8)
    assert at[2] - at[0] >= 0.75        # the third waited for a slot


def test_rate_limit_spaces_requests():
    async def go():
        lim = Limiter(requests_per_minute=240, max_in_flight=8, window_s=0.5)  # 2 per 0.5 s
        assert (lim.throttler.rate_limit, lim.throttler.period) == (2, pytest.approx(0.5))
        t0 = time.monotonic()
        for _ in range(6):
            await lim.before_request()
        return time.monotonic() - t0

    assert 0.95 <= asyncio.run(go()) < 2.0


def test_fractional_rates_stay_exact():
    assert Limiter(0.5, 1).throttler.rate_limit == 1
    assert Limiter(0.5, 1).throttler.period == pytest.approx(120.0)
    t = Limiter(90.5, 1).throttler
    assert t.rate_limit == 90 and t.rate_limit / t.period * 60 == pytest.approx(90.5)
    assert Limiter(None, 1).throttler is None


def test_provider_survives_a_second_event_loop(llm):
    llm.script(Reply("one"), Reply("two"))
    p = make(llm, "anthropic")
    assert asyncio.run(p.complete(request())).text == "one"
    assert asyncio.run(p.complete(request())).text == "two"


def test_parse_retry_after_forms():
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= parse_retry_after({"retry-after": future}) <= 31


# ------------------------------------------------------------------------------------------- metering


def test_metered_calls_become_rows(llm):
    """What the search records per call: tokens, cost, latency and attempts, also for a failed call."""
    from sqlmodel import Session, select

    from kernelsearch.store.database import open_store
    from kernelsearch.store.models import LLMCall

    llm.script(Fail(500), Reply("ok", tokens_in=2000, tokens_out=1000), *[Fail(503)] * 4)
    p = make(llm, "anthropic", max_retries=3)

    async def go():
        try:
            return [await metered_call(p, request(), PRICES) for _ in range(2)]
        finally:
            await p.aclose()

    (reply, ok), (none, bad) = asyncio.run(go())
    assert reply is not None and none is None
    assert (ok.status, ok.attempts, ok.tokens_in, ok.tokens_out) == ("ok", 2, 2000, 1000)
    assert ok.cost_usd == pytest.approx((2000 * 3.0 + 1000 * 15.0) / 1e6)
    assert ok.latency_s > 0 and ok.reply_text == "ok"
    assert (bad.status, bad.attempts, bad.model, bad.tokens_in) == ("error", 4, "model-a", 0)
    assert "HTTP 503" in bad.error

    engine = open_store("sqlite://")
    with Session(engine) as s:
        s.add(LLMCall(**ok.as_row()))
        s.add(LLMCall(**bad.as_row()))
        s.commit()
        rows = s.exec(select(LLMCall).order_by(LLMCall.id)).all()
    assert [(r.status, r.attempts, r.provider, r.role) for r in rows] == [("ok", 2, "anthropic", "code"),
                                                                         ("error", 4, "anthropic", "code")]
    assert rows[0].cost_usd == pytest.approx(0.021)


def test_unpriced_model_has_unknown_cost():
    assert call_cost(PRICES, "model-z", 100, 100) is None
    assert call_cost(PRICES, "model-b", 1_000_000, 2_000_000) == pytest.approx(0.5 + 3.0)
