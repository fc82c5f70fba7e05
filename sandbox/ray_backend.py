"""Evaluations on a Ray cluster (`evaluation.backend: ray`): one long-lived actor per GPU, each running the local pool.

Every actor holds one GPU (Ray's `num_gpus=1`) and runs an EvaluatorPool (sandbox/pool.py) for that GPU alone, so an
evaluation on a node is the very one it is on this machine: the fork server, the worker subprocess with its
environment allow-list, limits, timeout and process-group kill, the judge and its runners, the GPU's lease (timings
one at a time and alone on the device) and memory gate. Actors, not a Ray task per evaluation: an actor keeps its
fork server warm (a task would start torch again, ~1.6 s) and holds its GPU's lease across the evaluations it runs
side by side; a task holding a whole GPU would run one evaluation per GPU at a time, and tasks sharing a GPU would
have no lease in common (bench/ray_scaling.py measures both).

The controller (this process) stays the only writer of the store: an actor returns a result, the controller stores
it. An actor lost mid-evaluation (its process or its node died) is replaced, and the evaluation tried once more on
another actor; lost again, it is a crash whose reason starts with `node lost`. Keys never reach the cluster: a
cluster started here is started without them, and every actor drops any it was given (`_without_keys`).

`ray` is imported only here, and only when the backend is used (`pip install kernelsearch[ray]`).
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.status import Status
from kernelsearch.sandbox.env import _DENY
from kernelsearch.sandbox.fair import FairSlots
from kernelsearch.sandbox.pool import PoolSettings
from kernelsearch.sandbox.settings import RaySettings

NODE_LOST = "node lost"
OBJECT_STORE_BYTES = 128 * 2**20   # a cluster started here moves only sources and results (kilobytes)


class RayBackendError(RuntimeError):
    """The Ray backend cannot run: ray missing, no cluster to join, no actor placed. The message says why."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayBackendError("evaluation.backend: ray needs the ray package: pip install 'kernelsearch[ray]'") \
            from None
    return ray


def _without_keys(env: dict[str, str], hide: tuple[str, ...] = ()) -> dict[str, str]:
    """`env` less every variable that may hold a key: a name the worker's allow-list denies (KEY, TOKEN, SECRET,
    ...) and the variables the config names (`api_key_env`). Ray's own (RAY_*) stay: its token joins the cluster."""
    return {k: v for k, v in env.items()
            if k.startswith("RAY_") or not (_DENY.search(k) or k in hide)}


def connect(address: str | None, hide: tuple[str, ...] = (), **local) -> bool:
    """Join the cluster at `address`, or, where it is None, start one of this machine alone (`local`: ray.init's
    num_cpus, num_gpus: what a test declares), its processes started without any key of this process's environment.
    Returns whether a connection was made (False: this process was already connected, and that one is used)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    quiet = dict(include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    if address is not None:
        host = address.removeprefix("ray://").rsplit(":", 1)[0]
        try:
            with _loopback(host in ("127.0.0.1", "localhost")):
                ray.init(address=address, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise RayBackendError(f"ray.address: cannot join the cluster at {address!r}: {err}") from None
        return True
    saved = dict(os.environ)
    # loopback: a cluster of this machine alone takes no connection from elsewhere
    clean = {**_without_keys(saved, hide), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    os.environ.clear()
    os.environ.update(clean)   # the head's processes (and so every worker) inherit this environment
    try:
        with _loopback(True):
            ray.init(object_store_memory=OBJECT_STORE_BYTES, **quiet, **local)
    finally:
        # this process's own variables back; what ray.init set (RAY_AUTH_MODE: token) stays, for the drivers it starts
        os.environ.update({k: v for k, v in saved.items() if k not in clean})
        if "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in saved:
            del os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"]
    return True


@contextlib.contextmanager
def _loopback(on: bool):
    """Ray on 127.0.0.1 (a cluster of this machine alone, or joining one): without this, Ray resolves the loopback
    address to the machine's own and cannot reach a head that listens on loopback. Ray reads the switch
    (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0) once, when it is imported, so its constant is set for the call."""
    import ray

    constants = ray._private.ray_constants
    was = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = was and not on
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = was


class Evaluator:
    """The actor's body (made a Ray actor by RayPool): one EvaluatorPool for the GPU Ray gave it, or for CPU work."""

    def __init__(self, device: str, evaluation: dict, slots: int, uses_gpu: bool, hide: tuple[str, ...]) -> None:
        for k in set(os.environ) - set(_without_keys(dict(os.environ), tuple(hide))):
            del os.environ[k]   # a cluster someone started from a shell holding keys: none stays in this process
        import ray

        from kernelsearch.sandbox.pool import EvaluatorPool, detect_mode

        gpus = [int(g) for g in ray.get_gpu_ids()] if uses_gpu else []
        mode = detect_mode(device)[0] if gpus and device != "cpu" else "cpu"
        self.node = ray.get_runtime_context().get_node_id()
        self.gpus = gpus
        self.pool = EvaluatorPool(PoolSettings(mode=mode, gpus=gpus[:1] if mode == "cuda" else [0],
                                               concurrency=slots, evaluation=EvalSettings(**evaluation)))

    def describe(self) -> dict:
        """Where this actor runs, and what a process of it holds: its node, pid, GPUs, mode, and the names of its
        environment (the key test reads them, and the initial environment of /proc, from inside the actor)."""
        try:
            with open(f"/proc/{os.getpid()}/environ", "rb") as f:
                initial = sorted({e.split(b"=", 1)[0].decode(errors="replace") for e in f.read().split(b"\0") if e})
        except OSError:
            initial = None
        return {"node": self.node, "pid": os.getpid(), "gpus": self.gpus, "mode": self.pool.mode,
                "environ": sorted(os.environ), "initial_environ": initial}

    async def evaluate(self, source: str, problem_ref: dict, file_text: str | None, retime: bool = False) -> str:
        ref = _materialize(problem_ref, file_text)
        result = await self.pool.evaluate(source, ref, **({"retime": True} if retime else {}))   # re-timing mode
        result.detail["ray"] = {"node": self.node, "pid": os.getpid(), "gpus": self.gpus}   # where it ran
        return result.to_json()

    async def retime_group(self, sources: list[str], problem_ref: dict, file_text: str | None) -> str:
        """The local pool's re-timing group on this actor's GPU (its fallback to re-timing alone included)."""
        results = await self.pool.retime_group(sources, _materialize(problem_ref, file_text))
        for r in results:
            if r is not None:
                r.detail["ray"] = {"node": self.node, "pid": os.getpid(), "gpus": self.gpus}
        return json.dumps([None if r is None else r.to_json() for r in results])

    def lease_log(self) -> list[tuple[int, float, float]]:
        return list(self.pool.lease_log)

    def close(self) -> None:
        self.pool.close()


def _materialize(problem_ref: dict, file_text: str | None) -> dict:
    """A KernelBench file's problem on a node that lacks the controller's copy (or holds another): written under
    the node's cache, by content, with its own name (the problem's name is the file's)."""
    if file_text is None or "file" not in problem_ref:
        return problem_ref
    path = Path(problem_ref["file"])
    try:
        if path.read_text() == file_text:
            return problem_ref
    except OSError:
        pass
    digest = hashlib.sha256(file_text.encode()).hexdigest()[:16]
    where = Path(os.environ.get("KERNELSEARCH_CACHE", Path.home() / ".cache" / "kernelsearch")) / "problems" / digest
    where.mkdir(parents=True, exist_ok=True)
    copy = where / path.name
    if not copy.exists():
        copy.write_text(file_text)
    return {**problem_ref, "file": str(copy)}


def _why(err: BaseException) -> str:
    """A Ray error in one line: its type and the last line of its text (a traceback's last line is its cause)."""
    lines = [ln.strip() for ln in re.sub(r"\x1b\[[0-9;]*m", "", str(err)).splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[-1][:300] if lines else ''}"


@dataclass(eq=False)   # compared by identity
class _Actor:
    handle: object
    ready: object            # the ObjectRef of describe(): ready once the actor is placed and started
    info: dict = field(default_factory=dict)
    load: int = 0


class RayPool:
    """The pool's interface (evaluate, mode, s, close) over actors of a Ray cluster. `settings` is what the local
    pool would get (its concurrency: evaluations in flight from this process, over all actors, handed out round
    robin over the problems waiting: sandbox/fair.py)."""

    def __init__(self, settings: PoolSettings, ray_settings: RaySettings, device: str = "auto",
                 hide: tuple[str, ...] = ()) -> None:
        ray = _ray()
        self.rs, self.device, self.hide = ray_settings, device, tuple(hide)
        self._owns_connection = connect(ray_settings.address, self.hide)
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0)) if device != "cpu" else 0
        self.uses_gpu = gpus > 0
        if device == "cuda" and not gpus:
            raise RayBackendError("device: cuda was asked for, but the Ray cluster declares no GPU")
        count = gpus or max(1, int(resources.get("CPU", 1) // ray_settings.cpus_per_actor))
        if ray_settings.max_actors:
            count = min(count, ray_settings.max_actors)
        self._evaluation = settings.evaluation.model_dump()
        self._remote = ray.remote(Evaluator)
        self._pending: list[_Actor] = [self._new_actor() for _ in range(count)]
        self._live: list[_Actor] = []
        self.lost: list[dict] = []      # each actor lost: its description and the error
        self._file_texts: dict[str, str | None] = {}
        self._start(ray)
        self.s = PoolSettings(mode=self._live[0].info["mode"], gpus=list(range(count)) if self.uses_gpu else [0],
                              concurrency=settings.concurrency, evaluation=settings.evaluation)
        self._slots = FairSlots(settings.concurrency)   # round robin over the problems waiting (bench --jobs)

    @property
    def mode(self) -> str:
        return self.s.mode

    def _new_actor(self) -> _Actor:
        options = dict(num_gpus=1 if self.uses_gpu else 0, num_cpus=self.rs.cpus_per_actor, max_restarts=0,
                       max_concurrency=1000)   # the pool inside admits evaluations_per_actor at once
        handle = self._remote.options(**options).remote(self.device, self._evaluation, self.rs.evaluations_per_actor,
                                                         self.uses_gpu, self.hide)
        return _Actor(handle, handle.describe.remote())

    def _start(self, ray) -> None:
        """Wait for the first actor (up to start_timeout_s), then briefly for the others; the rest join when placed.
        Every actor must see the same device (all cuda or all the interpreter)."""
        refs = [a.ready for a in self._pending]
        ready, _ = ray.wait(refs, num_returns=1, timeout=self.rs.start_timeout_s)
        if not ready:
            self.close()
            raise RayBackendError(f"ray: no actor was placed within {self.rs.start_timeout_s:g} s (ray.start_timeout_s)"
                                  f"; the cluster's resources now: {ray.available_resources()}")
        ray.wait(refs, num_returns=len(refs), timeout=10)
        self._admit(ray)
        if not self._live:   # the first placed died starting (a node without kernelsearch, torch failing there)
            self.close()
            raise RayBackendError(f"ray: the evaluator actor failed to start: {self.lost[-1]['error']}")
        modes = {a.info["mode"] for a in self._live}
        if len(modes) > 1:
            self.close()
            raise RayBackendError("ray: the actors disagree on the device (some see a GPU through torch, some run the "
                                  "interpreter); give device: cuda or device: cpu")

    def _admit(self, ray) -> None:
        """Actors that have started since the last look join the live ones; one that died starting is dropped."""
        if not self._pending:
            return
        done, _ = ray.wait([a.ready for a in self._pending], num_returns=len(self._pending), timeout=0)
        done = set(done)
        for a in [a for a in self._pending if a.ready in done]:
            self._pending.remove(a)
            try:
                a.info = ray.get(a.ready)
            except ray.exceptions.RayError as err:
                self.lost.append({"error": _why(err)})
                continue
            self._live.append(a)

    async def _pick(self, ray, exclude: list[_Actor]) -> _Actor | None:
        """The least loaded live actor not in `exclude`; none live: wait for a replacement to start."""
        deadline = time.monotonic() + self.rs.start_timeout_s
        while True:
            self._admit(ray)
            free = [a for a in self._live if a not in exclude]
            if free:
                return min(free, key=lambda a: a.load)
            if not self._pending or time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.2)

    def _lose(self, actor: _Actor, err: BaseException) -> None:
        """An actor died or cannot be reached (its process or its node): out of the rotation, killed in case it was
        only unreachable (it would hold its GPU on), and a replacement asked for."""
        if actor in self._live:
            self._live.remove(actor)
            with contextlib.suppress(Exception):
                _ray().kill(actor.handle)
            self.lost.append({**actor.info, "error": _why(err)})
            self._pending.append(self._new_actor())

    def _file_text(self, problem_ref: dict) -> str | None:
        path = problem_ref.get("file")
        if path is None:
            return None
        if path not in self._file_texts:
            self._file_texts[path] = Path(path).read_text()
        return self._file_texts[path]

    async def evaluate(self, source: str, problem_ref: dict,
                       may_start: Callable[[], bool] | None = None, retime: bool = False) -> EvalResult | None:
        """As EvaluatorPool.evaluate, on the least loaded actor of the cluster; an actor lost mid-evaluation: tried
        once more on another, then a crash `node lost`."""
        return await self._on_actor(problem_ref, may_start, EvalResult.from_json,
                                    lambda h, text: h.evaluate.remote(source, problem_ref, text, retime))

    async def retime_group(self, sources: list[str], problem_ref: dict,
                           may_start: Callable[[], bool] | None = None) -> list[EvalResult | None]:
        """As EvaluatorPool.retime_group, on one actor (the group shares its GPU's timing stage). A group whose
        actor was lost, or failed, is re-timed one by one here."""
        if len(sources) < 2:
            return [await self.evaluate(src, problem_ref, may_start, retime=True) for src in sources]

        def parse(payload: str) -> list[EvalResult | None]:
            return [None if r is None else EvalResult.from_json(r) for r in json.loads(payload)]
        got = await self._on_actor(problem_ref, may_start, parse,
                                   lambda h, text: h.retime_group.remote(sources, problem_ref, text))
        if got is None:
            return [None] * len(sources)
        if isinstance(got, EvalResult):   # no group result (node lost, the actor's own failure): each alone
            return list(await asyncio.gather(*(self.evaluate(s, problem_ref, may_start, True) for s in sources)))
        return got

    async def _on_actor(self, problem_ref: dict, may_start: Callable[[], bool] | None, parse, call):
        """`parse(await call(actor handle, problem file text))` on the least loaded live actor, under one of the
        pool's slots; an actor lost: once more on another, then a crash `node lost` (an EvalResult)."""
        ray = _ray()
        lost = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.ObjectLostError, ray.exceptions.OwnerDiedError)
        async with self._slots.hold(json.dumps(problem_ref, sort_keys=True)):
            if may_start is not None and not may_start():
                return None
            text = self._file_text(problem_ref)
            tried: list[_Actor] = []
            errors: list[str] = []
            for _ in range(2):
                actor = await self._pick(ray, tried)
                if actor is None:
                    break
                tried.append(actor)
                actor.load += 1
                try:
                    return parse(await call(actor.handle, text))
                except lost as err:
                    self._lose(actor, err)
                    errors.append(f"{type(err).__name__} on node {actor.info.get('node', '?')[:12]}")
                except ray.exceptions.RayError as err:   # the actor's own code failed: the harness's, not the kernel's
                    return EvalResult.failure(Status.harness_error, f"ray: {type(err).__name__}: {str(err)[:500]}",
                                              stage="worker")
                finally:
                    actor.load -= 1
            why = "; ".join(errors) or "no actor left to run it"
            return EvalResult.failure(Status.crash, f"{NODE_LOST}: the evaluation's actor died twice ({why})"
                                      if len(errors) > 1 else f"{NODE_LOST}: {why}", stage="worker")

    def describe(self) -> list[dict]:
        """The live actors: node, pid, GPUs, mode (what `kernelsearch` prints of a cluster; the tests read it)."""
        self._admit(_ray())
        return [dict(a.info) for a in self._live]

    def lease_log(self) -> list[tuple[str, int, float, float]]:
        """(node, GPU, start, end) of every timing's exclusive hold, over all live actors."""
        ray = _ray()
        out = []
        for a, log in zip(self._live, ray.get([a.handle.lease_log.remote() for a in self._live])):
            out += [(a.info["node"], a.info["gpus"][0] if a.info["gpus"] else -1, t0, t1) for _, t0, t1 in log]
        return out

    def close(self) -> None:
        """Kill this pool's actors (their fork servers and workers die with them); a cluster started here stops."""
        ray = _ray()
        for a in [*self._live, *self._pending]:
            with contextlib.suppress(Exception):   # already gone
                ray.kill(a.handle)
        self._live, self._pending = [], []
        if self._owns_connection and ray.is_initialized():
            ray.shutdown()
