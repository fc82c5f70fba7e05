"""A process that changed its user still dies with its parent: a change of user clears PR_SET_PDEATHSIG, so
judge/isolation.drop_privileges arms it again (a candidate's runner outlived its SIGKILLed judge when a Ray actor
was killed)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import ctypes, sys
from kernelsearch.judge.isolation import die_with_parent, drop_privileges
libc = ctypes.CDLL(None, use_errno=True)
def pdeathsig():
    v = ctypes.c_int(-1)
    libc.prctl(2, ctypes.byref(v))   # PR_GET_PDEATHSIG
    return v.value
die_with_parent()
before = pdeathsig()
drop_privileges(65534)
print(before, pdeathsig())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="changing to another user needs root")
def test_the_parent_death_signal_survives_the_change_of_user():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.split() == ["9", "9"]   # SIGKILL before and after (0 after, without the re-arm)
