"""The evaluator pool: one subprocess per candidate, several at once; timing holds its GPU's lease.

The parent enforces the timeout by killing the worker's whole process group; a crash, an illegal memory access
or a hang ends that worker only and becomes a result status. Time spent waiting for a lease is not charged to
the candidate's timeout.
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kernelsearch.sandbox.env import scrubbed_env
from kernelsearch.sandbox.limits import apply_limits, die_with_parent

OUTPUT_CAP = 64 * 1024


@dataclass
class PoolSettings:
    mode: str = "cpu"                    # cpu | cuda
    gpus: list[int] = field(default_factory=lambda: [0])
    concurrency: int = 2
    timeout_s: float = 300.0
    trials: int = 2
    timing_iters: int = 50
    compare_compile: bool = False
    aot: bool = True                     # CPU mode: compile for sm_90 ahead of time too
    threads_per_worker: int = 1
    cpu_memory_gb: float = 8.0           # CPU workers: address-space limit (RLIMIT_AS)
    gpu_memory_fraction: float = 0.8     # GPU workers: torch's per-process cap on the device's memory
    # fork workers from a process with torch already imported (~1.6 s saved per candidate); it does not
    # initialise CUDA, so each forked worker starts its own context (16/16 ok on an H200, 2026-12-03)
    fork_server: bool = True
    isolate_network: bool = True         # an empty network namespace where the platform allows (root)
    triton_cache: str | None = None      # default: Triton's own (~/.triton/cache), shared by all workers
    # torch.compile's caches, shared by all workers so the reference is compiled once per machine, not once
    # per candidate (each worker's TMPDIR is its own fresh directory, where inductor would otherwise cache)
    inductor_cache: str = str(Path.home() / ".cache" / "kernelsearch" / "inductor")


def detect_mode(device: str) -> tuple[str, list[int]]:
    """`auto` is cuda when torch sees a GPU, else the CPU interpreter."""
    if device == "cpu":
        return "cpu", [0]
    import torch

    if torch.cuda.is_available():
        return "cuda", list(range(torch.cuda.device_count()))
    if device == "cuda":
        raise RuntimeError("device: cuda was asked for, but torch sees no GPU on this machine")
    return "cpu", [0]


def _limits(timeout_s: float, address_space_bytes: int | None, network_off: bool):
    return lambda: apply_limits(timeout_s, address_space_bytes, network_off)


class _Zygote:
    """The pool's end of the fork server (sandbox/zygote.py): started once, restarted if it dies."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env   # Triton's interpreter switch must be set before triton.language is imported
        self.proc: asyncio.subprocess.Process | None = None
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
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kernelsearch.sandbox.zygote", str(theirs.fileno()), str(rep_w),
                pass_fds=(theirs.fileno(), rep_w), env=scrubbed_env(self.env), start_new_session=True,
                stdin=asyncio.subprocess.DEVNULL, preexec_fn=die_with_parent)
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
            if self.proc is None or self.proc.returncode is not None:
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
        if self.sock is not None:
            self.sock.close()
        if self.proc is not None and self.proc.returncode is None:
            _kill_group(self.proc.pid)


class DeviceLease:
    """One GPU's lease: many `shared` holders (correctness checks) or one `exclusive` holder (a timing), never
    both, so nothing else runs on a device while a candidate is timed on it. A waiting timing goes first: no new
    shared holder is admitted while one waits, and shared holds are short (one shape case each)."""

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    async def acquire(self, kind: str) -> None:
        async with self._cond:
            if kind == "exclusive":
                self._waiting += 1
                try:
                    await self._cond.wait_for(lambda: not self._exclusive and self._shared == 0)
                finally:
                    self._waiting -= 1
                self._exclusive = True
            elif kind == "shared":
                await self._cond.wait_for(lambda: not self._exclusive and self._waiting == 0)
                self._shared += 1
            else:
                raise ValueError(f"lease kind must be shared or exclusive, not {kind!r}")

    def release(self, kind: str) -> None:
        if kind == "exclusive":
            self._exclusive = False
        else:
            self._shared -= 1
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._cond:
            self._cond.notify_all()


class EvaluatorPool:
    def __init__(self, settings: PoolSettings):
        self.s = settings
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._leases = {g: DeviceLease() for g in settings.gpus}   # one timing at a time per device, alone
        self._load = {g: 0 for g in settings.gpus}
        # (gpu, start, end) of each exclusive hold: the timings (and, on a GPU, the stability checks)
        self.lease_log: list[tuple[int, float, float]] = []
        interp = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""} if settings.mode == "cpu" else {}
        self._zygote = _Zygote(interp) if settings.fork_server else None

    @property
    def mode(self) -> str:
        """Where candidates run: "cpu" (the Triton interpreter) or "cuda"."""
        return self.s.mode

    def close(self) -> None:
        """Stop the fork server (workers already running are killed on their own timeouts)."""
        if self._zygote is not None:
            self._zygote.close()

    def _pick_gpu(self) -> int:
        return min(self._load, key=lambda g: (self._load[g], g))

    async def evaluate(self, source: str, problem_ref: dict,
                       may_start: Callable[[], bool] | None = None) -> dict | None:
        """Check and time one candidate. `may_start` is asked once a slot is free: when it says no (the run's
        wall-time budget ran out while this candidate waited), nothing starts and the answer is None."""
        async with self._slots:
            if may_start is not None and not may_start():
                return None
            gpu = self._pick_gpu()
            self._load[gpu] += 1
            try:
                return await self._run(source, problem_ref, gpu)
            finally:
                self._load[gpu] -= 1

    async def _exec(self, workdir: Path, extra: dict, limits: tuple) -> "_Worker":
        """A fresh interpreter per candidate (`fork_server: false`)."""
        r_fd, w_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kernelsearch.sandbox.worker", str(w_fd),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                pass_fds=(w_fd,), start_new_session=True, cwd=workdir, env=scrubbed_env(extra),
                preexec_fn=_limits(*limits))
        finally:
            os.close(w_fd)
        return _Worker(proc.pid, await _pipe_reader(r_fd), proc.stdout,
                       write=proc.stdin.write, wait=proc.wait, close_fds=[])

    async def _fork(self, workdir: Path, extra: dict, limits: tuple) -> "_Worker":
        """A child of the fork server, which has torch and the harness imported already."""
        ctrl_r, ctrl_w = os.pipe()
        out_r, out_w = os.pipe()
        res_r, res_w = os.pipe()
        request = {"cwd": str(workdir), "env": scrubbed_env(extra), "timeout_s": limits[0],
                   "address_space_bytes": limits[1], "network_off": limits[2]}
        try:
            pid = await self._zygote.spawn(request, [ctrl_r, out_w, res_w])
        finally:
            for fd in (ctrl_r, out_w, res_w):
                os.close(fd)
        zygote = self._zygote
        return _Worker(pid, await _pipe_reader(res_r), await _pipe_reader(out_r),
                       write=lambda data: os.write(ctrl_w, data), wait=lambda: zygote.wait(pid),
                       close_fds=[ctrl_w])

    async def _run(self, source: str, problem_ref: dict, gpu: int) -> dict:
        t0 = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="ks-worker-"))
        cand = workdir / "candidate.py"
        cand.write_text(source)
        extra = {"TMPDIR": str(workdir), "OMP_NUM_THREADS": str(self.s.threads_per_worker)}
        if self.s.mode == "cuda":
            extra["CUDA_VISIBLE_DEVICES"] = str(gpu)
        else:
            extra["TRITON_INTERPRET"] = "1"
            extra["CUDA_VISIBLE_DEVICES"] = ""
        extra["TORCHINDUCTOR_CACHE_DIR"] = self.s.inductor_cache
        if self.s.triton_cache:
            extra["TRITON_CACHE_DIR"] = self.s.triton_cache
        request = {
            "mode": self.s.mode, "problem": problem_ref, "candidate_path": str(cand),
            "threads": self.s.threads_per_worker,
            "gpu_memory_fraction": self.s.gpu_memory_fraction,
            "settings": {"mode": self.s.mode, "seed": secrets.randbits(48), "trials": self.s.trials,
                         "timing_iters": self.s.timing_iters, "compare_compile": self.s.compare_compile,
                         "aot": self.s.aot},
        }
        limits = (self.s.timeout_s, int(self.s.cpu_memory_gb * 2**30) if self.s.mode == "cpu" else None,
                  self.s.isolate_network)
        worker = await (self._fork(workdir, extra, limits) if self._zygote else self._exec(workdir, extra, limits))
        reader = worker.results
        captured = bytearray()
        dropped = 0

        async def drain() -> None:
            nonlocal dropped
            while chunk := await worker.stdout.read(65536):
                room = OUTPUT_CAP - len(captured)
                captured.extend(chunk[:max(room, 0)])
                dropped += max(len(chunk) - max(room, 0), 0)

        drainer = asyncio.create_task(drain())
        worker.write((json.dumps(request) + "\n").encode())
        result: dict | None = None
        held: str | None = None   # the kind of lease this worker holds now
        lease_t0 = 0.0
        lease_wait = 0.0
        spent = 0.0            # seconds charged to the candidate (lease waits excluded)
        mark = time.monotonic()

        def release() -> None:
            nonlocal held
            self._leases[gpu].release(held)
            if held == "exclusive":
                self.lease_log.append((gpu, lease_t0, time.monotonic()))
            held = None
        try:
            while True:
                remaining = self.s.timeout_s - spent - (time.monotonic() - mark)
                if remaining <= 0:
                    raise asyncio.TimeoutError
                line = await asyncio.wait_for(reader.readline(), timeout=remaining)
                if not line:
                    break
                msg = json.loads(line)
                if msg["type"] == "lease_request":
                    spent += time.monotonic() - mark
                    kind = msg.get("kind", "exclusive")
                    asked = time.monotonic()
                    await self._leases[gpu].acquire(kind)
                    held = kind
                    now = time.monotonic()
                    lease_wait += now - asked
                    if kind == "exclusive":
                        lease_t0 = now
                    mark = now
                    worker.write(b"grant\n")
                elif msg["type"] == "lease_release" and held is not None:
                    release()
                elif msg["type"] == "result":
                    result = msg["result"]
                    break
        except asyncio.TimeoutError:
            result = {"status": "timeout", "stage": "worker",
                      "reason": f"no result within {self.s.timeout_s:g} s: the worker's process group was killed"}
        except (json.JSONDecodeError, KeyError) as err:
            result = {"status": "crash", "stage": "worker", "reason": f"garbled message from the worker: {err}"}
        finally:
            if held is not None:
                release()
            _kill_group(worker.pid)
            worker.close()
        rc = await worker.wait()
        try:
            await asyncio.wait_for(drainer, timeout=5)
        except asyncio.TimeoutError:
            drainer.cancel()
        shutil.rmtree(workdir, ignore_errors=True)
        output = captured.decode(errors="replace") + (f"\n[... {dropped} more bytes dropped]" if dropped else "")
        if result is None:
            how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
            tail = output.strip().splitlines()[-1:] or [""]
            result = {"status": "crash", "stage": "worker",
                      "reason": f"the worker died ({how}) before reporting: {tail[0][:300]}",
                      "error_text": output[-4000:]}
        result["gpu_index"] = gpu if self.s.mode == "cuda" else None
        result["wall_s"] = time.monotonic() - t0
        result.setdefault("detail", {})["output"] = output[-8000:]
        result["detail"]["lease_wait_s"] = round(lease_wait, 3)
        return result


async def _pipe_reader(fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=1 << 24)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                       os.fdopen(fd, "rb"))
    return reader


class _Worker:
    """One running worker, however it was started: its pid (and process group), the result channel, its
    captured output, the control pipe, and how to learn its exit status."""

    def __init__(self, pid, results, stdout, *, write, wait, close_fds):
        self.pid, self.results, self.stdout = pid, results, stdout
        self.write, self._wait, self._close_fds = write, wait, close_fds

    def close(self) -> None:
        for fd in self._close_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._close_fds = []

    async def wait(self) -> int:
        return await self._wait()


def _kill_group(pid: int) -> None:
    """Kill the worker's process group, and the worker itself in case it had not made its group yet."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
