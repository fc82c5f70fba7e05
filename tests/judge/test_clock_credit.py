"""The candidate's batch credit (judge/clock.batch_credit): its own event time can lower it, never raise it."""
import pytest

from kernelsearch.judge.clock import GRAPH_LAUNCH_CAP, batch_credit, low

MS = 1e-3
FIXED = 0.1 * MS
REF = [0.30 * MS, 0.32 * MS, 0.31 * MS]   # the trusted reference's wall time beyond its events, per batch


def test_without_the_candidates_events_the_reference_overhead_is_credited():
    charged, own = batch_credit(REF, [], FIXED)
    assert own is None and charged == pytest.approx(low(REF)) and charged == pytest.approx(0.305 * MS)


def test_an_honest_runner_with_less_overhead_than_the_reference_is_charged_its_own():
    charged, own = batch_credit(REF, [0.20 * MS, 0.21 * MS, 0.19 * MS], FIXED)
    assert own == pytest.approx(0.195 * MS) and charged == pytest.approx(0.195 * MS)


@pytest.mark.parametrize("forged", [[5.0], [1e9], [0.9 * MS] * 3])
def test_a_forged_small_event_time_gains_no_more_than_the_reference_overhead(forged):
    """A runner reporting tiny event times claims a huge overhead: the credit stays the reference's."""
    charged, _ = batch_credit(REF, forged, FIXED)
    assert charged == pytest.approx(0.305 * MS)


def test_a_forged_large_event_time_only_costs_the_candidate():
    charged, _ = batch_credit(REF, [0.0, 0.0, 0.0], FIXED)
    assert charged == pytest.approx(FIXED)


def test_the_credit_is_capped_above_the_empty_batch():
    charged, _ = batch_credit([5 * MS] * 3, [5 * MS] * 3, FIXED)
    assert charged == pytest.approx(FIXED + GRAPH_LAUNCH_CAP)


def test_low_is_the_median_of_the_fastest_half():
    assert low([5.0, 1.0, 2.0, 9.0]) == pytest.approx(1.5)   # of 1 and 2
    assert low([3.0, 1.0, 2.0]) == pytest.approx(1.5)        # of 1 and 2 (the middle one included)
    assert low([4.0]) == 4.0


def test_the_candidates_input_delivery_on_the_cpu_is_timed_per_side():
    """On the CPU a runner decodes its inputs itself, so the candidate's code could work while they arrive; _refill
    times each side's delivery, and the candidate's beyond the reference's is charged (clock.py, side steps)."""
    import time as _time

    from kernelsearch.judge import clock

    class Runner:
        def __init__(self):
            self.frozen = False

        def freeze(self):
            self.frozen = True

    class Talk:
        mode = "cpu"

        def put(self, r, k, x, stage):
            if r is sides["candidate"]:
                _time.sleep(0.01)   # work done while its inputs arrive

    sides = {"candidate": Runner(), "eager": Runner()}
    took = clock._refill(Talk(), sides, {}, lambda b, k: [k], 0, 3)
    assert took["candidate"] >= 0.03 and took["eager"] < 0.01 and sides["candidate"].frozen
