"""The worker: one candidate, one process. Started by sandbox/pool.py as `python -m kernelsearch.sandbox.worker`.

Channel: the request arrives as one JSON line on stdin, which the worker then moves to a private fd and
replaces with /dev/null before any candidate code is loaded. Messages to the parent (a lease request, the
result) go on a pipe whose fd number is in argv[1]; the candidate's prints go to stdout/stderr, which the parent
captures, caps and stores. To time, the worker asks the parent for the lease on its GPU and waits for the grant.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback


def main(result_fd: int | None = None) -> None:
    """Run one evaluation; `result_fd` is the result pipe (argv[1] when started as a module)."""
    result_fd = int(sys.argv[1]) if result_fd is None else result_fd
    control = os.fdopen(os.dup(0), "r")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    out = os.fdopen(result_fd, "w")

    def send(msg: dict) -> None:
        out.write(json.dumps(msg, default=str) + "\n")
        out.flush()

    request = json.loads(control.readline())
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
            send({"type": "lease_release"})

    try:
        import torch

        from kernelsearch.evaluators.harness import Settings, evaluate
        from kernelsearch.evaluators.problem import load_problem

        torch.set_num_threads(int(request.get("threads", 1)))
        if request["mode"] == "cuda":   # a candidate that allocates without end fails alone, not its neighbours
            torch.cuda.set_per_process_memory_fraction(float(request.get("gpu_memory_fraction", 0.8)), 0)
        problem = load_problem(request["problem"])
        device_name = None
        if request["mode"] == "cuda":
            device_name = torch.cuda.get_device_name(0)
        settings = Settings(**request["settings"])
        with open(request["candidate_path"]) as f:
            source = f.read()
        result = evaluate(problem, source, settings, lease=lease, device_name=device_name)
    except BaseException as err:  # noqa: BLE001 - a harness failure is a result too, never silence
        result = {"status": "crash", "stage": "worker", "reason": f"worker error: {type(err).__name__}: {err}",
                  "error_text": traceback.format_exc(limit=-8)}
    send({"type": "result", "result": result})
    out.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)   # skip interpreter teardown: a candidate's atexit or __del__ cannot change anything now


if __name__ == "__main__":
    main()
