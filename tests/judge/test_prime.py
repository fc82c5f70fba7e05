"""The judge's one-time host work comes before its first lease (judge/memory.prime): on an H100 the longest shared
hold of an evaluation (2-6 s, the hold every timing waiting for the device drains) was a case's first trial, whose
plan's first meta-device operation imported torch's decompositions. Run in a fresh interpreter: the import is what
is measured, and this test process has done it long ago."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import contextlib, gc, json, os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    from kernelsearch.families import load_problem
    from kernelsearch.judge.harness import evaluate
    from kernelsearch.judge.memory import prime
    from kernelsearch.judge.settings import EvalSettings
    from kernelsearch.families.softmax import STARTER

    seen = {"before": "torch._dynamo" in sys.modules, "at_first_lease": None}

    @contextlib.contextmanager
    def lease(kind):
        if seen["at_first_lease"] is None:
            seen["at_first_lease"] = "torch._dynamo" in sys.modules
        yield

    r = evaluate(load_problem("softmax"), STARTER, EvalSettings(trials=1, timing_iters=2, aot_compile=False),
                 mode="cpu", lease=lease)
    seen["status"] = r.status.value
    seen["prime_lap"] = "in_prime" in r.detail["stage_s"]
    frozen = gc.get_freeze_count()
    prime(freeze=True)
    seen["frozen"] = [frozen, gc.get_freeze_count()]
    print(json.dumps(seen))
""")


def test_the_meta_path_is_imported_before_the_first_lease_and_the_worker_freezes_its_imports():
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    assert seen["status"] == "ok", seen
    assert seen["before"] is False, "the judge's imports already pull in the meta path: the probe measures nothing"
    assert seen["at_first_lease"] is True, "the meta device's first import came under a lease"
    assert seen["prime_lap"]
    before, after = seen["frozen"]
    assert before == 0 and after > 1000, seen["frozen"]


def test_a_gpu_pools_fork_server_primes_before_forking_and_a_cpu_pools_does_not():
    """sandbox/zygote.py: `prime` on its command line (a GPU pool's) imports the meta path and freezes, so no judge
    forked from it pays either; a CPU pool's leaves it to each judge (tests start many pools: 1 s each)."""
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

    code = ("import gc, sys; import kernelsearch.sandbox.zygote as z; z._preload(prime={}); "
            "print('torch._dynamo' in sys.modules, gc.get_freeze_count() > 0)")
    seen = []
    for prime in (True, False):
        p = subprocess.run([sys.executable, "-c", code.format(prime)], capture_output=True, text=True, cwd=ROOT,
                           timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        seen.append(p.stdout.split()[-2:])
    assert seen == [["True", "True"], ["False", "False"]]
    pools = [EvaluatorPool(PoolSettings(mode=m, gpus=[0], gpu_memory_mb=1000)) for m in ("cuda", "cpu")]
    try:   # closed: a GPU pool's Triton seed folder (sandbox/triton_seed.py) is removed with it
        assert [p._zygote.prime for p in pools] == [True, False]
    finally:
        for p in pools:
            p.close()
