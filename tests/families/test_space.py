"""The template kit of families/space.py: placeholders, snippets set at their line's indentation, partial fills."""
from __future__ import annotations

import pytest

from kernelsearch.families.space import evict, fill, num_programs, preset, tl_exp, tl_log


def test_fill_replaces_placeholders_and_keeps_dollar_escapes():
    assert fill("x = $A + ${B}1  # $$", {"A": 3, "B": "y"}) == "x = 3 + y1  # $"


def test_a_snippet_alone_on_its_line_takes_that_lines_indentation():
    snippet = """
        a = 1
        if a:
            b = $N
    """
    template = "def f():\n    for i in r:\n        $BODY\n    return $N\n"
    assert fill(template, {"BODY": snippet, "N": 7}) == (
        "def f():\n    for i in r:\n        a = 1\n        if a:\n            b = 7\n    return 7\n")


def test_snippets_inside_snippets_are_pasted_in_turn():
    assert fill("if x:\n    $OUTER\n", {"OUTER": "y = 1\n$INNER", "INNER": "z = 2\nw = 3"}) == (
        "if x:\n    y = 1\n    z = 2\n    w = 3\n")


@pytest.mark.parametrize("template", ["x = $MISSING\n", "    $MISSING\n"])
def test_a_placeholder_without_a_value_is_named(template):
    with pytest.raises(KeyError, match=r"template placeholder \$MISSING has no value"):
        fill(template, {})


def test_preset_fills_some_placeholders_and_leaves_the_rest():
    part = preset("f(BLOCK=$BLOCK, warps=$num_warps)", {"BLOCK": 2048})
    assert part == "f(BLOCK=2048, warps=$num_warps)"
    assert fill(part, {"num_warps": 4}) == "f(BLOCK=2048, warps=4)"


def test_the_small_pieces():
    assert tl_exp("x - m", False) == "tl.exp(x - m)"
    assert tl_exp("x - m", True) == "tl.exp2((x - m) * LOG2E)"
    assert tl_log("s", False) == "tl.log(s)" and tl_log("s", True) == "(tl.log2(s) * LN2)"
    assert evict("evict_first", True) == ', eviction_policy="evict_first"' and evict("evict_last", False) == ""
    helper = num_programs(2)
    assert "def _num_programs(x):" in helper and "return _SMS[idx] * 2" in helper
    assert "a few programs per SM" in helper and "$" not in helper
