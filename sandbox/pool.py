"""The evaluator pool: one subprocess per candidate, several at once; timing holds its GPU's lease.

The parent enforces the timeout by killing the worker's whole process group; a crash, an illegal memory access
or a hang ends that worker only and becomes a result status. Time spent waiting for a lease is not charged to
the candidate's timeout.
"""
from __future__ import annotations

import asyncio
import json
import os
import resource
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelsearch.sandbox.env import scrubbed_env

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
    def apply() -> None:
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
    return apply


class EvaluatorPool:
    def __init__(self, settings: PoolSettings):
        self.s = settings
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._leases = {g: asyncio.Lock() for g in settings.gpus}   # one timing at a time per device
        self._load = {g: 0 for g in settings.gpus}
        self.lease_log: list[tuple[int, float, float]] = []          # (gpu, start, end) of each timing

    def _pick_gpu(self) -> int:
        return min(self._load, key=lambda g: (self._load[g], g))

    async def evaluate(self, source: str, problem_ref: dict) -> dict:
        async with self._slots:
            gpu = self._pick_gpu()
            self._load[gpu] += 1
            try:
                return await self._run(source, problem_ref, gpu)
            finally:
                self._load[gpu] -= 1

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
        r_fd, w_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kernelsearch.sandbox.worker", str(w_fd),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                pass_fds=(w_fd,), start_new_session=True, cwd=workdir, env=scrubbed_env(extra),
                preexec_fn=_limits(self.s.timeout_s,
                                   int(self.s.cpu_memory_gb * 2**30) if self.s.mode == "cpu" else None,
                                   self.s.isolate_network))
        finally:
            os.close(w_fd)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 24)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                    os.fdopen(r_fd, "rb"))
        captured = bytearray()
        dropped = 0

        async def drain() -> None:
            nonlocal dropped
            while chunk := await proc.stdout.read(65536):
                room = OUTPUT_CAP - len(captured)
                captured.extend(chunk[:max(room, 0)])
                dropped += max(len(chunk) - max(room, 0), 0)

        drainer = asyncio.create_task(drain())
        proc.stdin.write((json.dumps(request) + "\n").encode())
        await proc.stdin.drain()
        result: dict | None = None
        held: asyncio.Lock | None = None
        lease_t0 = 0.0
        spent = 0.0            # seconds charged to the candidate (lease waits excluded)
        mark = time.monotonic()
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
                    held = self._leases[gpu]
                    await held.acquire()
                    lease_t0 = time.monotonic()
                    mark = lease_t0
                    proc.stdin.write(b"grant\n")
                    await proc.stdin.drain()
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
                held.release()
                self.lease_log.append((gpu, lease_t0, time.monotonic()))
            _kill_group(proc.pid)
            transport.close()
        rc = await proc.wait()
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
        return result


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def settings_dict(s: PoolSettings) -> dict:
    return asdict(s)
