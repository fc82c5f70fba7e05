"""The limits every worker runs under, applied in the worker's own process before any candidate code.

The process primitives (death signal, network namespace, undumpable, another user) live in
judge/isolation.py, one copy shared with the sm_90 compile child, which sits below this room."""
from __future__ import annotations

import resource

from kernelsearch.judge.isolation import die_with_parent, leave_network


def apply_limits(timeout_s: float, address_space_bytes: int | None, network_off: bool) -> None:
    # die with the parent: a killed controller leaves no worker behind (Linux; elsewhere the timeout does)
    die_with_parent()
    if network_off:
        leave_network()   # a network namespace with nothing in it (needs root)
    # no core files; a bounded number of open files and a cap on file size; CPU time a little over the timeout
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 30, 2 << 30))
    cpu = int(timeout_s * 4) + 60
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    if address_space_bytes:   # CPU workers only: CUDA reserves far more address space than it uses
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))


def device_nodes_open() -> bool:
    """Whether a process of another user can use the GPUs: every /dev/nvidia* node readable and writable by all."""
    import glob
    import os
    import stat

    nodes = glob.glob("/dev/nvidia*")
    return bool(nodes) and all(stat.S_ISDIR(os.stat(n).st_mode) or os.stat(n).st_mode & 0o006 == 0o006
                               for n in nodes)


def python_open_to_others() -> bool:
    """Whether another user can run this Python and import what a runner imports: the executable, the standard
    library, torch, triton and kernelsearch readable (and their folders searchable) by all. A pyenv under /root is
    not; then dropping privileges would break the runner's later imports."""
    import os
    import stat
    import sys
    import sysconfig

    import torch
    import triton

    import kernelsearch.families as families  # the judge reads a family's reference and spec by path
    import kernelsearch.judge as judge
    import kernelsearch.store as store

    paths = [os.path.realpath(sys.executable), sysconfig.get_paths()["stdlib"], os.path.dirname(torch.__file__),
             os.path.dirname(triton.__file__), os.path.dirname(os.path.realpath(judge.__file__)),
             os.path.dirname(os.path.realpath(families.__file__)),
             os.path.dirname(os.path.realpath(store.__file__))]
    for path in paths:
        parts = os.path.realpath(path).split(os.sep)
        for i in range(2, len(parts) + 1):   # folders on the way: searchable; the last: readable too
            p = os.sep.join(parts[:i]) or os.sep
            mode = os.stat(p).st_mode
            last = i == len(parts)
            need = (0o005 if last else 0o001) if stat.S_ISDIR(mode) else 0o004
            if mode & need != need:
                return False
    return True
