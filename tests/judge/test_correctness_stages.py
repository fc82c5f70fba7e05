"""Each correctness stage rejects a kernel that is wrong only in that stage's way (issue 4)."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelsearch.families import load_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.settings import EvalSettings
from tests.helpers import ONLINE

WRONG = Path(__file__).resolve().parents[2] / "families" / "softmax" / "wrong"
STORE = "tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)"


def _mutate(old: str, new: str) -> str:
    assert old in ONLINE
    return ONLINE.replace(old, new)


CASES = {
    # only the power-of-two widths are handled: every odd width fails
    "non_power_of_two": ((WRONG / "power_of_two_only.py").read_text(), "incorrect", "cols=33"),
    # exp without the max: right for unit-scale logits, overflows on large magnitudes only
    "unstable_large": ((WRONG / "no_max_subtraction.py").read_text(), "incorrect", "scale=50"),
    # the last column is never written: wrong values, or, where its memory held the last call's answer, the
    # kernel-launch check's second pass (that memory filled first stays filled: not written by the kernel)
    "partial_output": (_mutate(STORE, STORE.replace("cols < n_cols)", "cols < n_cols - 1)")),
                       ("incorrect", "rejected"), ("values off", "did not write it")),
    # float32 out of a bfloat16 problem
    "wrong_dtype": (_mutate("return y.reshape(shape)", "return y.reshape(shape).float()"), "incorrect",
                    "dtype torch.float32, expected torch.bfloat16"),
    # a NaN where the reference has none
    "nan": (_mutate("y = tl.exp(x - m_row) * inv", "y = tl.where(cols == 0, float('nan'), tl.exp(x - m_row) * inv)"),
            "incorrect", "non-finite values where the reference is finite"),
}


@pytest.fixture(scope="module")
def softmax():
    return load_problem("softmax")


def test_honest_online_kernel_passes(softmax):
    r = evaluate(softmax, ONLINE, EvalSettings(trials=1, aot_compile=False), mode="cpu", seed=7)
    assert r.status == "ok", r.reason


@pytest.mark.parametrize("name", sorted(CASES))
def test_stage_rejects(softmax, name):
    code, status, needle = CASES[name]
    r = evaluate(softmax, code, EvalSettings(trials=1, aot_compile=False), mode="cpu", seed=7)
    statuses, needles = (status, needle) if isinstance(status, tuple) else ((status,), (needle,))
    assert r.status in statuses, (name, r.reason)
    assert needles[statuses.index(r.status)] in r.reason, (name, r.reason)
    assert r.stage == "correctness"
