"""A family's spec is a typed FamilySpec: load_family reads it, and a malformed one is refused naming the field."""
from __future__ import annotations

import dataclasses

import pytest

from kernelsearch.families import load_family
from kernelsearch.judge.family import STABILITY, FamilySpec
from kernelsearch.judge.problem import DEFAULT_TOLERANCES, Case, ProblemError, family_names, family_spec_module
from kernelsearch.judge.problem import load_family as judge_load_family


def _spec(**changes) -> FamilySpec:
    base = dict(cases=[Case("timed", {"n": 4}, timed=True), Case("odd", {"n": 3}, cpu=True)],
                make_inputs=lambda case, gen: [], init_inputs=lambda case: [],
                flops=lambda case: 1.0, bytes_moved=lambda case: 2.0)
    return FamilySpec(**{**base, **changes})


@pytest.mark.parametrize("name", family_names())
def test_every_family_declares_a_spec_that_load_family_reads(name):
    spec = family_spec_module(name).SPEC   # the judge's copy, read by path
    assert isinstance(spec, FamilySpec)
    problem = load_family(name)
    assert problem.family is not None and problem.family.SPACE is not None   # the families room adds the space
    assert judge_load_family(name).family is None                            # the judge's own load has none
    assert problem.cases == list(spec.cases)
    assert problem.tolerances == {**DEFAULT_TOLERANCES, **spec.tolerances}
    assert problem.flops is spec.flops and problem.bytes_moved is spec.bytes_moved
    assert problem.make_inputs is spec.make_inputs and problem.init_inputs is spec.init_inputs
    assert problem.stability == spec.stability == STABILITY


def test_the_causal_attention_spec_is_the_full_ones_with_causal_cases():
    full = load_family("flash_attention")
    causal = load_family("flash_attention_causal")
    assert causal.flops is full.flops and causal.tolerances == full.tolerances
    assert all(c.params["causal"] for c in causal.cases) and not any(c.params["causal"] for c in full.cases)


def test_defaults():
    spec = _spec()
    assert spec.tolerances == {} and spec.stability_tolerances == {} and spec.stability == STABILITY
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.flops = None


@pytest.mark.parametrize("changes,message", [
    ({"cases": []}, "FamilySpec.cases is empty"),
    ({"cases": [Case("a", {}, timed=True), Case("a", {})]}, "case names repeated: a"),
    ({"cases": [Case("a", {})]}, "no case is marked timed=True"),
    ({"flops": 5.0}, "FamilySpec.flops is float, not a function"),
    ({"tolerances": {"float32": 1e-4}}, "FamilySpec.tolerances['float32'] is 0.0001, not an (atol, rtol) pair"),
])
def test_a_malformed_spec_is_refused_naming_the_field(changes, message):
    with pytest.raises((ValueError, TypeError)) as err:
        _spec(**changes)
    assert message in str(err.value)


def test_an_unknown_family_names_the_known_ones():
    with pytest.raises(ProblemError, match="unknown problem 'softmaxx': built-in families are .*softmax"):
        load_family("softmaxx")
