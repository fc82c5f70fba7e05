"""The judge's process: one evaluation. Started by sandbox/pool.py (forked from the fork server, or as
`python -m kernelsearch.sandbox.worker RESULT_FD RUNNER_FD...`).

It never loads candidate code: the candidate runs in a runner process (judge/runner.py) that the pool started
beside it, sandboxed, and connected to it by a socket (the fds after RESULT_FD, in the order of the request's
`runners`). Channel to the pool: the request arrives as one JSON line on stdin (then replaced by /dev/null);
messages (a lease request, the result) go on the result pipe. The candidate's process has neither: it can reach
the judge only through its socket, whose replies are data (judge/wire.py), never a verdict.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import sys
import time
import traceback


def main(result_fd: int | None = None, runner_fds: list[int] | None = None) -> None:
    from kernelsearch.judge.isolation import make_undumpable

    make_undumpable()   # however it was started: no process of its user can read its memory or ptrace it
    if result_fd is None:
        result_fd, runner_fds = int(sys.argv[1]), [int(a) for a in sys.argv[2:]]
    control = os.fdopen(os.dup(0), "r")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    out = os.fdopen(result_fd, "w")

    def send(msg: dict) -> None:
        out.write(json.dumps(msg, default=str) + "\n")
        out.flush()

    request = json.loads(control.readline())
    t0 = time.perf_counter()
    start_s: dict[str, float] = {}   # the judge's own start, before the harness's clock (detail["judge_start_s"])

    def lap(name: str) -> None:
        nonlocal t0
        start_s[name] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
    if request["mode"] == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"   # before triton defines any kernel

    @contextlib.contextmanager
    def lease(kind: str = "exclusive"):
        send({"type": "lease_request", "kind": kind})
        grant = control.readline().strip()
        if grant != "grant":
            raise RuntimeError(f"lease refused: {grant!r}")
        try:
            yield
        finally:
            send({"type": "lease_release", "kind": kind})

    try:
        import torch

        from kernelsearch.judge.client import RunnerClient
        from kernelsearch.judge.harness import evaluate
        from kernelsearch.judge.memory import prime
        from kernelsearch.judge.problem import load_problem
        from kernelsearch.judge.settings import EvalSettings

        runners = [(r["role"], int(r["pid"]), fd) for r, fd in zip(request["runners"], runner_fds or [])]

        def spawn(role: str) -> RunnerClient:
            """The next runner the pool started for `role` (one candidate, one or two references)."""
            for i, (r, pid, fd) in enumerate(runners):
                if r == role:
                    runners.pop(i)
                    return RunnerClient(socket.socket(fileno=fd), pid, role)
            raise RuntimeError(f"no {role} runner was started for this evaluation")

        torch.set_num_threads(1)
        lap("imports")
        if request["mode"] == "cuda":
            torch.cuda.set_per_process_memory_fraction(0.95, 0)
        lap("cuda_init")
        problem = load_problem(request["problem"])
        lap("problem")
        if request["mode"] == "cuda":   # one evaluation, then exit: its imports frozen out of every collection (on
            prime(freeze=True)          # the CPU the judge primes where it needs to: rejected candidates never do)
        lap("prime")
        device_name = torch.cuda.get_device_name(0) if request["mode"] == "cuda" else None
        group = request.get("group")   # a group (judge/group.py): its results in the first one's detail
        paths = [g["candidate_path"] for g in group] if group else [request["candidate_path"]]
        sources = []
        for path in paths:
            with open(path) as f:
                sources.append(f.read(2 << 20))
        if group:
            from kernelsearch.judge.group import evaluate_group

            results = evaluate_group(problem, sources, EvalSettings(**request["settings"]), mode=request["mode"],
                                     seed=secrets.randbits(48), spawn=spawn, candidate_paths=paths, lease=lease,
                                     device_name=device_name, candidate_users=[g.get("candidate_user") for g in group])
            payload = json.loads(results[0].to_json())
            payload["detail"] = {"group": [json.loads(r.to_json()) for r in results]}
        else:
            result = evaluate(problem, sources[0], EvalSettings(**request["settings"]), mode=request["mode"],
                              seed=secrets.randbits(48), spawn=spawn, candidate_path=paths[0], lease=lease,
                              device_name=device_name, candidate_user=request.get("candidate_user"))
            payload = json.loads(result.to_json())
        payload.setdefault("detail", {})["judge_start_s"] = start_s
    except BaseException as err:  # noqa: BLE001 - a judge failure is a result too, never silence
        try:   # out of memory outside the stages (loading the problem): the harness's, not the candidate's
            from kernelsearch.judge.memory import is_out_of_memory

            status = "harness_error" if is_out_of_memory(err) else "crash"
        except BaseException:  # noqa: BLE001
            status = "crash"
        payload = {"status": status, "stage": "worker", "reason": f"judge error: {type(err).__name__}: {err}",
                   "error_text": traceback.format_exc(limit=-8)}
    send({"type": "result", "result": payload})
    out.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
