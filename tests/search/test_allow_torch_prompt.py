"""The contract the LLM is given says what the config allows in torch (evaluation.allow_torch, which travels in the
search setup, `Config.search_setup()`): the controller hands the allowance to both roles, and their system prompt
names it; without one the contract is the strict default."""
from __future__ import annotations

from kernelsearch.search.controller import Controller
from tests.search.fakes import FakePool, config, new_run


def test_the_system_prompt_names_the_allowed_torch_operations(tmp_path):
    cfg = config(tmp_path, evaluation={"allow_torch": ["linear", "matmul"]})
    setup = cfg.search_setup()
    assert setup.allow_torch == ("matmul", "linear")   # as the evaluation settings order them
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    ctl = Controller(setup, engine, rid, FakePool())   # the pool's own settings play no part in the prompt
    for role in (ctl.coder, ctl.idea_writer):
        text = role._system().content
        assert "(evaluation.allow_torch): matmul, linear. Only these" in text
        assert "must still launch a kernel of its own" in text
    strict = Controller(config(tmp_path).search_setup(), engine, rid, FakePool()).coder._system().content
    assert "allow_torch" not in strict and "$allowance" not in strict
    assert "Allocating outputs with `torch.empty` and reshaping views is fine.\n- What is measured" in strict
    engine.dispose()
