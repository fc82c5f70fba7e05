"""fast_p computed exactly on a hand-made table of problems."""
from __future__ import annotations

import pytest

from kernelsearch.search.bench import P_VALUES, ProblemScore, fast_p

# eight problems: their best kernel's (correct, speedup over the baseline)
TABLE = [
    ProblemScore(True, 2.5),     # faster than 2x
    ProblemScore(True, 2.0),     # exactly 2x: not faster than 2x
    ProblemScore(True, 1.6),
    ProblemScore(True, 1.0),     # exactly the baseline: not faster than 1x
    ProblemScore(True, 0.4),     # correct, slower
    ProblemScore(True, None),    # correct, not timed: counts at p = 0 only
    ProblemScore(False, 3.0),    # a speedup that is not correct never counts
    ProblemScore(False, None),   # not searched, or nothing correct
]


@pytest.mark.parametrize("p, expected", [(0, 6 / 8), (1, 3 / 8), (1.5, 3 / 8), (2, 1 / 8), (0.5, 4 / 8),
                                         (2.5, 0.0)])
def test_fast_p_on_a_hand_made_table(p, expected):
    assert fast_p(TABLE, p) == expected


def test_reported_p_values_are_kernelbench_s():
    assert P_VALUES == (0.0, 1.0, 1.5, 2.0)
    assert [fast_p(TABLE, p) for p in P_VALUES] == [0.75, 0.375, 0.375, 0.125]


def test_every_problem_counts_in_the_denominator():
    assert fast_p([ProblemScore(True, 5.0)] + [ProblemScore(False)] * 3, 1) == 0.25


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no problems"):
        fast_p([], 1)
    with pytest.raises(ValueError, match="p must be >= 0"):
        fast_p(TABLE, -1)
