"""The judge's end of a runner: requests and replies over its socket, its process group to freeze, and a
runner started as a plain local subprocess (tests, benches, the in-process `evaluate`; the pool starts its runners
sandboxed instead, sandbox/pool.py)."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Callable

from kernelsearch.judge import wire
from kernelsearch.judge.isolation import describe_process, kill_strays, signal_processes, stray_processes
from kernelsearch.judge.status import CandidateFailure, Status


class RunnerLost(Exception):
    pass


class RunnerTimedOut(RunnerLost):
    """The runner gave no reply by its deadline (a candidate checked in a group, judge/group.py): it was killed."""


class RunnerClient:
    """The judge's end of one runner: requests and replies over its socket, and its process group to freeze."""

    def __init__(self, sock, pid: int, name: str, *, close: Callable[[], None] | None = None,
                 how_it_ended: Callable[[], str | None] | None = None):
        self.sock, self.pid, self.name = sock, pid, name
        self._close = close
        self._how = how_it_ended
        self.ipc: wire.IpcReader | None = None
        self.watch_strays = False      # the candidate's: its processes outside its process group are looked for
        self.uid: int | None = None    # the candidate's own user, where it has one
        self.strays: set[int] = set()  # those found (stopped at once, killed at close)
        # time.monotonic() by which each reply must have come, or None (the pool's timeout of the whole evaluation
        # bounds it): a group's candidate has its own, so one that hangs ends alone (judge/group.py)
        self.deadline: float | None = None

    def request(self, header: dict, buffers: list | None = None) -> tuple[dict, list]:
        try:
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.sock.settimeout(left)
            else:
                self.sock.settimeout(None)
            wire.send(self.sock, header, buffers or [])
            reply, bufs = wire.recv(self.sock, deadline=self.deadline)
        except TimeoutError:
            self.kill()
            raise RunnerTimedOut(f"the {self.name}'s process gave no reply within its time: it was killed") from None
        except (EOFError, OSError) as err:
            how = self._how() if self._how else None
            raise RunnerLost(f"the {self.name}'s process died" + (f" ({how})" if how else
                             f" ({type(err).__name__}: {err})")) from None
        if self.ipc is not None and "segs" in reply:
            self.ipc.add_segments(reply["segs"])
        return reply, bufs

    def freeze(self) -> None:
        """Stop the runner's process group. For the candidate's, also every process of its outside the group (a
        daemon in a session of its own, which SIGSTOP to the group would miss): stopped, kept for close, and the
        candidate rejected (process check)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGSTOP)
        if not self.watch_strays:
            return
        found = stray_processes(self.pid, self.uid)
        if found:
            signal_processes(found, signal.SIGSTOP)
            self.strays.update(found)
            raise CandidateFailure(Status.rejected, "process check: the candidate started a process outside its "
                                   f"runner's process group ({describe_process(found[0])}"
                                   + (f" and {len(found) - 1} more" if len(found) > 1 else "")
                                   + "), which freezing the runner does not stop: work there would run off the "
                                   "judge's clock")

    def kill(self) -> None:
        """SIGKILL to the runner's process group and to the processes of its found outside it: its CUDA context
        goes with them, and every kernel it left on the device."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.watch_strays:
            kill_strays(self.pid, self.uid, also=self.strays)

    def thaw(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGCONT)

    def close(self) -> None:
        if self.watch_strays:   # found before the runner goes: a daemon it left would outlive the evaluation
            kill_strays(self.pid, self.uid, also=self.strays)
        with contextlib.suppress(Exception):
            self.thaw()
            wire.send(self.sock, {"op": "exit"})
        if self.ipc is not None:
            self.ipc.close()
        with contextlib.suppress(Exception):
            self.sock.close()
        if self._close:
            self._close()


def spawn_local(role: str) -> RunnerClient:
    """A runner as a plain local subprocess (tests, benches, the in-process `evaluate`); the pool starts its
    runners sandboxed instead (sandbox/pool.py)."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-m", "kernelsearch.judge.runner", str(theirs.fileno())],
                            pass_fds=(theirs.fileno(),), start_new_session=True, stdin=subprocess.DEVNULL)
    theirs.close()

    def how_it_ended() -> str | None:
        try:
            rc = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None
        return f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"

    def close() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return RunnerClient(ours, proc.pid, role, close=close, how_it_ended=how_it_ended)
