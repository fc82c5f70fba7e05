"""Cost from the config's price table, and which models a config leaves unpriced."""
from __future__ import annotations

import pytest

from kernelsearch.agent.cost import CallRecord, call_cost, role_models, unpriced_models
from kernelsearch.agent.settings import LLMConfig, Price, WeightedModel
from kernelsearch.config import Config

PRICES = {"claude-x": Price(input=3.0, output=15.0), "gpt-y": Price(input=1.25, output=10.0)}


@pytest.mark.parametrize("model,tin,tout,dollars", [
    ("claude-x", 1_000_000, 0, 3.0),
    ("claude-x", 0, 1_000_000, 15.0),
    ("claude-x", 12_345, 678, (12_345 * 3.0 + 678 * 15.0) / 1e6),
    ("gpt-y", 4_000, 2_000, 0.005 + 0.02),
    ("gpt-y", 0, 0, 0.0),
])
def test_call_cost(model, tin, tout, dollars):
    assert call_cost(PRICES, model, tin, tout) == pytest.approx(dollars)


def test_exact_names_only():
    assert call_cost(PRICES, "claude-x-mini", 1000, 1000) is None
    assert call_cost(PRICES, "claude", 1000, 1000) is None


def test_role_models_and_unpriced():
    weighted = LLMConfig(provider="anthropic", models=[WeightedModel(model="claude-x", weight=2),
                                                       WeightedModel(model="claude-z")])
    assert role_models(weighted) == ["claude-x", "claude-z"]
    single = LLMConfig(provider="openai", model="gpt-q")
    offline = LLMConfig(provider="offline", model="ignored")
    assert unpriced_models(PRICES, [weighted, single, offline, single]) == ["claude-z", "gpt-q"]


def test_unpriced_from_a_whole_config():
    cfg = Config(problem="softmax", llm=LLMConfig(provider="openai-compatible", model="qwen",
                                                  base_url="http://127.0.0.1:8000/v1"),
                 code={"model": "gpt-y", "provider": "openai"}, prices=PRICES)
    assert unpriced_models(cfg.prices, [cfg.role("ideas"), cfg.role("code")]) == ["qwen"]


def test_record_row_keeps_unknown_cost_out_of_a_not_null_column():
    rec = CallRecord(role="ideas", provider="openai", model="m", cost_usd=None, tokens_in=5)
    row = rec.as_row()
    assert row["cost_usd"] == 0.0 and row["tokens_in"] == 5 and row["status"] == "ok"
