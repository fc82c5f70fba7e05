"""The row families in CUDA C++ (families/cuda_rows.py, each family's space_cuda.py, starter_cuda.py, wrong_cuda/).

On a GPU: every CUDA starter is correct on every case, every structural variant of the CUDA space on the small
cases, and every wrong_cuda/ fixture fails. On a CPU machine CUDA C++ cannot run (torch's CPU build has no CUDA):
the starters compile for sm_90a with no spills, a second compile comes from the warm cache, and the fixtures are
CUDA candidates the static checks accept (they must be caught by the values, not by the scan).
"""
from __future__ import annotations

import importlib
import re
import time

import pytest
import torch

from kernelsearch.judge.cuda_check import cuda_report, find_nvcc
from kernelsearch.judge.problem import FAMILIES_DIR, family_names
from kernelsearch.judge.scan import scan_source
from kernelsearch.judge.static import check_source
from tests.families.test_families import _problem, check

CUDA_FAMILIES = [n for n in family_names() if (FAMILIES_DIR / n / "space_cuda.py").is_file()]
WRONG_CUDA = [(f, p.name) for f in CUDA_FAMILIES for p in sorted((FAMILIES_DIR / f / "wrong_cuda").glob("*.py"))]
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA C++ kernels run only on a GPU: on this machine "
                         "they are compiled for sm_90a instead (test_cuda_starter_compiles_for_sm90a)")
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc on this machine: the sm_90a compile check skips")


def _space(name):
    return importlib.import_module(f"kernelsearch.families.{name}.space_cuda").CUDA_SPACE


def _starter(name) -> str:
    return (FAMILIES_DIR / name / "starter_cuda.py").read_text()


def test_every_cuda_family_has_wrong_fixtures():
    assert set(CUDA_FAMILIES) >= {"softmax", "rmsnorm", "layernorm", "reduce"}
    assert {f for f, _ in WRONG_CUDA} == set(CUDA_FAMILIES)


@pytest.mark.parametrize("name,fixture", WRONG_CUDA)
def test_wrong_cuda_fixture_is_a_cuda_candidate_the_scan_accepts(name, fixture):
    source = (FAMILIES_DIR / name / "wrong_cuda" / fixture).read_text()
    assert check_source(source) == "cuda" and source != _starter(name)
    scan_source(source, "cuda")   # raises if the scan rejects it: the fixture is a wrong answer, not a cheat


@pytest.mark.parametrize("name", CUDA_FAMILIES)
def test_cuda_space_moves_land_on_points_that_render(name):
    space = _space(name)
    assert space.params_of(_starter(name)) == space.default
    moves = space.applicable(space.default)
    assert {m.title for m, _ in moves} >= {"Row per warp", "Shared-memory tree reductions"}
    for _, params in moves:
        assert check_source(space.render(params)) == "cuda"
    if "stash" in space.params:   # the row's other two homes are each one move away
        assert {p["stash"] for _, p in moves if p["stash"] != space.default["stash"]} == \
            {"global", "shared", "registers"} - {space.default["stash"]}


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", CUDA_FAMILIES)
def test_cuda_starter_compiles_for_sm90a(name, tmp_path):
    report = cuda_report(_starter(name), cache=tmp_path)
    assert report["status"] == "ok", report.get("error")
    # the device's demangler writes template values with their casts, `layernorm_kernel<float, (int)4, ...>(...)`
    # (this machine's without: `<float, 4, ...>`): casts dropped before the argument list is cut off
    names = {re.sub(r"\((?:int|unsigned int|bool|long)\)", "", k["name"]).split("(")[0] for k in report["kernels"]}
    assert any(f"{name}_kernel<float, 4," in n for n in names) and any("__nv_bfloat16, 8," in n for n in names), \
        sorted(names)
    assert all(k["arch"] == "sm_90a" and k["registers"] > 0 and k["spills_bytes"] == 0 for k in report["kernels"])
    t0 = time.monotonic()
    again = cuda_report(_starter(name), cache=tmp_path)
    assert again["extensions"][0]["cached"] is True and time.monotonic() - t0 < 1.0   # from the warm cache


@gpu
@pytest.mark.parametrize("name,case_name", [(f, c.name) for f in CUDA_FAMILIES for c in _problem(f).cases_for("gpu")])
def test_cuda_starter_is_correct(name, case_name, tmp_path):
    problem = _problem(name)
    case = next(c for c in problem.cases if c.name == case_name)
    err = check(problem, case, _starter(name), tmp_path)
    assert err is None, f"{name} CUDA starter on {case.describe()}: {err}"


@gpu
@pytest.mark.parametrize("name,param,value", [(f, k, v) for f in CUDA_FAMILIES for k, v in
                                              (("rows_per", "warp"), ("reduce", "shared"), ("vec_bytes", 4),
                                               ("stash", "shared"), ("stash", "registers"), ("stash", "global"))
                                              if k in _space(f).params and _space(f).default[k] != v])
def test_cuda_variant_is_correct(name, param, value, tmp_path):
    problem = _problem(name)
    source = _space(name).render({**_space(name).default, param: value})
    for case in problem.cases_for("cpu"):
        err = check(problem, case, source, tmp_path)
        assert err is None, f"{name} CUDA {param}={value} on {case.describe()}: {err}"


@gpu
@pytest.mark.parametrize("name,fixture", WRONG_CUDA)
def test_wrong_cuda_fixture_fails(name, fixture, tmp_path):
    problem = _problem(name)
    source = (FAMILIES_DIR / name / "wrong_cuda" / fixture).read_text()
    results = {c.name: check(problem, c, source, tmp_path) for c in problem.cases_for("gpu")}
    assert any(r is not None for r in results.values()), f"{fixture} passed every case: {results}"
