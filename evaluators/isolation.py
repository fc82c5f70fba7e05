"""The process primitives that confine a child: one implementation, used by the pool, the fork server, the judge's
worker (sandbox/) and the sm_90 compile child (evaluators/aot.py), which cannot import sandbox/ (it sits below).

Each is safe to call between fork and exec (a `preexec_fn`) and does nothing where the OS does not offer it (not
Linux, or not allowed), except `drop_privileges`, whose failure must stop the child before any candidate code.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_CLONE_NEWNET = 0x40000000


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG: this process gets SIGKILL when the thread that started it ends, so a killed controller
    (or judge) leaves no child behind, even one in a session of its own (Linux; elsewhere the timeout does)."""
    with contextlib.suppress(OSError, AttributeError):
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def leave_network() -> None:
    """An empty network namespace (CLONE_NEWNET), where allowed (root): nothing to connect to."""
    with contextlib.suppress(OSError, AttributeError):
        _libc().unshare(_CLONE_NEWNET)


def make_undumpable() -> None:
    """PR_SET_DUMPABLE 0: processes of the same user (a candidate's runner) cannot ptrace this one or read its
    memory through /proc (root's CAP_SYS_PTRACE still can: see docs/anticheat.md)."""
    with contextlib.suppress(OSError, AttributeError):
        _libc().prctl(_PR_SET_DUMPABLE, 0)


def drop_privileges(uid: int) -> None:
    """Become `uid` (and a group of the same number), with no supplementary groups: the candidate's process cannot
    then open the store, other evaluations' directories, or the judge's memory (/proc/PID/mem, ptrace), all root's.
    Called after `leave_network` (a network namespace needs root) and before any candidate code."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
