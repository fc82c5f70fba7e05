"""Issue 21's GPU check: a kernel exported with `kernelsearch export` and loaded through Hugging Face `kernels`
runs at the speed its evaluation measured (within 5 %, same process, same inputs).

For each family named (default: softmax rmsnorm), its starter is
1. evaluated through the pool (sandbox/pool.py: the judge, its runners and its clock, as in every run), which
   gives the evaluation's time;
2. stored in a fresh store as a run, a kernel and that evaluation, and exported by `export_kernel` (the code of
   `kernelsearch export`) into a temporary directory;
3. loaded with `kernels.get_local_kernel` (a CUDA machine: the repository, as a user would; elsewhere its
   `build/torch-cuda` variant, named directly, as tests/cli/test_export.py does), its output compared with the
   candidate file's own ModelNew on the same inputs (same weights);
4. timed in this process beside that ModelNew and the eager reference, on the same input sets, by one method for
   all: on a GPU the judge's (n distinct input sets, n as the judge picks it, captured back to back into one CUDA
   graph per side; CUDA events around each replay, the L2 flushed before it; sides alternating which goes first;
   median per call), then judge/timing.time_interleaved (events around each call, L2 flushed, inputs
   rotated, interleaved call by call) as a second reading. On the CPU (Triton's interpreter, the problem's
   small CPU case) the host clock of time_interleaved.

The exported function goes through its `_layer` lookup on every call (a dict lookup and a tuple); the candidate's
ModelNew is called directly: that difference is what the comparison measures. The evaluation's time comes from
the judge's wall clock across processes, the in-process times from events: `exp/eval` is shown, but the verdict is
`exp/cand`, like against like.

    . bench/device_env.sh && python3 bench/export_gpu.py softmax rmsnorm          # a GPU machine
    .venv/bin/python bench/export_gpu.py softmax --dry-run                        # CPU: no pool, a quick pass
    .venv/bin/python bench/export_gpu.py softmax rmsnorm                          # CPU: the whole path, interpreter
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

if not torch.cuda.is_available():   # before any Triton kernel is defined (the families, the exported module)
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")   # a local kernel: kernels must not look on the Hub (no network on a GPU)

TOLERANCE = 0.05


def _say(*a) -> None:
    print(*a, flush=True)


# -- 1. the evaluation ------------------------------------------------------------------------------------------

def evaluate(family: str, source: str, mode: str):
    from kernelsearch.judge.settings import EvalSettings
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

    pool = EvaluatorPool(PoolSettings(mode=mode, gpus=[0], concurrency=1,
                                      evaluation=EvalSettings(trials=1, timeout_s=600)))
    try:
        return asyncio.run(pool.evaluate(source, {"builtin": family}))
    finally:
        pool.close()


# -- 2. store and export ------------------------------------------------------------------------------------------

def store_and_export(family: str, source: str, result, workdir: Path) -> tuple[Path, dict]:
    from sqlmodel import Session

    from kernelsearch.export import export_kernel
    from kernelsearch.store import queries as q
    from kernelsearch.store.database import open_store
    from kernelsearch.store.models import Run

    db = workdir / f"{family}.db"
    engine = open_store(db)
    with Session(engine) as s:
        run = Run(name=f"export-gpu-{family}", problem=family, config_json="{}", status="finished")
        s.add(run)
        s.flush()
        kid = q.add_kernel(s, run.id, code=source, language="triton",
                           code_hash=hashlib.sha256(source.encode()).hexdigest()[:16])
        q.add_evaluation(s, result.row(kid))
        s.commit()
    engine.dispose()
    target = workdir / f"{family}-hf"
    done = export_kernel(db, f"k{kid}", target, compile_check=False)
    return target, done


def load_exported(target: Path, cuda: bool) -> tuple[object, str]:
    """The exported module and how it was found. A CUDA machine loads the repository, as a user would (kernels
    picks build/torch-cuda); should that fail, the failure is printed and the variant is loaded by its path, so the
    timing still runs. Without CUDA kernels picks no variant: the variant's path, as the tests load it."""
    from kernels import get_local_kernel

    variant = target / "build" / "torch-cuda"
    if not cuda:
        return get_local_kernel(variant), "variant path (no CUDA)"
    try:
        return get_local_kernel(target), "repository"
    except Exception:  # noqa: BLE001 - reported, then the variant by its path
        _say(f"LOADING THE REPOSITORY FAILED (kernels.get_local_kernel({target})):\n{traceback.format_exc()}")
        return get_local_kernel(variant), "variant path (the repository failed to load)"


# -- 3. the three sides, in this process --------------------------------------------------------------------------

def sides_of(problem, case, source: str, exported, op: str, device: str, workdir: Path) -> tuple[dict, object]:
    """{name: fn(inputs)} for the exported function, the candidate file's ModelNew and the eager reference, and
    the reference model. As the judge builds them: the reference under a seed, its weights (state_dict) loaded into
    the candidate's layer (here also into the layer the exported function made on its first call), every layer on
    the device and, for a family, in the case's dtype."""
    from kernelsearch.judge.problem import DTYPES, load_source_module

    path = workdir / f"candidate_{problem.name}.py"   # @triton.jit reads the kernel's source back from its file
    path.write_text(source)
    mod = load_source_module(source, f"ks_export_bench_{problem.name}", filename=str(path))
    init = problem.build_init_inputs(case)
    dtype = DTYPES.get(case.dtype) if problem.family is not None else None
    torch.manual_seed(0)
    ref = problem.module.Model(*init)
    state = ref.state_dict() if isinstance(ref, torch.nn.Module) else {}

    def placed(m):
        if isinstance(m, torch.nn.Module):
            m = m.to(device)
            if dtype is not None:
                m = m.to(dtype)
        return m

    torch.manual_seed(0)
    cand = mod.ModelNew(*init)
    if state and isinstance(cand, torch.nn.Module):
        cand.load_state_dict(state, strict=False)
    cand, ref = placed(cand), placed(ref)
    fn = getattr(exported, op)
    torch.manual_seed(0)
    with torch.no_grad():
        fn(*problem.build_inputs(case, 7, device))   # the exported function makes its layer on first use
    if state:
        for layer in exported._LAYERS.values():   # the export's own cache of layers (build/torch-cuda/__init__.py)
            layer.load_state_dict(state, strict=False)
    return {"exported": lambda x: fn(*x), "candidate": lambda x: cand(*x), "eager": lambda x: ref(*x)}, ref


def check_outputs(sides: dict, ref, problem, case, device: str) -> str:
    """The exported function's output against the candidate's (bit for bit) and the reference's (the judge's
    comparison and tolerances) on fresh inputs."""
    from kernelsearch.judge.correctness import compare
    from kernelsearch.judge.numerics import references

    inputs = problem.build_inputs(case, 11, device)
    with torch.no_grad():
        got, cand = sides["exported"](inputs), sides["candidate"](inputs)
    if not all(torch.equal(a, b) for a, b in zip(_flat(got), _flat(cand))):
        raise RuntimeError("the exported function's output differs from the candidate's ModelNew on the same inputs")
    want, want_hi = references(ref, inputs)
    atol, rtol = problem.tolerance(case)
    c = compare(got, want, want_hi, atol, rtol)
    if not c.ok:
        raise RuntimeError(f"the exported function's output does not match the reference: {c.reason}")
    return f"identical to the candidate's; against the reference max abs {c.max_abs:.3g}, max rel {c.max_rel:.3g}"


def _flat(v) -> list:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _flat(x)]
    return []


def _nbytes(values) -> int:
    return sum(t.numel() * t.element_size() for t in _flat(values))


# -- 4. timing ------------------------------------------------------------------------------------------------

def graph_times(sides: dict, sets: list, reps: int) -> tuple[dict[str, float], dict[str, str]]:
    """The judge's method in one process: each side's n calls on the n input sets captured into one CUDA graph,
    replayed `reps` times, each side in each place equally often; events around each replay, the L2 flushed before
    it. Per-call ms, median over the replays. A side that cannot be captured runs as an eager loop of n calls (said in
    `kinds`)."""
    from kernelsearch.judge.timing import L2_FLUSH_BYTES, side_order

    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    n = len(sets)
    runs, kinds, keep = {}, {}, []
    with torch.no_grad():
        for name, fn in sides.items():
            for x in sets:
                fn(x)
            torch.cuda.synchronize()
            try:
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    keep.append([fn(x) for x in sets])
                runs[name], kinds[name] = g.replay, "graph"
            except Exception as err:  # noqa: BLE001 - the reason is reported
                torch.cuda.synchronize()
                runs[name] = (lambda f=fn: [f(x) for x in sets])
                kinds[name] = f"eager loop ({type(err).__name__})"
        for run in runs.values():   # one replay each before the clock
            run()
        torch.cuda.synchronize()
        times: dict[str, list[float]] = {k: [] for k in runs}
        names = list(runs)
        for r in range(reps):
            for name in side_order(names, r):   # each side in each place equally often (judge/timing.py)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                flush.zero_()
                start.record()
                runs[name]()
                end.record()
                torch.cuda.synchronize()
                times[name].append(start.elapsed_time(end) / n)
    del keep, flush
    return {k: statistics.median(v) for k, v in times.items()}, kinds


def event_times(sides: dict, sets: list, device: str, iters: int) -> dict[str, float]:
    from kernelsearch.judge.timing import time_interleaved

    with torch.no_grad():
        t = time_interleaved(sides, sets, device=device, iters=iters, warmup=2, max_batches=4)
    return {k: v.median for k, v in t.items()}


def calls_per_batch(problem, case, ref, cap: int) -> int:
    """n as the judge's clock picks it on a GPU (judge/clock.py): as many calls as its batch bytes hold."""
    from kernelsearch.judge.clock import BATCH_BYTES, MIN_CALLS

    probe = problem.build_inputs(case, 0, "cuda")
    with torch.no_grad():
        out = ref(*probe)
    return max(MIN_CALLS, min(cap, BATCH_BYTES // max(_nbytes(probe) + _nbytes(out), 1)))


def cpu_case(problem):
    """The CPU's case: the problem's CPU timed case when its init inputs are the timed case's (the export's layer
    is built with the timed case's: an rmsnorm's weight fixes its width), else the timed case with few rows."""
    import dataclasses

    timed, small = problem.timed_case, problem.cpu_timed_case()
    init = problem.build_init_inputs(timed)
    if problem.build_init_inputs(small) == init:
        return small
    same = [c for c in problem.cases_for("cpu") if problem.build_init_inputs(c) == init]
    if same:
        return same[-1]
    if "rows" in timed.params:
        return dataclasses.replace(timed, name="timed-few-rows", params={**timed.params, "rows": 8}, cpu=True)
    raise RuntimeError(f"no CPU-sized case of {problem.name} has the timed case's init inputs {init!r}")


# -- one family -----------------------------------------------------------------------------------------------

def one(family: str, args, workdir: Path) -> list[dict]:
    import importlib

    from kernelsearch.export.layout import op_name
    from kernelsearch.families import load_problem
    from kernelsearch.judge.result import EvalResult
    from kernelsearch.judge.status import Status

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    source = importlib.import_module(f"kernelsearch.families.{family}").STARTER
    if args.dry_run:
        result = EvalResult(status=Status.ok, stage="timing", timing_kind="dry-run (not evaluated)",
                            device=torch.cuda.get_device_name() if cuda else "cpu-interpreter")
        _say(f"[{family}] dry run: no evaluation, the store gets an ok row without times")
    else:
        t0 = time.perf_counter()
        result = evaluate(family, source, "cuda" if cuda else "cpu")
        _say(f"[{family}] evaluation: {result.status.value} {result.reason or ''} cand {result.time_ms} ms "
             f"ref {result.ref_time_ms} ms x{result.speedup} on {result.device} ({result.timing_kind}; "
             f"{time.perf_counter() - t0:.1f} s; plan {result.detail.get('timing_plan')})")
        if not result.ok:
            raise RuntimeError(f"the starter did not pass its evaluation: {result.status.value} {result.reason}")
    target, done = store_and_export(family, source, result, workdir)
    kernel_py = target / "build" / "torch-cuda" / "kernel.py"
    assert kernel_py.read_bytes() == source.encode(), "the exported kernel.py is not the evaluated code"
    _say(f"[{family}] exported k{done['kernel_id']} as {done['name']} to {target} (checksum "
         f"{done['checksum'][:16]}...)")
    exported, how = load_exported(target, cuda)
    op = op_name(family)
    _say(f"[{family}] loaded through kernels.get_local_kernel ({how}): module {exported.__name__}, function {op}")

    problem = load_problem(family)
    case = problem.timed_case if cuda else cpu_case(problem)
    sides, ref = sides_of(problem, case, source, exported, op, device, workdir)
    _say(f"[{family}] case {case.name}: exported output {check_outputs(sides, ref, problem, case, device)}")
    rows = []
    if cuda:
        n = 2 if args.dry_run else calls_per_batch(problem, case, ref, args.calls)
        sets = [problem.build_inputs(case, 1000 + k, "cuda") for k in range(n)]
        reps = 3 if args.dry_run else args.reps
        graph, kinds = graph_times(sides, sets, reps)
        _say(f"[{family}] graph: n={n} calls a replay, {reps} replays a side: "
             + ", ".join(f"{k} {v:.4f} ms ({kinds[k]})" for k, v in graph.items()))
        rows.append({"method": f"graph n={n}", **graph})
        events = event_times(sides, sets[:3], "cuda", 3 if args.dry_run else args.iters)
        _say(f"[{family}] events: " + ", ".join(f"{k} {v:.4f} ms" for k, v in events.items()))
        rows.append({"method": "events", **events})
        del sets
        torch.cuda.empty_cache()
    else:
        sets = [problem.build_inputs(case, 1000 + k, "cpu") for k in range(3)]
        host = event_times(sides, sets, "cpu", 2 if args.dry_run else args.iters)
        _say(f"[{family}] host clock (interpreter): " + ", ".join(f"{k} {v:.4f} ms" for k, v in host.items()))
        rows.append({"method": "host (interp.)", **host})
    eval_case = str(result.detail.get("timing_case") or "-").split("[")[0]
    for r in rows:
        r.update(family=family, eval_ms=result.time_ms, eval_x=result.speedup, case=f"{eval_case} / {case.name}")
    return rows


def _fmt(v, spec: str = ".4f") -> str:
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*", default=["softmax", "rmsnorm"])
    ap.add_argument("--dry-run", action="store_true",
                    help="no evaluation through the pool, and a few timed calls: the export, load and timing path")
    ap.add_argument("--calls", type=int, default=None,
                    help="cap on n, the calls a graph replays (default: the judge's, EvalSettings.timing_iters)")
    ap.add_argument("--reps", type=int, default=21, help="graph replays per side (GPU)")
    ap.add_argument("--iters", type=int, default=30, help="calls per side and batch of time_interleaved")
    args = ap.parse_args(argv)
    if args.calls is None:
        from kernelsearch.judge.settings import EvalSettings

        args.calls = EvalSettings().timing_iters
    try:
        import kernels
    except ImportError:
        _say("export_gpu: the `kernels` package is missing (a dev dependency; on the GPU machine carry .whl/ with "
             "its wheels from ../shared/tools/device-wheels.sh and source bench/device_env.sh)")
        return 2
    cuda = torch.cuda.is_available()
    where = torch.cuda.get_device_name() if cuda else f"cpu (TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')})"
    _say(f"device: {where}; torch {torch.__version__}; kernels {kernels.__version__}")
    rows, failed = [], []
    with tempfile.TemporaryDirectory(prefix="ks-export-gpu-") as d:
        for family in args.families:
            try:
                rows += one(family, args, Path(d))
            except Exception:  # noqa: BLE001 - one family's failure is reported, the others still run
                _say(f"[{family}] FAILED:\n{traceback.format_exc()}")
                failed.append(family)
    _say("\nms per call. eval = the evaluation's time (the judge's clock, through the pool); exported = the function "
         "loaded through kernels.get_local_kernel; cand = the candidate file's ModelNew; eager = the reference; "
         "the last three in this process, same inputs, same method")
    _say("| family | case (eval / here) | method | eval ms | exported ms | cand ms | exp/cand | within 5% | exp/eval | "
         "eager ms | x eval | x exported |")
    _say("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["exported"] / r["candidate"]
        vs_eval = r["exported"] / r["eval_ms"] if r["eval_ms"] else None
        within = "yes" if abs(ratio - 1) <= TOLERANCE else "NO"
        _say(f"| {r['family']} | {r['case']} | {r['method']} | {_fmt(r['eval_ms'])} | {r['exported']:.4f} | "
             f"{r['candidate']:.4f} | {ratio:.3f} | {within} | {_fmt(vs_eval, '.3f')} | {r['eager']:.4f} | "
             f"{_fmt(r['eval_x'], '.3f')} | {r['eager'] / r['exported']:.3f} |")
    if failed:
        _say(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
