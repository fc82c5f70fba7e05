"""The worker pool: scrubbed environment, captured and capped output, timeouts kill the whole group."""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time

import pytest

from kernelsearch.judge.settings import EvalSettings
from kernelsearch.sandbox.env import scrubbed_env
from kernelsearch.sandbox.pool import OUTPUT_CAP, EvaluatorPool, PoolSettings
from tests.helpers import starter_with


def _run(code, **kw):
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=1, evaluation=EvalSettings(trials=1, **kw)))
    return asyncio.run(pool.evaluate(code, {"builtin": "softmax"}))


def test_env_is_an_allow_list():
    env = scrubbed_env(base={"PATH": "/bin", "OPENAI_API_KEY": "sk-x", "HTTPS_PROXY": "http://p",
                             "AWS_SECRET_ACCESS_KEY": "a", "TRITON_CACHE_DIR": "/t", "CUDA_TOKEN": "x"})
    assert env["PATH"] == "/bin" and env["TRITON_CACHE_DIR"] == "/t"
    for k in ("OPENAI_API_KEY", "HTTPS_PROXY", "AWS_SECRET_ACCESS_KEY", "CUDA_TOKEN"):
        assert k not in env


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_candidate_sees_no_secret_and_output_is_captured(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-very-secret")
    code = starter_with("import os\nprint('ENV', sorted(k for k in os.environ if 'KEY' in k), os.getcwd())")
    r = _run(code)
    assert r.status == "ok", r
    out = r.detail["output"]
    assert "ENV []" in out and "sk-ant" not in out
    assert "/ks-worker-" in out   # a fresh working directory


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_a_candidate_that_keeps_the_pools_user_keeps_no_capability_and_the_seed_is_not_in_its_request():
    """Where the runner keeps a root pool's user, root's capabilities would let it read any process's memory (the
    judge's seed: tests/fixtures/cheats/judge/proc_mem_seed.py); it drops them all. The request the pool writes for
    the judge carries no seed: the judge draws it, so the pool's own memory never holds it."""
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=1, evaluation=EvalSettings(trials=1)))
    code = starter_with("print('CAPS', open('/proc/self/status').read().split('CapEff:')[1].split()[0])")
    sent = []
    real_write = os.write

    def spy(fd, data):
        sent.append(bytes(data))
        return real_write(fd, data)

    os.write = spy
    try:
        r = asyncio.run(pool.evaluate(code, {"builtin": "softmax"}))
    finally:
        os.write = real_write
    assert r.status == "ok", r
    requests = [b for b in sent if b.startswith(b'{"mode"')]
    assert requests and all(b'"seed"' not in b for b in requests)
    caps = r.detail["output"].split("CAPS ")[1].split()[0]
    if os.geteuid() == 0 and r.detail["candidate_user"] is None:
        assert int(caps, 16) == 0, f"the candidate's runner kept root's capabilities: {caps}"


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_output_is_capped():
    r = _run(starter_with("print('x' * 100000)"))
    out = r.detail["output"]
    assert "more bytes dropped" in out
    assert len(out) <= OUTPUT_CAP + 200


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_timeout_kills_children_too(tmp_path):
    marker = tmp_path / "alive"
    code = starter_with(f"import subprocess, time\n"
                        f"subprocess.Popen(['sh', '-c', 'sleep 7; touch {marker}'])\ntime.sleep(600)")
    t0 = time.time()
    r = _run(code, timeout_s=5)
    assert r.status == "timeout"
    assert time.time() - t0 < 30
    time.sleep(max(0.0, t0 + 13 - time.time()))   # the child would have touched the marker by now
    assert not marker.exists(), "a child of the candidate outlived the kill"


def test_no_key_in_worker_env_even_if_parent_has_it(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-123")
    assert "MY_SERVICE_TOKEN" in os.environ
    assert "MY_SERVICE_TOKEN" not in scrubbed_env()


def _can_unshare_net() -> bool:
    import subprocess

    return subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_candidate_has_no_network():
    import socket

    import pytest

    if not _can_unshare_net():
        pytest.skip("this machine does not allow network namespaces (needs root); network isolation not enforced")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    code = starter_with("import socket\ntry:\n"
                        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('NET-OPEN')\n"
                        "except OSError as e:\n    print('NET-CLOSED', type(e).__name__)")
    try:
        r = _run(code)
    finally:
        srv.close()
    assert r.status == "ok", r
    assert "NET-CLOSED" in r.detail["output"] and "NET-OPEN" not in r.detail["output"]


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_cpu_workers_are_forked_from_the_fork_server_and_exec_still_works():
    code = starter_with("import os\nprint('PARENT', os.getppid(), 'GROUP', os.getpgrp() == os.getpid())")

    async def go(fork):
        pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=1,
                                          evaluation=EvalSettings(trials=1, aot_compile=False, fork_server=fork)))
        try:
            r = await pool.evaluate(code, {"builtin": "softmax"})
            zygote = pool._zygote.proc.pid if pool._zygote else None
        finally:
            pool.close()
        return r, zygote

    assert PoolSettings().evaluation.fork_server is True   # the default, on the CPU and on GPUs
    r, zygote = asyncio.run(go(True))
    assert r.status == "ok", r
    assert f"PARENT {zygote} GROUP True" in r.detail["output"]   # its own process group, for the kill
    r, zygote = asyncio.run(go(False))
    assert zygote is None and r.status == "ok", r
    assert "GROUP True" in r.detail["output"]


@pytest.mark.parametrize("sig, oom", [(signal.SIGKILL, True), (signal.SIGKILL, False), (signal.SIGTERM, False)])
def test_a_judge_killed_from_outside_is_the_harness_failure_only_where_the_candidate_could_not(
        tmp_path, monkeypatch, sig, oom):
    """The judge killed by SIGKILL while the candidate's runner is alive and before the timeout is harness_error (not
    charged) only where the kernel's OOM killer killed something meanwhile and the candidate's runner has a user of its
    own (it could not have sent the signal: fixture round3/kill_judge did, to escape its verdict). Otherwise, and for
    any other death of the judge, the candidate's crash."""
    from kernelsearch.sandbox import deaths

    counts = iter(range(100, 10_000))
    monkeypatch.setattr(deaths, "oom_kills", (lambda: next(counts)) if oom else (lambda: 7))
    shared = tempfile.mkdtemp()            # the candidate's runner may be a user of its own: a folder open to all
    os.chmod(shared, 0o777)
    marker = os.path.join(shared, "running")
    judges: list[int] = []
    start = EvaluatorPool._start

    async def spy(self, entry, *args, **kw):
        proc = await start(self, entry, *args, **kw)
        if entry == "judge":
            judges.append(proc.pid)
        return proc

    monkeypatch.setattr(EvaluatorPool, "_start", spy)
    code = starter_with(f"import time\nopen({marker!r}, 'w').close()\ntime.sleep(120)")
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=1, evaluation=EvalSettings(trials=1, timeout_s=90)))

    async def go():
        task = asyncio.create_task(pool.evaluate(code, {"builtin": "softmax"}))
        t0 = time.monotonic()
        while not os.path.exists(marker):  # the candidate's call is running: the judge waits on it
            assert time.monotonic() - t0 < 60 and not task.done(), "the candidate never started"
            await asyncio.sleep(0.1)
        os.kill(judges[0], sig)
        return await task

    t0 = time.monotonic()
    try:
        r = asyncio.run(go())
    finally:
        pool.close()
        shutil.rmtree(shared, ignore_errors=True)
    assert time.monotonic() - t0 < 60   # not the timeout
    isolated = r.detail["candidate_user"] is not None
    status = "harness_error" if sig == signal.SIGKILL and oom and isolated else "crash"
    assert r.status == status, r
    if sig == signal.SIGKILL:
        assert "the judge was killed (SIGKILL) while the candidate's process was alive" in r.reason, r.reason
        if status == "crash":
            assert "charged to the candidate" in r.reason, r.reason
            assert ("could signal it" in r.reason) == (not isolated), r.reason
    else:
        assert "the judge died (signal SIGTERM)" in r.reason, r.reason
