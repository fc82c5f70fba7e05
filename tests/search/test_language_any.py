"""search.language: any seeds round 0 with a family's Triton and CUDA C++ starters, and the offline provider searches
each seed in its own language's space; search.language: cuda writes only CUDA C++ (the controller and a real store,
the fake pool's deterministic evaluation: no worker, no compile)."""
from __future__ import annotations

from sqlmodel import select

from kernelsearch.families import softmax
from kernelsearch.store import Kernel, session_scope
from tests.search.fakes import FakePool, config, drive, new_run


def _kernels(engine, rid) -> list[Kernel]:
    with session_scope(engine) as s:
        return list(s.exec(select(Kernel).where(Kernel.run_id == rid).order_by(Kernel.id)).all())


def test_any_starts_from_both_starters_and_searches_both_languages(tmp_path):
    cfg = config(tmp_path, search={"language": "any", "rounds": 2}, budgets={"evaluations": 10})
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    drive(cfg, engine, rid, FakePool())
    ks = _kernels(engine, rid)
    round0 = [k for k in ks if k.round == 0]
    assert [k.code for k in round0] == [softmax.STARTER, softmax.CUDA_STARTER]
    assert [k.language for k in round0] == ["triton", "cuda"]
    later = [k for k in ks if k.round > 0]
    assert later and {k.language for k in later} <= {"triton", "cuda"}
    for k in later:   # a child is written in its parent's language
        parent = next(p for p in ks if p.id == k.parent_kernel_id)
        assert k.language == parent.language
    engine.dispose()


def test_cuda_writes_only_cuda(tmp_path):
    cfg = config(tmp_path, search={"language": "cuda", "rounds": 2}, budgets={"evaluations": 6})
    engine, rid = new_run(tmp_path / "ks.db", "r", cfg)
    drive(cfg, engine, rid, FakePool())
    ks = _kernels(engine, rid)
    assert ks[0].code == softmax.CUDA_STARTER and len(ks) > 1
    assert {k.language for k in ks} == {"cuda"}
    engine.dispose()
