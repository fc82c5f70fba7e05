"""evaluation.backend: ray on a local Ray cluster that declares two GPUs (num_gpus=2) while candidates run in Triton's
interpreter: the actors, keys, lost actors, and a search's tree against the local backend's."""
from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from kernelsearch.config import ConfigError, parse_config
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.status import Status
from kernelsearch.sandbox.pool import PoolSettings
from kernelsearch.sandbox.settings import RaySettings
from tests.helpers import ONLINE, cli, write_config

KEY_VALUE = "sk-test-never-on-the-cluster"
NAMED = "MY_LLM_VAR"   # a key variable whose name says nothing: only the config's api_key_env names it
SLOW = "import time\ntime.sleep(8)\n" + ONLINE   # an evaluation long enough to kill its actor in the middle


def test_backend_key_is_checked_and_named():
    base = {"problem": "softmax", "llm": {"provider": "offline"}}
    with pytest.raises(ConfigError, match=r"evaluation\.backend: Input should be 'local' or 'ray'"):
        parse_config({**base, "evaluation": {"backend": "rey"}})
    with pytest.raises(ConfigError, match=r"ray: read only under evaluation\.backend: ray"):
        parse_config({**base, "ray": {"address": "auto"}})
    with pytest.raises(ConfigError, match=r"ray\.evaluations_per_actor"):
        parse_config({**base, "evaluation": {"backend": "ray"}, "ray": {"evaluations_per_actor": 0}})
    cfg = parse_config({**base, "evaluation": {"backend": "ray", "timeout_s": 30}, "ray": {"address": "auto"}})
    assert cfg.ray.address == "auto"
    # the judge is handed its own settings, without the backend (its EvalSettings forbids unknown keys)
    assert type(cfg.evaluation.judge_settings()) is EvalSettings
    assert cfg.evaluation.judge_settings().timeout_s == 30
    # a stored config (every default written out) parses again, under either backend: resume reads it
    local = parse_config(base)
    assert parse_config(local.model_dump(mode="json")).evaluation.backend == "local"
    assert parse_config(cfg.model_dump(mode="json")).ray.address == "auto"


def test_backend_ray_without_ray_installed_says_how_to_get_it(monkeypatch):
    import sys

    from kernelsearch.runner import RunError, pool_for

    monkeypatch.setitem(sys.modules, "ray", None)   # import ray fails, as where it is not installed
    cfg = parse_config({"problem": "softmax", "llm": {"provider": "offline"}, "evaluation": {"backend": "ray"}})
    with pytest.raises(RunError, match=r"backend: ray needs the ray package: pip install 'kernelsearch\[ray\]'"):
        pool_for(cfg)


def test_a_problem_file_the_node_lacks_is_written_there_by_content(tmp_path, monkeypatch):
    from kernelsearch.sandbox.ray_backend import _materialize

    monkeypatch.setenv("KERNELSEARCH_CACHE", str(tmp_path / "cache"))
    text = "import torch\n# a KernelBench problem\n"
    here = tmp_path / "19_ReLU.py"
    here.write_text(text)
    assert _materialize({"file": str(here)}, text) == {"file": str(here)}   # the node has this very file
    for ref in ({"file": "/nowhere/19_ReLU.py"}, {"file": str(here)}):
        if ref["file"] == str(here):
            here.write_text(text + "# edited since\n")   # the node's copy differs from the controller's
        got = Path(_materialize(ref, text)["file"])
        assert got.name == "19_ReLU.py" and got.read_text() == text and got.is_relative_to(tmp_path / "cache")
    assert _materialize({"builtin": "softmax"}, None) == {"builtin": "softmax"}


@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray", reason="the Ray backend's tests need ray: pip install 'kernelsearch[ray]' "
                                            "(make install brings it through the dev extra)")
    from kernelsearch.sandbox.ray_backend import connect

    saved = dict(os.environ)
    os.environ.update({"KS_TEST_API_KEY": KEY_VALUE, NAMED: KEY_VALUE, "KS_TEST_PLAIN": "1"})
    try:
        if ray.is_initialized():
            ray.shutdown()
        assert connect(None, hide=(NAMED,), num_cpus=2, num_gpus=2)
        yield ray
    finally:
        ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)


def _pool(concurrency=2, **ray_over):
    from kernelsearch.sandbox.ray_backend import RayPool

    return _both_live(RayPool(PoolSettings(concurrency=concurrency, evaluation=EvalSettings(timeout_s=60, trials=1)),
                              RaySettings(**ray_over), device="auto", hide=(NAMED,)))


def _both_live(pool):
    """The pool once both GPUs' actors have started (the pool waits for the first; the second may come later)."""
    deadline = time.monotonic() + 120
    while len(pool.describe()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    return pool


def test_no_key_reaches_an_actor(cluster):
    from kernelsearch.runner import pool_for
    from kernelsearch.sandbox.ray_backend import Evaluator, RayPool

    assert os.environ["KS_TEST_API_KEY"] == KEY_VALUE and os.environ[NAMED] == KEY_VALUE   # the controller holds both
    cfg = parse_config({"problem": "softmax", "device": "auto", "evaluation": {"backend": "ray", "timeout_s": 60},
                        "llm": {"provider": "anthropic", "model": "m", "api_key_env": NAMED}})
    pool = pool_for(cfg)   # the config's backend, told which variable holds the config's key
    try:
        assert isinstance(pool, RayPool) and pool.hide == (NAMED,)
        actors = _both_live(pool).describe()
        assert sorted(g for a in actors for g in a["gpus"]) == [0, 1]   # one actor per declared GPU
        for a in actors:   # read from inside each actor: its environment now, and the one its process started with
            for names in (a["environ"], a["initial_environ"]):
                assert "KS_TEST_API_KEY" not in names and NAMED not in names
                assert "KS_TEST_PLAIN" in names   # the controller's other variables do reach it: the check can fail
    finally:
        pool.close()
    # a cluster whose processes hold keys (started from a shell that had them): the actor drops them itself
    given = {"KS_OTHER_API_KEY": KEY_VALUE, NAMED: KEY_VALUE, "KS_TEST_OTHER": "1"}
    actor = cluster.remote(Evaluator).options(num_cpus=0, runtime_env={"env_vars": given}).remote(
        "cpu", EvalSettings().model_dump(), 1, False, (NAMED,))
    try:
        seen = cluster.get(actor.describe.remote())
        assert {"KS_OTHER_API_KEY", NAMED} <= set(seen["initial_environ"])   # it started with them
        assert "KS_OTHER_API_KEY" not in seen["environ"] and NAMED not in seen["environ"]
        assert "KS_TEST_OTHER" in seen["environ"]
    finally:
        cluster.kill(actor)


def test_device_cpu_takes_cpu_only_actors_sized_by_cpus_per_actor(cluster):
    from kernelsearch.sandbox.ray_backend import RayPool

    for cpus, count in ((1.0, 2), (2.0, 1)):   # the cluster declares 2 CPUs
        pool = RayPool(PoolSettings(concurrency=2, evaluation=EvalSettings(timeout_s=60)),
                       RaySettings(cpus_per_actor=cpus), device="cpu")
        try:
            deadline = time.monotonic() + 120
            while len(pool.describe()) < count and time.monotonic() < deadline:
                time.sleep(0.2)
            actors = pool.describe()
            assert len(actors) == count and pool.mode == "cpu"
            assert all(a["gpus"] == [] and a["mode"] == "cpu" for a in actors)   # no GPU taken for CPU work
        finally:
            pool.close()


@pytest.mark.slow   # 7-10 s a call on a 2-core machine: CI runs it (make test-slow)
def test_an_actor_that_cannot_start_is_an_error_that_says_why(cluster):
    from kernelsearch.sandbox.ray_backend import RayBackendError, RayPool

    # device: cuda on nodes that declare GPUs torch cannot see (this machine): each actor fails in its __init__
    with pytest.raises(RayBackendError, match=r"failed to start: .*torch sees no GPU"):
        RayPool(PoolSettings(concurrency=2, evaluation=EvalSettings(timeout_s=60)), RaySettings(), device="cuda")
    pool = _pool()   # the GPUs those actors held are free again
    pool.close()


@pytest.mark.slow   # ~23 s on 2 cores: two actors' fork servers start torch, then four evaluations
def test_evaluations_spread_over_both_gpus_and_timings_never_overlap_on_one(cluster):
    from kernelsearch.families import load_problem

    ref = load_problem("softmax").ref
    pool = _pool(concurrency=4)
    try:
        assert pool.mode == "cpu"   # declared GPUs, no CUDA device: the interpreter, as the local pool on this machine
        results = asyncio.run(_gather(pool, [ONLINE] * 4, ref))
        assert [r.status for r in results] == [Status.ok] * 4
        assert sorted(r.detail["ray"]["gpus"][0] for r in results) == [0, 0, 1, 1]
        log = pool.lease_log()
        for gpu in (0, 1):
            held = sorted((t0, t1) for _, g, t0, t1 in log if g == gpu)
            assert len(held) >= 2   # each evaluation's timing held its GPU's lease
            assert all(a[1] <= b[0] for a, b in zip(held, held[1:]))
    finally:
        pool.close()


@pytest.mark.slow   # ~20 s on 2 cores: the actors' fork servers start torch, then a group of two
def test_a_re_timing_group_runs_on_one_actor_as_on_the_local_pool(cluster):
    from kernelsearch.families import load_problem

    pool = _pool(concurrency=2)
    try:
        results = asyncio.run(pool.retime_group([ONLINE, ONLINE + "\n# another file\n"], load_problem("softmax").ref))
    finally:
        pool.close()
    assert [r.status for r in results] == [Status.ok] * 2, [r.reason for r in results]
    assert [r.detail["retime_group"] for r in results] == [2, 2]   # timed side by side, not each alone
    assert results[0].ref_time_ms == results[1].ref_time_ms
    assert results[0].detail["ray"] == results[1].detail["ray"]   # one actor, one GPU


async def _gather(pool, sources, ref):
    return await asyncio.gather(*(pool.evaluate(s, ref) for s in sources))


async def _kill_when_running(pool, pids_killed: list[int], times: int) -> None:
    """SIGKILL the process of the actor that runs the evaluation, `times` times, each a second into its run."""
    while len(pids_killed) < times:
        busy = [a for a in pool._live if a.load and a.info["pid"] not in pids_killed]
        if busy:
            await asyncio.sleep(1.5)
            pid = busy[0].info["pid"]
            os.kill(pid, signal.SIGKILL)
            pids_killed.append(pid)
        await asyncio.sleep(0.1)


@pytest.mark.slow   # ~30 s on 2 cores: three evaluations of 8 s, actors started again
def test_an_actor_killed_mid_evaluation_is_retried_elsewhere_then_recorded_as_node_lost(cluster):
    from kernelsearch.families import load_problem

    ref = load_problem("softmax").ref
    pool = _pool(concurrency=1)
    try:
        async def once(times):
            killed: list[int] = []
            killer = asyncio.ensure_future(_kill_when_running(pool, killed, times))
            result = await pool.evaluate(SLOW, ref)
            killer.cancel()
            return result, killed

        result, killed = asyncio.run(once(1))   # lost once: run again on the other actor, and judged
        assert result.status == Status.ok, result.reason
        assert result.detail["ray"]["pid"] != killed[0]
        assert len(pool.lost) == 1 and pool.lost[0]["pid"] == killed[0]
        result, killed = asyncio.run(once(2))   # lost on both tries: a crash, node lost
        assert result.status == Status.crash
        assert result.reason.startswith("node lost")
        t0 = time.monotonic()
        result = asyncio.run(pool.evaluate(ONLINE, ref))   # the run goes on, on the replacement actors
        assert result.status == Status.ok, result.reason
        assert result.detail["ray"]["pid"] not in killed and time.monotonic() - t0 < 60
    finally:
        pool.close()


def _shape(db):
    con = sqlite3.connect(db)
    try:
        ideas = con.execute("SELECT i.round, count(k.id) FROM idea i LEFT JOIN kernel k ON k.idea_id = i.id "
                            "GROUP BY i.id ORDER BY i.round, i.id").fetchall()
        kernels = con.execute("SELECT k.round, k.idea_id IS NULL, e.status, e.purpose FROM kernel k JOIN evaluation e "
                              "ON e.kernel_id = k.id ORDER BY k.round").fetchall()
        runs = con.execute("SELECT status, stop_reason, device FROM run").fetchall()
        # round 1 is seeded by the starter alone, so its kernels are the same code under any backend (later rounds'
        # seeds depend on measured times)
        first = sorted(h for (h,) in con.execute("SELECT code_hash FROM kernel WHERE round <= 1"))
    finally:
        con.close()
    return ideas, sorted(kernels, key=str), runs, first


@pytest.mark.slow   # two small searches through the CLI, ~50 s on 2 cores
def test_a_search_on_ray_stores_the_tree_the_local_backend_stores(cluster, tmp_path):
    search = {"rounds": 2, "ideas_per_round": 2, "branches_per_idea": 1, "concurrency": 2, "timings": 1}
    shapes = []
    for backend in ("local", "ray"):
        folder = tmp_path / backend
        folder.mkdir()
        extra = {"ray": {"address": cluster.get_runtime_context().gcs_address}} if backend == "ray" else {}
        cfg = write_config(folder, device="auto", search=search, evaluation={"backend": backend}, **extra)
        r = cli("run", str(cfg), "--name", "t", cwd=folder)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert ("evaluations on a Ray cluster: " in r.stdout) == (backend == "ray")
        shapes.append(_shape(folder / "ks.db"))
    assert shapes[0] == shapes[1]
    ideas, kernels, runs, _ = shapes[1]
    assert runs == [("finished", "rounds_done", "cpu-interpreter")]
    assert len(ideas) == 4 and len(kernels) == 5


def _rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.slow   # a search killed in round 1 and resumed, both on the cluster: ~60 s on 2 cores
def test_a_controller_killed_mid_run_on_ray_resumes_and_redoes_nothing(cluster, tmp_path):
    import subprocess
    import sys

    cfg = write_config(tmp_path, device="auto", evaluation={"backend": "ray"},
                       search={"rounds": 2, "ideas_per_round": 2, "branches_per_idea": 1, "timings": 1},
                       ray={"address": cluster.get_runtime_context().gcs_address})
    db = tmp_path / "ks.db"
    proc = subprocess.Popen([sys.executable, "-m", "kernelsearch", "run", str(cfg), "--name", "r"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:   # until round 1 has stored an evaluation
        try:
            if _rows(db, "SELECT count(*) FROM evaluation e JOIN kernel k ON k.id = e.kernel_id "
                         "WHERE k.round = 1")[0][0]:
                break
        except sqlite3.OperationalError:
            pass
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _rows(db, "SELECT id, kernel_id, status, time_ms, created_at FROM evaluation ORDER BY id")
    assert before and _rows(db, "SELECT status FROM run") == [("running",)]
    r = cli("resume", "r", "--db", str(db), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    after = _rows(db, "SELECT id, kernel_id, status, time_ms, created_at FROM evaluation ORDER BY id")
    assert after[: len(before)] == before and len(after) > len(before)   # nothing lost, nothing redone
    verdicts = [k for (k,) in _rows(db, "SELECT kernel_id FROM evaluation")]
    assert len(set(verdicts)) == len(verdicts) == _rows(db, "SELECT count(*) FROM kernel")[0][0]
    assert _rows(db, "SELECT status, stop_reason FROM run") == [("finished", "rounds_done")]
