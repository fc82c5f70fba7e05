"""The pool's end of the fork server (sandbox/zygote.py), and killing a process group."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys

from kernelsearch.judge.isolation import die_with_parent
from kernelsearch.sandbox.env import scrubbed_env


class Zygote:
    """The pool's end of the fork server (sandbox/zygote.py): started once, restarted if it dies."""

    def __init__(self, env: dict[str, str], prime: bool = False) -> None:
        self.env = env   # Triton's interpreter switch must be set before triton.language is imported
        self.prime = prime   # the meta path imported before forking (zygote.py): a GPU pool's judges skip it
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self._ids = 0
        self._spawned: dict[int, asyncio.Future] = {}
        self._exits: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self._starting = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        rep_r, rep_w = os.pipe()
        try:
            # a plain Popen, not asyncio's: asyncio's child watcher reports the server's exit to the loop that started
            # it, and a pool closed after its loop had closed (the CLI: asyncio.run, then close) logged "Loop ... that
            # handles pid N is closed" on stderr, an extra line beside a failed run's one error line
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kernelsearch.sandbox.zygote", str(theirs.fileno()), str(rep_w),
                 *(["prime"] if self.prime else [])],
                pass_fds=(theirs.fileno(), rep_w), env=scrubbed_env(self.env), start_new_session=True,
                stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        finally:
            theirs.close()
            os.close(rep_w)
        self.sock = ours
        reader = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                           os.fdopen(rep_r, "rb"))
        self._reader = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        loop = asyncio.get_running_loop()
        while line := await reader.readline():
            msg = json.loads(line)
            if "spawned" in msg:
                fut = self._spawned.pop(msg["spawned"], None)
                if fut and not fut.done():
                    fut.set_result(msg["pid"])
            elif "exited" in msg:
                fut = self._exits.setdefault(msg["exited"], loop.create_future())
                if not fut.done():
                    fut.set_result(msg["rc"])
        err = RuntimeError("the fork server ended")
        for fut in [*self._spawned.values(), *self._exits.values()]:
            if not fut.done():
                fut.set_exception(err)
        self._spawned.clear()

    async def spawn(self, request: dict, fds: list[int]) -> int:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:   # a pool used from a new event loop: the old reader task is gone with its loop
            self.close()
            self.proc, self.sock, self._loop = None, None, loop
            self._spawned, self._exits, self._starting = {}, {}, asyncio.Lock()
        async with self._starting:   # one start, however many candidates arrive at once
            if self.proc is None or self.proc.poll() is not None:
                await self._start()
        self._ids += 1
        fut = asyncio.get_running_loop().create_future()
        self._spawned[self._ids] = fut
        socket.send_fds(self.sock, [json.dumps({**request, "id": self._ids}).encode()], fds)
        return await asyncio.wait_for(fut, timeout=120)

    async def wait(self, pid: int) -> int:
        fut = self._exits.setdefault(pid, asyncio.get_running_loop().create_future())
        rc = await fut
        self._exits.pop(pid, None)
        return rc

    def close(self) -> None:
        if self._reader is not None and not self._reader.done():
            with contextlib.suppress(RuntimeError):   # its loop already closed: nothing left to cancel on
                self._reader.cancel()
        if self.sock is not None:
            self.sock.close()
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)   # reaped here: no zombie left for the pool's lifetime


def kill_group(pid: int) -> None:
    """Kill the worker's process group, and the worker itself in case it had not made its group yet."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
