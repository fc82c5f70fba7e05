"""Built-in kernel families: one folder each (reference, spec, starter and search space, wrong/ fixtures).

The judge reads a family's reference.py, spec.py and starter.py by path (kernelsearch.judge.problem) and knows
nothing of its search space. The rooms above it load problems here, where the family's package (its SPACE) is
attached, and a family timed at a model's shape starts round 0 from its space's point for that shape.
"""
from __future__ import annotations

import importlib
from typing import Any

from kernelsearch.judge import problem as _judge


def with_space(problem: _judge.Problem) -> _judge.Problem:
    """`problem` with its family's package attached (`problem.family.SPACE`), where it is a built-in family."""
    if not problem.builtin:
        return problem
    problem.family = importlib.import_module(f"kernelsearch.families.{problem.ref['builtin']}")
    if "shape" in problem.ref:   # at a model's shape: the space's own point for it, else its default (starter.py)
        space = problem.family.SPACE
        problem.starter_source = space.render(space.default_for(problem.timed_case, problem.cases))
    return problem


def load_problem(spec: str | dict) -> _judge.Problem:
    """kernelsearch.judge.problem.load_problem, with the family's search space where it is one."""
    return with_space(_judge.load_problem(spec))


def load_family(name: str) -> _judge.Problem:
    return with_space(_judge.load_family(name))


def family_at(name: str, params: dict[str, Any], dtype: str) -> _judge.Problem:
    return with_space(_judge.family_at(name, params, dtype))


def starters(problem: _judge.Problem, language: str) -> list[str]:
    """A family's round-0 kernels in `language` (search.language): its starter.py for triton, its starter_cuda.py (its
    CUDA space's point at the problem's shape) for cuda, both for any; a family with no CUDA C++ space has none in
    CUDA (the coder writes first kernels: kernelsearch.config)."""
    space = getattr(problem.family, "CUDA_SPACE", None)
    cuda = None
    if space is not None:
        cuda = space.render(space.default_for(problem.timed_case, problem.cases)) if "shape" in problem.ref else \
            problem.family.CUDA_STARTER
    codes = ([problem.starter_source] if language != "cuda" else []) + ([cuda] if language != "triton" else [])
    return [c for c in codes if c]
