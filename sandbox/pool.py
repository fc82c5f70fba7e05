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

from kernelsearch.judge.isolation import confine_candidate, kill_strays
from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.status import Status
from kernelsearch.sandbox import deaths
from kernelsearch.sandbox.admission import DeviceLease, MemoryGate, gate_capacity, gpu_memory_bytes
from kernelsearch.sandbox.env import scrubbed_env
from kernelsearch.sandbox.forkserver import Zygote
from kernelsearch.sandbox.forkserver import kill_group as _kill_group
from kernelsearch.sandbox.groups import FirstGroups, Waiting, split_group
from kernelsearch.sandbox.limits import apply_limits, device_nodes_open, python_open_to_others
from kernelsearch.sandbox.triton_seed import TritonSeed

OUTPUT_CAP = 64 * 1024


@dataclass
class PoolSettings:
    """What only the pool knows (device mode, GPUs, how many at once, caches); the evaluation's own settings are
    one EvalSettings, passed unchanged to every judge."""
    mode: str = "cpu"                    # cpu | cuda
    gpus: list[int] = field(default_factory=lambda: [0])
    concurrency: int = 2
    gpu_memory_mb: float | None = None   # the GPU's memory for the admission gate (default: nvidia-smi's total)
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    threads_per_worker: int = 1
    triton_cache: str | None = None      # default: Triton's own (~/.triton/cache), shared by all runners
    # torch.compile's caches, shared by all processes so the reference is compiled once per machine, not once
    # per candidate (each evaluation's TMPDIR is its own fresh directory, where inductor would otherwise cache)
    inductor_cache: str = str(Path.home() / ".cache" / "kernelsearch" / "inductor")

    @property
    def timeout_s(self) -> float:
        return self.evaluation.timeout_s


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


def _limits(timeout_s: float, address_space_bytes: int | None, network_off: bool, uid: int | None = None,
            candidate: bool = False):
    def apply() -> None:
        apply_limits(timeout_s, address_space_bytes, network_off)
        if candidate:
            confine_candidate(uid)
    return apply


class EvaluatorPool(FirstGroups):
    def __init__(self, settings: PoolSettings):
        self.s = settings
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._busy = 0   # slots taken
        self._waiting: dict[str, list[Waiting]] = {}   # first evaluations waiting for a slot, by problem
        # one timing at a time per device, alone; the early drain on a GPU only: on the CPU a timing stage's shared
        # part is interpreter seconds, during which the other evaluations' checks would wait
        self._leases = {g: DeviceLease(early_drain=None if settings.mode == "cuda" else False) for g in settings.gpus}
        self._load = {g: 0 for g in settings.gpus}
        self._gates: dict[int, MemoryGate] = {}
        self._reserve = 0   # the gates' bytes kept aside for a timing stage (sandbox/admission.py gate_capacity)
        self._footprints: dict[str, int] = {}
        if settings.mode == "cuda":
            for g in settings.gpus:
                total = settings.gpu_memory_mb * 2**20 if settings.gpu_memory_mb else gpu_memory_bytes(g)
                if total:
                    capacity, self._reserve = gate_capacity(total, 3 if settings.evaluation.compare_compile else 2)
                    self._gates[g] = MemoryGate(capacity)
        # (gpu, start, end) of each exclusive hold: the timings (and, on a GPU, the stability checks)
        self.lease_log: list[tuple[int, float, float]] = []
        self.timing_log: list[tuple[int, float, float]] = []   # the `timing` holds (a device's one timing stage)
        interp = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""} if settings.mode == "cpu" else {}
        # on the CPU the priming (1 s a fork server) is left to each judge: tests start many pools
        self._zygote = Zygote(interp, prime=settings.mode == "cuda") if settings.evaluation.fork_server else None
        self._isolates: bool | None = None
        # Triton's CUDA utilities built once, copied into each candidate runner's fresh cache (sandbox/triton_seed.py;
        # KS_TRITON_SEED=0: each runner builds its own, the old way, for a comparison)
        self._seed = TritonSeed() if settings.mode == "cuda" and os.environ.get("KS_TRITON_SEED") != "0" else None

    @property
    def mode(self) -> str:
        """Where candidates run: "cpu" (the Triton interpreter) or "cuda"."""
        return self.s.mode

    def close(self) -> None:
        """Stop the fork server (workers already running are killed on their own timeouts)."""
        if self._zygote is not None:
            self._zygote.close()
        if self._seed is not None:
            self._seed.close()

    def _pick_gpu(self) -> int:
        return min(self._load, key=lambda g: (self._load[g], g))

    async def evaluate(self, source: str, problem_ref: dict,
                       may_start: Callable[[], bool] | None = None, retime: bool = False) -> EvalResult | None:
        """Check and time one candidate. `may_start` is asked once a slot is free: when it says no (the run's
        wall-time budget ran out while this candidate waited), nothing starts and the answer is None. `retime`: a
        kernel judged correct before, timed again (EvalSettings.retime: the timed case's check, then the clock).
        With EvalSettings.group_first over 1, a first evaluation may be judged in a group (sandbox/groups.py)."""
        if not retime and self.s.evaluation.group_first > 1:
            return await self._first_grouped(source, problem_ref, may_start)
        return await self._admitted([source], problem_ref, may_start, retime)

    async def retime_group(self, sources: list[str], problem_ref: dict,
                           may_start: Callable[[], bool] | None = None) -> list[EvalResult | None]:
        """Re-time kernels judged correct before side by side, in one evaluation and one timing stage
        (judge/group.py): one result per source (None where the wall-time budget stopped it from starting). A
        source the group did not time (the group failed, or its own roofline check did) is re-timed alone, so
        its result is always its own. A group whose estimate (a side a candidate) would not fit a GPU's memory gate
        is split into groups that do (down to one: re-timed alone)."""
        if len(sources) < 2:
            return [await self.evaluate(src, problem_ref, may_start, retime=True) for src in sources]
        size = await self._fitting(problem_ref, len(sources))
        if size < len(sources):
            parts = await asyncio.gather(*(self.retime_group(sources[i:i + size], problem_ref, may_start)
                                           for i in range(0, len(sources), size)))
            return [r for part in parts for r in part]
        joint = await self._admitted(sources, problem_ref, may_start, True)
        results = split_group(joint, len(sources))
        alone = [i for i, r in enumerate(results) if r is None or r.status != Status.ok]
        if joint is not None:
            redone = await asyncio.gather(*(self.evaluate(sources[i], problem_ref, may_start, True) for i in alone))
            for i, r in zip(alone, redone):
                results[i] = r
        return results

    async def _admitted(self, sources: list[str], problem_ref: dict, may_start: Callable[[], bool] | None,
                        retime: bool) -> EvalResult | None:
        """One evaluation (of a candidate, or of a group) once a slot and its memory are free."""
        async with self._slots:
            self._busy += 1
            try:
                return await self._in_slot(sources, problem_ref, may_start, retime)
            finally:
                self._busy -= 1

    async def _in_slot(self, sources: list[str], problem_ref: dict, may_start: Callable[[], bool] | None,
                       retime: bool) -> EvalResult | None:
        """One evaluation in a slot already held, once its memory is free."""
        if may_start is not None and not may_start():
            return None
        gpu = self._pick_gpu()
        self._load[gpu] += 1
        try:
            gate = self._gates.get(gpu)
            if gate is None:
                return await self._run(sources, problem_ref, gpu, retime)
            async with gate.hold(await self._footprint(problem_ref, len(sources))):
                if may_start is not None and not may_start():
                    return None
                return await self._run(sources, problem_ref, gpu, retime)
        finally:
            self._load[gpu] -= 1

    async def _fitting(self, problem_ref: dict, size: int) -> int:
        """The largest group of at most `size` candidates whose estimate fits every GPU's memory gate (at least 1)."""
        capacity = min((g.capacity for g in self._gates.values()), default=None)
        while size > 1 and capacity is not None and await self._footprint(problem_ref, size) > capacity:
            size -= 1
        return size

    async def _footprint(self, problem_ref: dict, candidates: int = 1) -> int:
        key = json.dumps([problem_ref, candidates], sort_keys=True)
        if key not in self._footprints:
            from kernelsearch.judge.memory import footprint_bytes

            # each candidate and the eager reference a side; torch.compile's reference a further one
            sides = candidates + (2 if self.s.evaluation.compare_compile else 1)
            self._footprints[key] = await asyncio.to_thread(footprint_bytes, problem_ref, sides, self._reserve)
        return self._footprints[key]

    def _candidate_uid(self) -> int | None:
        """The user a candidate's runner becomes: a fresh number per evaluation (so two candidates cannot read each
        other's directories either), when the pool runs as root and, on a GPU, the device nodes are open to every
        user; None otherwise (the runner then keeps the pool's user: docs/anticheat.md)."""
        if not self.isolates_candidates:
            return None
        return 100_000 + secrets.randbelow(900_000)

    @property
    def isolates_candidates(self) -> bool:
        """Whether candidates' runners get users of their own here: the pool runs as root, another user can run
        this Python and its packages, and, on a GPU, use the device nodes."""
        if self._isolates is None:
            self._isolates = (os.geteuid() == 0 and python_open_to_others()
                              and (self.s.mode != "cuda" or device_nodes_open()))
        return self._isolates

    # -- starting processes ---------------------------------------------------------------------------------
    async def _start(self, entry: str, workdir: Path, extra: dict, limits: tuple, fds: list[int],
                     uid: int | None = None, candidate: bool = False) -> "_Proc":
        """Start one process of an evaluation: the judge (`entry` judge: fds are its control pipe's read end, its
        output, its result pipe and its runners' sockets) or a runner (fds: its socket and its output). Forked
        from the fork server, or a fresh interpreter when `fork_server` is off."""
        if self._zygote is not None:
            req = {"entry": entry, "cwd": str(workdir), "env": scrubbed_env(extra), "timeout_s": limits[0],
                   "address_space_bytes": limits[1], "network_off": limits[2], "undumpable": entry == "judge",
                   "uid": uid, "candidate": candidate}
            pid = await self._zygote.spawn(req, fds)
            zygote = self._zygote
            return _Proc(pid, lambda: zygote.wait(pid))
        module = "kernelsearch.sandbox.worker" if entry == "judge" else "kernelsearch.judge.runner"
        if entry == "judge":
            ctrl, out, res, *socks = fds
            args, stdin, passed = [str(res), *map(str, socks)], ctrl, (res, *socks)
        else:
            sock, out = fds
            args, stdin, passed = [str(sock)], asyncio.subprocess.DEVNULL, (sock,)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, *args, stdin=stdin, stdout=out, stderr=out, pass_fds=passed,
            start_new_session=True, cwd=workdir, env=scrubbed_env(extra), preexec_fn=_limits(*limits, uid, candidate))
        return _Proc(proc.pid, proc.wait)

    def _workspace(self, sources: list[str], gpu: int) -> tuple[Path, list[tuple[Path, int | None, dict]], dict]:
        """A fresh directory for the evaluation and, inside it, one for each candidate's runner (its cwd, TMPDIR,
        HOME and caches, owned by the runner's own user where it has one: a re-timing group's candidates each
        their own); the judge's environment and, with each runner's directory and user, each candidate's."""
        workdir = Path(tempfile.mkdtemp(prefix="ks-worker-"))
        cands = []
        for i, source in enumerate(sources):
            uid = self._candidate_uid()
            rundir = workdir / ("runner" if i == 0 else f"runner{i}")
            rundir.mkdir(mode=0o700)
            (rundir / "candidate.py").write_text(source)
            if self._seed is not None:
                self._seed.copy_into(rundir / ".t", uid)
            if uid is not None:   # a user of its own: no access to the store, other evaluations, the judge's memory
                os.chmod(workdir, 0o711)
                for path in (rundir, rundir / "candidate.py"):
                    os.chown(path, uid, uid)
            cands.append((rundir, uid))
        extra = {"TMPDIR": str(workdir), "OMP_NUM_THREADS": str(self.s.threads_per_worker),
                 "TORCHINDUCTOR_CACHE_DIR": self.s.inductor_cache}
        if self.s.mode == "cuda":
            extra["CUDA_VISIBLE_DEVICES"] = str(gpu)
        else:
            extra.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
        if self.s.triton_cache:
            extra["TRITON_CACHE_DIR"] = self.s.triton_cache
        return workdir, [(rundir, uid, {**extra, "TMPDIR": str(rundir), "HOME": str(rundir),
                                        "TRITON_CACHE_DIR": str(rundir / ".t"),
                                        "TORCHINDUCTOR_CACHE_DIR": str(rundir / ".inductor")})
                         for rundir, uid in cands], extra

    async def _spawn_all(self, workdir: Path, cands: list[tuple[Path, int | None, dict]], extra: dict,
                         request: dict, out_w: int, ctrl_r: int, res_w: int) -> list["_Proc"]:
        """The runners (each candidate's, the reference's, a second reference's for torch.compile), then the judge,
        connected to each runner by a socket; the judge is told the runners' pids (it freezes the candidates')."""
        ev = self.s.evaluation
        limits = (ev.timeout_s, int(ev.cpu_memory_gb * 2**30) if self.s.mode == "cpu" else None, ev.isolate_network)
        roles = ["candidate"] * len(cands) + ["reference"] * (2 if ev.compare_compile and self.s.mode == "cuda" else 1)
        procs: list[_Proc] = []
        ours: list[socket.socket] = []
        try:
            for i, role in enumerate(roles):
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                ours.append(a)
                mine = role == "candidate"
                rundir, uid, cand_env = cands[i] if mine else (workdir, None, extra)
                try:
                    procs.append(await self._start("runner", rundir, cand_env, limits, [b.fileno(), out_w], uid=uid,
                                                   candidate=mine))
                finally:
                    b.close()
            request["runners"] = [{"role": r, "pid": p.pid} for r, p in zip(roles, procs)]
            users = [{"uid": uid, "home": str(rundir)} if uid is not None else None for rundir, uid, _ in cands]
            request["candidate_user"] = users[0]
            if len(cands) > 1:   # a group (judge/group.py)
                request["group"] = [{"candidate_path": str(rundir / "candidate.py"), "candidate_user": user}
                                    for (rundir, _, _), user in zip(cands, users)]
            # a group's judge checks each candidate and times them all: its limits and timeout scale with them
            procs.append(await self._start("judge", workdir, extra, (ev.timeout_s * len(cands), limits[1], False),
                                           [ctrl_r, out_w, res_w, *[a.fileno() for a in ours]]))
        except BaseException:
            for p in procs:
                _kill_group(p.pid)
            raise
        finally:
            for a in ours:
                a.close()
        return procs

    async def _serve(self, reader: asyncio.StreamReader, ctrl_w: int, gpu: int,
                     size: int = 1) -> tuple[EvalResult | None, float]:
        """The judge's side of the lease protocol, until its result: (the result or None, seconds waited for
        leases). Time waiting for a lease is not charged to the candidate's timeout."""
        timeout_s = self.s.evaluation.timeout_s * size   # a group of `size`: each checked, all timed
        held: list[str] = []   # the kinds of lease the judge holds now (`timing` around `shared` or `exclusive`)
        lease_wait = spent = 0.0
        mark = time.monotonic()
        logs = {"exclusive": self.lease_log, "timing": self.timing_log}   # the holds logged, by kind
        since: dict[str, float] = {}   # when each logged kind held now was granted

        def release(kind: str | None = None) -> None:
            if kind == "shared" and "prep" in held:
                kind = "prep"
            kind = kind if kind in held else held[-1]
            held.remove(kind)
            self._leases[gpu].release(kind)
            if kind in logs:
                logs[kind].append((gpu, since.pop(kind), time.monotonic()))
        try:
            while True:
                remaining = timeout_s - spent - (time.monotonic() - mark)
                if remaining <= 0:
                    raise asyncio.TimeoutError
                line = await asyncio.wait_for(reader.readline(), timeout=remaining)
                if not line:
                    return None, lease_wait
                msg = json.loads(line)
                if msg["type"] == "lease_request":
                    spent += time.monotonic() - mark
                    kind = msg.get("kind", "exclusive")
                    if kind == "shared" and "timing" in held:
                        kind = "prep"   # the timing stage's own shared part: the device drains beside it
                    asked = time.monotonic()
                    await self._leases[gpu].acquire(kind)
                    held.append(kind)
                    now = time.monotonic()
                    lease_wait += now - asked
                    if kind in logs:
                        since[kind] = now
                    mark = now
                    os.write(ctrl_w, b"grant\n")
                elif msg["type"] == "lease_release" and held:
                    release(msg.get("kind"))
                elif msg["type"] == "result":
                    return EvalResult.from_json(json.dumps(msg["result"])), lease_wait
        except asyncio.TimeoutError:
            return EvalResult.failure(Status.timeout, f"no result within {timeout_s:g} s: the evaluation's "
                                      "processes were killed", stage="worker"), lease_wait
        except (ValueError, KeyError, TypeError) as err:
            return EvalResult.failure(Status.crash, f"garbled message from the judge: {err}",
                                      stage="worker"), lease_wait
        finally:
            while held:
                release()

    async def _run(self, sources: list[str], problem_ref: dict, gpu: int, retime: bool = False) -> EvalResult:
        t0 = time.monotonic()
        workdir, cands, extra = self._workspace(sources, gpu)
        rundir, uid, _ = cands[0]
        # no seed: the judge draws its own (sandbox/worker.py), so no process but the undumpable judge ever holds it
        request = {"mode": self.s.mode, "problem": problem_ref, "candidate_path": str(rundir / "candidate.py"),
                   "settings": {**self.s.evaluation.model_dump(), "retime": retime}}
        out_r, out_w = os.pipe()
        ctrl_r, ctrl_w = os.pipe()
        res_r, res_w = os.pipe()
        marks: list[float] = []   # the evaluation's wall time outside the judge's stages (detail["pool_s"])
        try:
            procs = await self._spawn_all(workdir, cands, extra, request, out_w, ctrl_r, res_w)
        finally:
            for fd in (ctrl_r, out_w, res_w):
                os.close(fd)
        marks.append(time.monotonic())
        # each process's exit, awaited once (the fork server answers one wait per pid)
        exits = [asyncio.ensure_future(p.wait()) for p in procs]
        oom_kills = deaths.oom_kills()
        reader = await _pipe_reader(res_r)
        stdout = await _pipe_reader(out_r)
        captured = bytearray()
        dropped = 0

        async def drain() -> None:
            nonlocal dropped
            while chunk := await stdout.read(65536):
                room = OUTPUT_CAP - len(captured)
                captured.extend(chunk[:max(room, 0)])
                dropped += max(len(chunk) - max(room, 0), 0)

        drainer = asyncio.create_task(drain())
        os.write(ctrl_w, (json.dumps(request) + "\n").encode())
        killed_outside: str | None = None
        judge_killed: str | None = None
        try:
            result, lease_wait = await self._serve(reader, ctrl_w, gpu, len(cands))
            if result is None:   # no result and no timeout: how the judge ended, before the pool kills anything
                killed_outside, judge_killed = await deaths.judge_killed_outside(exits, oom_kills, uid is not None)
        finally:
            # the candidate's processes outside its runner's group first (a daemon in a session of its own, which
            # killing the group misses), found while the runner, their subreaper, still holds them; by user too
            for i, (_, uid_i, _) in enumerate(cands[:len(procs)]):
                kill_strays(procs[i].pid, uid_i)
            for p in procs:
                _kill_group(p.pid)
            for i, (_, uid_i, _) in enumerate(cands[:len(procs)]):
                if uid_i is not None:
                    kill_strays(procs[i].pid, uid_i)
            os.close(ctrl_w)
        marks.append(time.monotonic())
        rc = await exits[-1]
        marks.append(time.monotonic())
        _, late = await asyncio.wait(exits[:-1], timeout=5)
        marks.append(time.monotonic())
        for w in late:
            w.cancel()
        runner_rcs = [None if w in late or w.exception() else w.result() for w in exits[:-1]]
        cand_rc = runner_rcs[0] if runner_rcs else None
        if result is not None and result.reason and "candidate's process died" in result.reason \
                and cand_rc is not None and cand_rc != -signal.SIGKILL:
            # the judge saw its socket close; only the pool learns how the candidate's process ended
            how = f"signal {signal.Signals(-cand_rc).name}" if cand_rc < 0 else f"exit code {cand_rc}"
            result.reason = result.reason.replace("candidate's process died", f"candidate's process died ({how})", 1)
        try:
            await asyncio.wait_for(drainer, timeout=5)
        except asyncio.TimeoutError:
            drainer.cancel()
        shutil.rmtree(workdir, ignore_errors=True)
        marks.append(time.monotonic())
        output = captured.decode(errors="replace") + (f"\n[... {dropped} more bytes dropped]" if dropped else "")
        if result is None and killed_outside:
            result = EvalResult.failure(Status.harness_error, killed_outside, stage="worker",
                                        error_text=output[-4000:])
        elif result is None and judge_killed:
            result = EvalResult.failure(Status.crash, judge_killed, stage="worker", error_text=output[-4000:])
        elif result is None:
            how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
            tail = output.strip().splitlines()[-1:] or [""]
            result = EvalResult.failure(Status.crash, f"the judge died ({how}) before reporting: {tail[0][:300]}",
                                        stage="worker", error_text=output[-4000:])
        result.gpu_index = gpu if self.s.mode == "cuda" else None
        result.wall_s = time.monotonic() - t0
        result.detail["output"] = output[-8000:]
        result.detail["lease_wait_s"] = round(lease_wait, 3)
        # workspace and processes started, the judge's whole run (to its result, its kills), the judge's exit,
        # the runners' exits, the output drained and the workspace removed
        result.detail["pool_s"] = {k: round(b - a, 3) for k, a, b in zip(
            ("start", "judge", "judge_exit", "runners_exit", "cleanup"), [t0, *marks], marks)}
        result.detail["candidate_user"] = uid   # None: the candidate's runner kept the pool's user
        return result


async def _pipe_reader(fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=1 << 24)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                       os.fdopen(fd, "rb"))
    return reader


class _Proc:
    """One process of an evaluation, however it was started: its pid (and process group) and its exit status."""

    def __init__(self, pid: int, wait):
        self.pid, self._wait = pid, wait

    async def wait(self) -> int:
        return await self._wait()
