"""The process primitives that confine a child: one implementation, used by the pool, the fork server, the judge's
worker (sandbox/) and the sm_90 compile child (judge/aot.py), which cannot import sandbox/ (it sits below).

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
    parent = os.getppid()
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    # a change of user clears the parent-death signal: armed again, or a runner outlived its killed judge (seen when a
    # Ray actor or a controller was SIGKILLed); a parent already gone meanwhile is this process's end too
    die_with_parent()
    if os.getppid() != parent:
        os._exit(1)


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def become_subreaper() -> None:
    """PR_SET_CHILD_SUBREAPER: a process this one started, whose own parent has gone (the double fork of a daemon),
    becomes this process's child instead of init's, so the judge still finds it among the runner's descendants
    (`stray_processes`). Called by a runner before it loads the candidate (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _processes(with_uid: bool) -> dict[int, tuple[int, int, int, str]]:
    """pid -> (parent pid, process group, owner uid or -1, state) of every process this one can see (/proc)."""
    found = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            uid = _real_uid(name) if with_uid else -1
        except (OSError, ValueError, IndexError):   # gone since the listing
            continue
        fields = stat[stat.rfind(")") + 2:].split()   # the name in brackets may hold spaces and brackets
        if len(fields) >= 3:
            found[int(name)] = (int(fields[1]), int(fields[2]), uid, fields[0])
    return found


def _real_uid(pid: str) -> int:
    """The process's real uid, from /proc/PID/status (readable for any process; /proc/PID itself is owned by root
    once a process makes itself undumpable, so its owner would hide one)."""
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"Uid:"):
                return int(line.split()[1])
    return -1


def stray_processes(runner_pid: int, uid: int | None) -> list[int]:
    """Live processes of a candidate's that its runner's process group does not hold, so freezing the group
    (killpg SIGSTOP) does not stop them: with a user of its own (`uid`), every process of that user; otherwise
    the runner's descendants (a runner is a subreaper, so a double-forked daemon stays one). Such a process could
    go on working while the judge holds the candidate frozen, or after its batch said it was done."""
    procs = _processes(uid is not None)
    if uid is not None:
        mine = {p for p, (_, _, u, _) in procs.items() if u == uid}
    else:
        children: dict[int, list[int]] = {}
        for p, (parent, _, _, _) in procs.items():
            children.setdefault(parent, []).append(p)
        mine, todo = set(), [runner_pid]
        while todo:
            for c in children.get(todo.pop(), []):
                if c not in mine:
                    mine.add(c)
                    todo.append(c)
    return sorted(p for p in mine if procs[p][1] != runner_pid and procs[p][3] not in ("Z", "X"))


def _child_processes(parent: int) -> list[int]:
    """The live (not zombie) children of `parent`."""
    return sorted(p for p, (pp, _, _, state) in _processes(False).items() if pp == parent and state not in ("Z", "X"))


@contextlib.contextmanager
def orphans_reaped(found: list[str]):
    """While it lasts this process is a subreaper, so the orphans of a child it starts inside (a daemon the child
    double-forked, in a session of its own, whatever the child did to itself) are re-parented here, not to init; at
    its end every child of this process that was not one before is killed and reaped (the child it started has
    exited by then) and described into `found`, and the subreaper flag is put back as it was."""
    was = ctypes.c_int(0)
    with contextlib.suppress(OSError, AttributeError):
        _libc().prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was))
    before = set(_child_processes(os.getpid()))
    become_subreaper()
    try:
        yield
    finally:
        for _ in range(3):   # a process may fork while it is being killed: look again
            pids = [p for p in _child_processes(os.getpid()) if p not in before]
            if not pids:
                break
            found += [describe_process(pid) for pid in pids]
            signal_processes(pids, signal.SIGKILL)
            for pid in pids:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, 0)
        if not was.value:
            with contextlib.suppress(OSError, AttributeError):
                _libc().prctl(_PR_SET_CHILD_SUBREAPER, 0)


def describe_process(pid: int) -> str:
    """`pid (command line)`, for a reason text."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        cmd = ""
    return f"pid {pid}" + (f" ({cmd[:80]})" if cmd else "")


def signal_processes(pids, sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


_PR_CAPBSET_DROP = 24
_CAP_LAST = 63
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Give up every capability (bounding set, then effective, permitted and inheritable), for a candidate's runner
    that keeps a root pool's user: root's CAP_SYS_PTRACE reads the memory of any process, the undumpable judge's
    included (it holds the seed), and its other capabilities reach past every file permission. The uid stays 0, so
    files root owns stay open to it (docs/anticheat.md). Linux; elsewhere, or without the rights, it does nothing."""
    with contextlib.suppress(OSError, AttributeError):
        libc = _libc()
        for cap in range(_CAP_LAST + 1):   # needs CAP_SETPCAP, so first; capabilities past the kernel's last: EINVAL
            libc.prctl(_PR_CAPBSET_DROP, cap)
        header = _CapHeader(_CAP_VERSION_3, 0)
        data = (_CapData * 2)()
        libc.capset(ctypes.byref(header), data)


def confine_candidate(uid: int | None) -> None:
    """What a process that runs candidate code gives up before that code loads: its user for `uid`, a user of its
    own (`drop_privileges`), or, keeping the pool's user, every capability (`drop_capabilities`). First it makes
    itself the kernel's OOM killer's first choice (oom_score_adj 1000, which it cannot lower again without
    CAP_SYS_RESOURCE): a candidate that drives the host out of memory is killed before the judge is."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")
    if uid is not None:
        drop_privileges(uid)
    else:
        drop_capabilities()


def kill_strays(runner_pid: int, uid: int | None, also=()) -> None:
    """SIGKILL to the candidate's processes outside its runner's group (`stray_processes`) and to `also` (those
    found earlier); best effort."""
    with contextlib.suppress(Exception):
        signal_processes(set(also) | set(stray_processes(runner_pid, uid)), signal.SIGKILL)
