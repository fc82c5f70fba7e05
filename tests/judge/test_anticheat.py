"""Anti-cheat (issue 5): each known exploit, as a fixture candidate, comes back rejected or incorrect with a reason
naming the check that caught it, through the real worker; the honest starter passes."""
from __future__ import annotations

import asyncio
import textwrap
import time
from pathlib import Path

import pytest
import torch

from kernelsearch.families import load_family
from kernelsearch.families.softmax import STARTER
from kernelsearch.judge.problem import load_file
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.static import scan_source
from kernelsearch.judge.status import CandidateFailure
from kernelsearch.problem_check import check_problem_variance
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

CHEATS = Path(__file__).resolve().parents[1] / "fixtures" / "cheats"

# fixture -> (status, words the reason must contain)
EXPECT = {
    "torch_softmax": ("rejected", "torch-compute check"),
    "never_launched": ("rejected", "kernel-launch check"),
    "fallback": ("rejected", "fallback check"),
    # its kernel writes a fresh buffer and it returns the first answer: since issue 29 the kernel-launch check sees
    # that the returned output was no argument of this call's kernels (the cache check, "incorrect", stood behind it)
    "cache": ("rejected", "kernel-launch check"),
    "inplace": ("rejected", "modified its inputs in place"),
    # it returns torch.empty_like(x), never written: since issue 29 the kernel-launch check (its output no argument
    # of its kernels nor made from one) stands before the comparison that found it ("incorrect")
    "stale": ("rejected", "kernel-launch check"),
    "thread": ("rejected", "thread check"),
    "patch_on_load": ("rejected", "identity check"),
    # it imports the judge's correctness module to patch it: the import check (issue 29) rejects that first; the
    # identity check still stands behind it (patch_on_load)
    "patch_in_forward": ("rejected", "import check"),
    # its `import gc` is rejected by the static scan since issue 18 (it found nothing before: the candidate runs
    # first, and since the judge in a process that holds no expected output); was ("incorrect", "case ")
    "gc_search": ("rejected", "introspection check"),
    "alias": ("rejected", "aliasing check"),
    "subclass": ("incorrect", "expected a plain torch.Tensor"),
    "fp16": ("incorrect", "precision check"),
    "hardcoded_width": ("incorrect", "wide-odd"),
}
GPU_ONLY = {"side_stream", "frozen_replay"}   # frozen_replay: tests/judge/test_frozen_replay.py


@pytest.fixture(scope="module")
def results() -> dict:
    """Every fixture and the honest starter through the real worker, two at a time."""
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=2, evaluation=EvalSettings(trials=1, timeout_s=120)))
    names = sorted(EXPECT)
    sources = [(CHEATS / f"{n}.py").read_text() for n in names] + [STARTER]

    async def go():
        return await asyncio.gather(*(pool.evaluate(s, {"builtin": "softmax"}) for s in sources))

    t0 = time.monotonic()
    out = asyncio.run(go())
    print(f"anti-cheat fixtures: {len(sources)} evaluations in {time.monotonic() - t0:.1f} s")
    return dict(zip(names + ["__honest__"], out))


def test_every_fixture_is_covered():
    assert {p.stem for p in CHEATS.glob("*.py")} == set(EXPECT) | GPU_ONLY


def test_honest_starter_passes(results):
    r = results["__honest__"]
    assert r.status == "ok", r.reason


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_cheat_is_caught(results, name):
    status, words = EXPECT[name]
    r = results[name]
    assert r.status == status, (name, r.status, r.reason)
    assert words in (r.reason or ""), (name, r.reason)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU only: side CUDA streams need a CUDA device")
def test_side_stream_is_caught():
    pool = EvaluatorPool(PoolSettings(mode="cuda", concurrency=1, evaluation=EvalSettings(trials=1, timeout_s=300)))
    r = asyncio.run(pool.evaluate((CHEATS / "side_stream.py").read_text(), {"builtin": "softmax"}))
    assert r.status in ("rejected", "incorrect"), r


# -- the checks without a worker: quick, and each one shown able to fail -----------------------------------------
def test_static_scan_allows_the_starters_of_every_family():
    from kernelsearch.judge.problem import family_names

    for name in family_names():
        scan_source(load_family(name).starter_source)


@pytest.mark.parametrize("body,words", [
    ("return x @ x", "torch-compute check"),
    ("return torch.matmul(x, x)", "torch-compute check"),
    ("return F.softmax(x, -1)", "torch-compute check"),
    ("return x.exp() / x.exp().sum(-1, keepdim=True)", "torch-compute check"),
    ("try:\n    return k(x)\nexcept Exception:\n    return Model()(x)", "fallback check"),
])
def test_static_scan_rejects(body, words):
    src = "class ModelNew:\n    def forward(self, x):\n" + textwrap.indent(body, " " * 8) + "\n"
    with pytest.raises(CandidateFailure) as err:
        scan_source(src)
    assert words in err.value.reason


def test_static_scan_leaves_kernels_and_allocation_alone():
    src = textwrap.dedent('''
        @triton.jit
        def k(x_ptr):
            v = tl.sum(tl.exp(tl.load(x_ptr)), axis=0)
        class ModelNew:
            def forward(self, x):
                y = torch.empty_like(x).reshape(-1, x.shape[-1]).contiguous()
                k[(triton.cdiv(y.shape[0], 4), max(1, 2))](y)
                return y.view(x.shape)
        ''')
    assert scan_source(src) == {"torch_ops": []}


def _kernelbench(tmp_path: Path, forward: str) -> Path:
    p = tmp_path / "prob.py"
    p.write_text(textwrap.dedent(f'''
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return {forward}

        def get_inputs():
            return [torch.randn(8, 16)]

        def get_init_inputs():
            return []
        '''))
    return p


def test_variance_check_flags_a_constant_problem(tmp_path):
    degenerate, msg = check_problem_variance(load_file(_kernelbench(tmp_path, "torch.ones_like(x) * 3")))
    assert degenerate and "variance check" in msg


def test_variance_check_passes_real_problems(tmp_path):
    assert not check_problem_variance(load_file(_kernelbench(tmp_path, "torch.relu(x)")))[0]
    assert not check_problem_variance(load_family("softmax"))[0]
