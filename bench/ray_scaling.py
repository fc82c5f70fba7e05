"""Evaluations a minute through each backend, and against GPUs and nodes of a Ray cluster (issue 32).

Two measurements, one script:

  overhead  the same N evaluations of one kernel (the softmax starter) one at a time through the local pool, the Ray
            backend (long-lived actors, sandbox/ray_backend.py) and a Ray task per evaluation (what the backend does
            not do: a fresh pool in the task, as a stateless task must). The first evaluation of each is a warm-up
            (fork servers start) and is left out. Each line: the mean seconds per evaluation as the controller waits
            for it, and what Ray adds over the local pool.
  scaling   N evaluations at once on 1, 2, 4, ... actors of the cluster (ray.max_actors), each GPU one actor with
            `--per-actor` evaluations at once: evaluations a minute against actors (GPUs) and the nodes they are on.

On this machine (no GPU) a local cluster declaring `--gpus` GPUs runs the interpreter:
    python bench/ray_scaling.py overhead --gpus 2 -n 8
On a cluster (every node with kernelsearch[ray] installed, `ray start` run on each, RAY_AUTH_MODE=token and the
token where Ray's docs say):
    python bench/ray_scaling.py scaling --address auto -n 256 --per-actor 2
Multi-GPU and multi-node runs have not been made (no such machine was lent); the script is ready for one.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time


def _settings(args):
    from kernelsearch.judge.settings import EvalSettings

    return EvalSettings(timeout_s=args.timeout, trials=1)


def _problem(args):
    from kernelsearch.families import load_problem
    from kernelsearch.families.softmax import STARTER

    return load_problem(args.problem).ref, (open(args.kernel).read() if args.kernel else STARTER)


async def _alternating(pools: dict, source, ref, n) -> dict[str, list[tuple[float, float]]]:
    """n evaluations through each pool, one at a time, taking turns (a load that drifts weighs on all alike), after
    one warm-up each: (seconds the controller waited, the pool's own wall_s) of each."""
    out = {name: [] for name in pools}
    for i in range(n + 1):
        for name, pool in pools.items():
            t0 = time.monotonic()
            r = await pool.evaluate(source, ref)
            assert r.status.value == "ok", r.reason
            if i:
                out[name].append((time.monotonic() - t0, r.wall_s))
    return out


def _ray_task_times(args, source, ref, n) -> list[float]:
    """A Ray task per evaluation: the task starts its own pool (and so its fork server), evaluates, and closes it."""
    import ray

    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings, detect_mode

    evaluation = _settings(args).model_dump()

    def task(source: str, ref: dict) -> str:
        from kernelsearch.judge.settings import EvalSettings

        gpus = [int(g) for g in ray.get_gpu_ids()]
        mode = detect_mode(args.device)[0] if gpus else "cpu"
        pool = EvaluatorPool(PoolSettings(mode=mode, gpus=gpus[:1] if mode == "cuda" else [0], concurrency=1,
                                          evaluation=EvalSettings(**evaluation)))
        try:
            return asyncio.run(pool.evaluate(source, ref)).to_json()
        finally:
            pool.close()

    remote = ray.remote(num_gpus=1 if ray.cluster_resources().get("GPU") else 0, num_cpus=1)(task)
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        out = json.loads(ray.get(remote.remote(source, ref)))
        times.append((time.monotonic() - t0, out["wall_s"]))
        assert out["status"] == "ok", out.get("reason")
    return times


def overhead(args) -> None:
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings, detect_mode
    from kernelsearch.sandbox.ray_backend import RayPool, connect
    from kernelsearch.sandbox.settings import RaySettings

    ref, source = _problem(args)
    mode, gpus = detect_mode(args.device)
    local = EvaluatorPool(PoolSettings(mode=mode, gpus=gpus[:1], concurrency=1, evaluation=_settings(args)))
    connect(args.address, **({"num_cpus": args.cpus, "num_gpus": args.gpus} if args.address is None else {}))
    pool = RayPool(PoolSettings(concurrency=1, evaluation=_settings(args)), RaySettings(max_actors=1),
                   device=args.device)
    try:
        rows = asyncio.run(_alternating({"local pool": local, "ray actor": pool}, source, ref, args.n))
    finally:
        local.close()
        pool.close()
    if not args.skip_tasks:
        rows["ray task"] = _ray_task_times(args, source, ref, args.n)
    base = statistics.mean(w for w, _ in rows["local pool"])
    print(f"{args.n} evaluations one at a time of {args.problem} ({mode}), taking turns, first left out; waited: "
          "what the controller waited; outside: waited less the pool's own wall_s (dispatch, transfer)")
    for name, times in rows.items():
        waited = statistics.mean(w for w, _ in times)
        outside = statistics.mean(w - own for w, own in times)
        print(f"  {name:10s} waited {waited:6.3f} s/evaluation (median {statistics.median(w for w, _ in times):.3f})"
              f"  {100 * (waited - base) / base:+6.1f} % vs the local pool;  outside the pool {1000 * outside:7.1f} ms"
              f" = {100 * outside / base:5.2f} % of the local pool's evaluation")


def scaling(args) -> None:
    import ray

    from kernelsearch.sandbox.pool import PoolSettings
    from kernelsearch.sandbox.ray_backend import RayPool, connect
    from kernelsearch.sandbox.settings import RaySettings

    ref, source = _problem(args)
    connect(args.address, **({"num_cpus": args.cpus, "num_gpus": args.gpus} if args.address is None else {}))
    total = int(ray.cluster_resources().get("GPU", 0)) or int(ray.cluster_resources().get("CPU", 1))
    counts = sorted({c for c in (1, 2, 4, 8, 16, 32, 64, 128, total) if c <= total})
    print(f"cluster: {ray.cluster_resources()}")
    for count in counts:
        slots = count * args.per_actor
        pool = RayPool(PoolSettings(concurrency=slots, evaluation=_settings(args)),
                       RaySettings(max_actors=count, evaluations_per_actor=args.per_actor), device=args.device)
        try:
            actors = pool.describe()
            warm = [source] * len(actors) * args.per_actor   # every actor's fork server started before the clock

            async def batch(k):
                return await asyncio.gather(*(pool.evaluate(source, ref) for _ in range(k)))
            asyncio.run(batch(len(warm)))
            t0 = time.monotonic()
            results = asyncio.run(batch(args.n))
            took = time.monotonic() - t0
        finally:
            pool.close()
        ok = sum(r.status.value == "ok" for r in results)
        nodes = len({a["node"] for a in actors})
        print(f"  {len(actors):4d} actors on {nodes} node(s): {args.n} evaluations ({ok} ok) in {took:7.1f} s = "
              f"{60 * args.n / took:7.1f} evaluations/min", flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["overhead", "scaling"])
    p.add_argument("--address", default=None, help="a Ray cluster (auto, ray://host:10001); none: one started here")
    p.add_argument("--gpus", type=int, default=2, help="GPUs a cluster started here declares (none needed)")
    p.add_argument("--cpus", type=int, default=None, help="CPUs a cluster started here declares")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--problem", default="softmax")
    p.add_argument("--kernel", default=None, help="a candidate file (default: the softmax starter)")
    p.add_argument("-n", type=int, default=8, help="evaluations (after the warm-up)")
    p.add_argument("--per-actor", type=int, default=2, help="scaling: evaluations at once on one actor")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--skip-tasks", action="store_true", help="overhead: leave out the task-per-evaluation line")
    args = p.parse_args(argv)
    overhead(args) if args.what == "overhead" else scaling(args)


if __name__ == "__main__":
    sys.exit(main())
