"""The runner's compile-only mode (its `warm` op): Triton kernels are not launched, an autotuned one stops it, and
launches are counted again once it is off. Under the interpreter here; on a GPU the kernels are compiled."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernelsearch.judge.anticheat import LaunchCounter


@triton.jit
def _fill(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full([BLOCK], 1.0, tl.float32), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def _fill_tuned(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.full([BLOCK], 1.0, tl.float32), mask=offs < n)


@pytest.fixture
def counter():
    c = LaunchCounter()
    c.install()
    return c


def test_compile_only_launches_nothing_and_counts_nothing(counter):
    out = torch.zeros(40)
    counter.compile_only = True
    _fill[(3,)](out, 40, BLOCK=16)
    assert out.sum().item() == 0.0
    assert counter.launches(__name__) == 0
    counter.compile_only = False
    _fill[(3,)](out, 40, BLOCK=16)
    assert out.sum().item() == 40.0
    assert counter.launches(__name__) == 1


def test_an_autotuned_kernel_stops_the_warm_up(counter):
    out = torch.zeros(40)
    counter.compile_only = True
    with pytest.raises(LaunchCounter.Autotuned):
        _fill_tuned[lambda m: (triton.cdiv(40, m["BLOCK"]),)](out, 40)
    assert out.sum().item() == 0.0
    counter.compile_only = False   # off again: the autotuner runs as it would
    try:
        _fill_tuned[lambda m: (triton.cdiv(40, m["BLOCK"]),)](out, 40)
    except LaunchCounter.Autotuned:
        pytest.fail("the autotuner still refuses with compile-only mode off")
    except RuntimeError as err:   # the interpreter without a GPU cannot time the configs
        assert "driver" in str(err)


def test_the_judges_own_device_work_for_the_warm_up_is_under_a_shared_lease(tmp_path):
    """Judge._warm (GPU only in an evaluation; called here directly on the CPU): the models and inputs it hands the
    candidate (weights moved, inputs drawn and written: the judge's GPU work) under a shared lease, and the warm-up
    itself (the candidate's compiles, seconds) under none."""
    import contextlib

    from kernelsearch.families import load_problem
    from kernelsearch.families.softmax import STARTER
    from kernelsearch.judge import client
    from kernelsearch.judge.harness import Judge
    from kernelsearch.judge.settings import EvalSettings

    held: list[str] = []
    log: list[tuple[str, tuple]] = []

    @contextlib.contextmanager
    def lease(kind):
        held.append(kind)
        try:
            yield
        finally:
            held.pop()

    def spawn(role):
        r = client.spawn_local(role)
        ask = r.request
        r.request = lambda header, buffers=None: (log.append((header.get("op"), tuple(held))), ask(header, buffers))[1]
        return r

    problem = load_problem("softmax")
    path = tmp_path / "candidate.py"
    path.write_text(STARTER)
    judge = Judge(problem, STARTER, EvalSettings(), mode="cpu", seed=1, spawn=spawn, lease=lease,
                  candidate_path=str(path))
    try:
        judge.compile()
        log.clear()
        judge._warm(problem.cases_for("cpu")[:2])
    finally:
        judge.close()
    ops = {op: leases for op, leases in log}
    assert ops["build"] == ("shared",) and ops["inputs"] == ("shared",), log
    assert ops["warm"] == (), log
