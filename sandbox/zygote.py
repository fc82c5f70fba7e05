"""The fork server: a process with torch, triton and the harness imported (CUDA never initialised) that forks
one worker per candidate, so a worker starts in milliseconds instead of re-importing torch (~1.6 s).

Started by the pool as `python -m kernelsearch.sandbox.zygote REQ_FD REP_FD` with the scrubbed environment.
Requests arrive on the REQ socket, each a JSON object with three file descriptors attached (SCM_RIGHTS): the
worker's control stdin, its stdout/stderr, its result pipe. The child starts a new session, applies the limits,
replaces its whole environment with the request's, changes to its fresh directory and runs worker.main. Replies
on REP are JSON lines: {"spawned": id, "pid": pid} and, when a worker ends, {"exited": pid, "rc": rc} (rc < 0:
killed by that signal), so the pool learns exit statuses of processes it did not fork itself.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys


def _preload(prime: bool = False) -> None:
    import torch  # noqa: F401
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    import kernelsearch.judge.anticheat  # noqa: F401
    import kernelsearch.judge.harness  # noqa: F401
    import kernelsearch.judge.problem  # noqa: F401
    import kernelsearch.judge.runner  # noqa: F401
    import kernelsearch.sandbox.worker  # noqa: F401

    if prime:   # a GPU pool's (argv "prime"): the meta device's first import (torch._dynamo, about 1 s) made once
        # here, not in every judge; frozen before forking, so no child's collections walk (and copy-on-write) it
        import kernelsearch.judge.agree  # noqa: F401 - the timed outputs' check kernel, defined once here
        from kernelsearch.judge.memory import prime as prime_judge

        prime_judge(freeze=True)


def _child(req: dict, fds: list[int]) -> None:
    from kernelsearch.judge.isolation import make_undumpable
    from kernelsearch.sandbox.limits import apply_limits

    os.setsid()
    apply_limits(req["timeout_s"], req.get("address_space_bytes"), req.get("network_off", False))
    if req.get("undumpable"):
        make_undumpable()
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    if req.get("candidate"):
        from kernelsearch.judge.isolation import confine_candidate

        confine_candidate(None if req.get("uid") is None else int(req["uid"]))
    if req.get("entry") == "runner":
        from kernelsearch.judge.runner import serve_fd

        sock, out = fds
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        serve_fd(sock)   # ends with os._exit
        return
    from kernelsearch.sandbox.worker import main as worker_main

    ctrl, out, res, *runners = fds
    os.dup2(ctrl, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(ctrl)
    os.close(out)
    sys.stdin = os.fdopen(0, "r")
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    worker_main(res, runners)   # ends with os._exit


def serve(req_fd: int, rep_fd: int) -> None:
    req_sock = socket.socket(fileno=req_fd)
    rep = os.fdopen(rep_fd, "w", buffering=1)
    children: set[int] = set()
    while True:
        ready, _, _ = select.select([req_sock], [], [], 0.05)
        while children:   # reap every worker that ended, and tell the pool how
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            rep.write(json.dumps({"exited": pid, "rc": rc}) + "\n")
        if not ready:
            continue
        msg, fds, _, _ = socket.recv_fds(req_sock, 1 << 20, 8)
        if not msg:
            return   # the pool closed its end: nothing more to start
        req = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            try:
                req_sock.close()
                rep.close()
                _child(req, fds)
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        rep.write(json.dumps({"spawned": req["id"], "pid": pid}) + "\n")


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _preload(prime="prime" in sys.argv[3:])
    serve(int(sys.argv[1]), int(sys.argv[2]))


if __name__ == "__main__":
    main()
