"""The offline provider searches CUDA C++ (search.language: cuda, no API key): a CUDA seed gets ideas from its family's
CUDA space (families/cuda_rows.py: row per block or warp, threads, vector width, reductions), the code renders them
as load_inline candidates the judge's static checks accept, and first kernels start from the CUDA starter."""
from __future__ import annotations

import asyncio
import json

import pytest

from kernelsearch.agent.base import ChatRequest, CodeTask, IdeaBrief, IdeaTask, Message, SeedTask
from kernelsearch.agent.errors import ProviderError
from kernelsearch.agent.offline import OfflineProvider
from kernelsearch.agent.parsing import extract_code
from kernelsearch.families import softmax
from kernelsearch.judge.scan import scan_source
from kernelsearch.judge.static import check_source

ROW_FAMILIES = ["softmax", "rmsnorm", "layernorm", "reduce"]


def _ask(role, task):
    req = ChatRequest(messages=[Message("user", "x")], role=role, task=task)
    return asyncio.run(OfflineProvider(seed=5).complete(req))


def _ideas(problem, seed_code, n=4, language="cuda"):
    task = IdeaTask(problem=problem, round=1, n=n, seeds=(SeedTask(1, seed_code),), language=language)
    return json.loads(_ask("ideas", task).text.split("```json\n")[1].split("```")[0])["ideas"]


@pytest.mark.parametrize("family", ROW_FAMILIES)
def test_a_cuda_seed_is_searched_in_its_cuda_space(family):
    import importlib

    pkg = importlib.import_module(f"kernelsearch.families.{family}")
    problem = {"builtin": family}
    ideas = _ideas(problem, pkg.CUDA_STARTER)
    assert len(ideas) == 4 and len({tuple(i["fixed"]) for i in ideas}) == 4
    assert all(set(i["params"]) == set(pkg.CUDA_SPACE.params) and i["params"] != pkg.CUDA_SPACE.default
               for i in ideas)
    idea = ideas[0]
    brief = IdeaBrief(3, idea["title"], idea["description"], {"params": idea["params"], "fixed": idea["fixed"]})
    codes = [extract_code(_ask("code", CodeTask(problem, brief, branch=b, branches=2, seed_code=pkg.CUDA_STARTER,
                                                language="cuda")).text) for b in range(2)]
    assert codes[0] != codes[1]
    for code in codes:
        assert check_source(code) == "cuda" and "at::cuda::getCurrentCUDAStream()" in code
        scan_source(code, "cuda")   # raises on anything the native-code or host scan rejects
    assert pkg.CUDA_SPACE.params_of(codes[0]) == idea["params"]


def test_a_triton_seed_stays_in_triton_under_any():
    ideas = _ideas({"builtin": "softmax"}, softmax.STARTER, language="any")
    assert all(set(i["params"]) == set(softmax.SPACE.params) for i in ideas)


def test_first_kernels_in_cuda_start_from_the_cuda_starter():
    brief = IdeaBrief(1, "First kernels from the reference", "d", {"first_kernel": True})
    code = extract_code(_ask("code", CodeTask({"builtin": "rmsnorm"}, brief, branch=0, branches=1,
                                             language="cuda")).text)
    from kernelsearch.families import rmsnorm

    assert code.strip() == rmsnorm.CUDA_STARTER.strip()


def test_a_family_without_a_cuda_space_is_refused_in_one_line():
    brief = IdeaBrief(1, "First kernels from the reference", "d", {"first_kernel": True})
    with pytest.raises(ProviderError, match="problem 'matmul' has no CUDA C\\+\\+ search space"):
        _ask("code", CodeTask({"builtin": "matmul"}, brief, branch=0, branches=1, language="cuda"))
