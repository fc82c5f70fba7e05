"""Each family's starter.py is its search space's default rendered, byte for byte, and it is what a search seeds
round 0 with: the file a reader opens is the kernel that runs."""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from kernelsearch.families import load_family
from kernelsearch.judge.problem import FAMILIES_DIR, family_names

FAMILIES = family_names()


@pytest.mark.parametrize("name", FAMILIES)
def test_starter_file_is_the_spaces_default_rendered(name):
    path = FAMILIES_DIR / name / "starter.py"
    assert path.is_file(), f"{name}: no starter.py (write it with `python -m kernelsearch.families`)"
    space = importlib.import_module(f"kernelsearch.families.{name}.space").SPACE
    assert path.read_text() == space.render(space.default), (
        f"{name}: starter.py differs from its space's default rendered; after changing the template or the "
        f"default, rewrite it with `python -m kernelsearch.families`")


@pytest.mark.parametrize("name", FAMILIES)
def test_the_starter_a_search_seeds_with_is_the_file(name):
    text = (FAMILIES_DIR / name / "starter.py").read_text()
    package = importlib.import_module(f"kernelsearch.families.{name}")
    assert load_family(name).starter_source == text
    assert package.STARTER == text


def test_the_starters_command_checks_and_rewrites(tmp_path, monkeypatch):
    from kernelsearch.families import __main__ as starters

    check = subprocess.run([sys.executable, "-m", "kernelsearch.families", "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"all {len(FAMILIES)} starters match" in check.stdout
    # against a copy of the families folder with one starter out of date: --check names it and writes nothing,
    # the plain command rewrites it
    fake = tmp_path / "families"
    for name in FAMILIES:
        (fake / name).mkdir(parents=True)
        (fake / name / "spec.py").write_text("")
        (fake / name / "starter.py").write_text((FAMILIES_DIR / name / "starter.py").read_text())
    (fake / "softmax" / "starter.py").write_text("# stale\n")
    monkeypatch.setattr(starters, "FAMILIES_DIR", fake)
    monkeypatch.setattr(starters, "family_names", lambda: FAMILIES)
    assert starters.main(["--check"]) == 1
    assert (fake / "softmax" / "starter.py").read_text() == "# stale\n"
    assert starters.main([]) == 0
    assert (fake / "softmax" / "starter.py").read_text() == (FAMILIES_DIR / "softmax" / "starter.py").read_text()
    assert starters.main(["--check"]) == 0


CUDA_FAMILIES = [n for n in FAMILIES if (FAMILIES_DIR / n / "space_cuda.py").is_file()]


def test_the_row_families_have_cuda_starters():
    assert set(CUDA_FAMILIES) >= {"softmax", "rmsnorm", "layernorm", "reduce"}


@pytest.mark.parametrize("name", CUDA_FAMILIES)
def test_cuda_starter_file_is_the_cuda_spaces_default_rendered_and_seeds_a_cuda_search(name):
    from kernelsearch.families import starters
    from kernelsearch.judge.static import check_source

    text = (FAMILIES_DIR / name / "starter_cuda.py").read_text()
    space = importlib.import_module(f"kernelsearch.families.{name}.space_cuda").CUDA_SPACE
    assert text == space.render(space.default), f"{name}: rewrite starter_cuda.py (`python -m kernelsearch.families`)"
    assert check_source(text) == "cuda" and "at::cuda::getCurrentCUDAStream()" in text
    problem = load_family(name)
    assert problem.family.CUDA_STARTER == text
    assert starters(problem, "cuda") == [text]
    assert starters(problem, "triton") == [problem.starter_source]
    assert starters(problem, "any") == [problem.starter_source, text]
