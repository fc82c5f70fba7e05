"""The limits every worker runs under, applied in the worker's own process before any candidate code."""
from __future__ import annotations

import resource
import signal


def apply_limits(timeout_s: float, address_space_bytes: int | None, network_off: bool) -> None:
    # die with the parent: a killed controller leaves no worker behind (Linux; elsewhere the timeout does)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
        if network_off:
            libc.unshare(0x40000000)    # CLONE_NEWNET: a network namespace with nothing in it (needs root)
    except (OSError, AttributeError):
        pass
    # no core files; a bounded number of open files and a cap on file size; CPU time a little over the timeout
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 30, 2 << 30))
    cpu = int(timeout_s * 4) + 60
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    if address_space_bytes:   # CPU workers only: CUDA reserves far more address space than it uses
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))


def die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def make_undumpable() -> None:
    """PR_SET_DUMPABLE 0: processes of the same user (a candidate's runner) cannot ptrace this one or read its
    memory through /proc (root's CAP_SYS_PTRACE still can: see docs/anticheat.md)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0)
    except (OSError, AttributeError):
        pass
