"""The contract the LLM is given says what the config allows in torch (evaluation.allow_torch, which travels with
the pool's settings): the controller hands the allowance to both roles, and their system prompt names it; without
one the contract is the strict default."""
from __future__ import annotations

from types import SimpleNamespace

from kernelsearch.judge.settings import EvalSettings
from kernelsearch.search.controller import Controller
from tests.search.fakes import FakePool, config, new_run


def test_the_system_prompt_names_the_allowed_torch_operations(tmp_path):
    cfg = config(tmp_path)
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    pool = FakePool()
    pool.s = SimpleNamespace(mode="cpu", gpus=[], evaluation=EvalSettings(allow_torch=["linear", "matmul"]))
    ctl = Controller(cfg.search_setup(), engine, rid, pool)
    for role in (ctl.coder, ctl.idea_writer):
        text = role._system().content
        assert "(evaluation.allow_torch): matmul, linear. Only these" in text
        assert "must still launch a kernel of its own" in text
    strict = Controller(cfg.search_setup(), engine, rid, FakePool()).coder._system().content
    assert "allow_torch" not in strict and "$allowance" not in strict
    assert "Allocating outputs with `torch.empty` and reshaping views is fine.\n- What is measured" in strict
    engine.dispose()
