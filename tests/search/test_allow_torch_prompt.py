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


def test_the_system_prompt_names_the_device_from_the_runs_measured_ceilings(tmp_path):
    """On a GPU the device is named from the ceilings the run's latest evaluation measured (detail.ceilings), not an
    H200's datasheet; before any, the GPU with no figures; and search.language reaches both roles."""
    from kernelsearch.judge.result import EvalResult
    from kernelsearch.judge.status import Status
    from kernelsearch.store import queries as q
    from kernelsearch.store import session_scope

    cfg = config(tmp_path, search={"language": "cuda"})
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    pool = FakePool()
    pool.mode = "cuda"
    ctl = Controller(cfg.search_setup(), engine, rid, pool)
    assert "measured at the run's first evaluation" in ctl.coder._system().content
    ceil = {"device": "NVIDIA H100 80GB HBM3", "copy_gbps": 3010.0, "bfloat16_tflops": 601.0}
    with session_scope(engine) as s:
        kid = q.add_kernel(s, rid, code="x", code_hash="h", language="cuda")
        res = EvalResult(status=Status.ok, stage="timing", time_ms=1.0, ref_time_ms=1.0, speedup=1.0,
                         timing_kind="judge-wall-clock", device="cuda", detail={"ceilings": ceil})
        q.add_evaluation(s, res.row(kid))
    for role in (ctl.coder, ctl.idea_writer):
        text = role._system().content
        assert "NVIDIA H100 80GB HBM3 (measured on it: 3.01 TB/s copy bandwidth, 601 TFLOP/s dense bf16" in text
        assert "getCurrentCUDAStream" in text   # search.language: cuda
    engine.dispose()
