"""judge/cuda_build.py: on a GPU machine the judge builds a candidate's extensions once per content and the runner
imports that build. What must hold for that: the key the judge reads from the file's text is the key the runner
computes from the arguments the candidate actually passes (else every import misses and each branch builds again);
options that reach the compiler or linker are never built by the judge; the cache is only used where the candidate
cannot write it."""
from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest
import torch

from kernelsearch.judge import cuda_build
from kernelsearch.judge.cuda_build import build_ahead, buildable, key
from kernelsearch.judge.inline_ext import extensions, from_args
from kernelsearch.judge.problem import FAMILIES_DIR

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SOURCES = {"small": (FIX / "cuda" / "small_kernel.py").read_text(),
           "honest_cuda": (FIX / "cheats" / "round3" / "honest_cuda.py").read_text(),
           **{f: (FAMILIES_DIR / f / "starter_cuda.py").read_text() for f in ("softmax", "rmsnorm", "reduce")}}


def _runtime_args(source: str, monkeypatch, tmp_path) -> list[dict]:
    """The arguments the candidate hands load_inline when its module runs (as bound in the runner's wrapper), taken
    by running it with load_inline recording its call (torch's CPU build cannot build the extension)."""
    from torch.utils import cpp_extension as ce

    calls = []
    signature = inspect.signature(ce.load_inline)

    class _Ext:
        def __getattr__(self, name):
            return lambda *a, **k: None

    def record(*args, **kwargs):
        calls.append(dict(signature.bind(*args, **kwargs).arguments))
        return _Ext()

    monkeypatch.setattr(ce, "load_inline", record)
    from kernelsearch.judge.problem import load_source_module

    path = tmp_path / "cand.py"
    path.write_text(source)
    module = load_source_module(source, f"ks_build_key_{len(os.listdir(tmp_path))}", str(path))
    for lazy in ("_load", "_ext"):   # fixtures that build on their first call
        if not calls and hasattr(module, lazy):
            getattr(module, lazy)()
    return calls


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_judges_key_from_the_text_is_the_runners_key_from_the_call(name, monkeypatch, tmp_path):
    source = SOURCES[name]
    (static,) = extensions(source)
    (args,) = _runtime_args(source, monkeypatch, tmp_path)
    runtime = from_args(args)
    assert (runtime.cpp, runtime.cuda, runtime.options) == (static.cpp, static.cuda, static.options)
    assert key(runtime) == key(static)
    assert buildable(static) is None   # -O3 (the starters') is a code-generation flag


def test_options_that_reach_the_compiler_or_linker_are_not_built_ahead():
    base = {"name": "e", "cpp_sources": "int f();", "cuda_sources": "__global__ void k() {}"}
    assert buildable(from_args(base)) is None
    assert buildable(from_args({**base, "extra_cuda_cflags": ["-O3", "--use_fast_math"]})) is None
    for extra, why in (({"extra_ldflags": ["-lcublas"]}, "linker"), ({"extra_cflags": ["-fplugin=x.so"]}, "compiler"),
                       ({"extra_cuda_cflags": ["-Xcompiler", "-fplugin=x.so"]}, "beyond code generation"),
                       ({"is_python_module": False}, "not a Python module")):
        assert why in buildable(from_args({**base, **extra}))
    # a default given is the default not given: the runner binds what the candidate passed, the reader reads it
    assert key(from_args({**base, "is_python_module": True, "extra_cflags": None})) == key(from_args(base))
    assert key(from_args({**base, "extra_cuda_cflags": ["-O3"]})) != key(from_args(base))


def test_no_shared_builds_for_a_candidate_of_the_judges_user_or_in_a_folder_others_may_write(tmp_path, monkeypatch):
    detail: dict = {}
    assert build_ahead(SOURCES["small"], detail, shared=False) is None
    assert "judge's user" in detail["cuda_build"]["skipped"]
    base = tmp_path / "cache"
    base.mkdir(mode=0o777)
    base.chmod(0o777)
    monkeypatch.setenv("KERNELSEARCH_CACHE", str(base))
    assert build_ahead(SOURCES["small"], detail, shared=True) is None
    assert "writable by others" in detail["cuda_build"]["skipped"]
    assert cuda_build.cache_root() == base / "cuda-builds"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU only: torch's CPU build cannot build a CUDA extension")
def test_a_built_extension_is_imported_not_rebuilt(tmp_path, monkeypatch):
    import time

    from kernelsearch.judge.problem import load_source_module

    monkeypatch.setenv("KERNELSEARCH_CACHE", str(tmp_path))
    detail: dict = {}
    root = build_ahead(SOURCES["softmax"], detail, shared=True)
    (built,) = detail["cuda_build"]["extensions"]
    assert root and built["status"] == "ok", built
    again: dict = {}
    build_ahead(SOURCES["softmax"], again, shared=True)
    assert again["cuda_build"]["extensions"][0]["cached"] is True
    from torch.utils import cpp_extension as ce

    monkeypatch.setattr(ce, "load_inline", ce.load_inline)   # put back after the test
    cuda_build.use_builds(root)
    t0 = time.monotonic()
    path = tmp_path / "cand.py"
    path.write_text(SOURCES["softmax"])
    module = load_source_module(SOURCES["softmax"], "ks_build_import", str(path))
    assert time.monotonic() - t0 < 1.0
    x = torch.randn(8, 1000, device="cuda")
    assert torch.allclose(module.ModelNew()(x), torch.softmax(x, -1), atol=1e-6, rtol=1e-4)
