"""The evaluation harness on one GPU: throughput, repeatability, and agreement with triton's do_bench (issue 4).

Prints, on one H200 (run through the device tool after `. bench/device_env.sh`):
  1. evaluations per minute for a batch of softmax and rmsnorm candidates (rendered from each family's SPACE,
     ~8 each) through EvaluatorPool(PoolSettings(mode="cuda", gpus=[0], concurrency=4)), all stages included;
  2. the same kernel (each family's starter) timed in two evaluations: the spread between the two medians;
  3. our median (result time_ms) against triton.testing.do_bench(fn, return_mode="median") for the same kernel
     on the same (timed-case) inputs, measured in this process after the pool has finished;
  4. a short table. Targets: >= 30 evaluations/min, repeat spread <= 1%, agreement within 2%.

    python3 bench/bench_harness.py [--per-family 8] [--dry-run]

`--dry-run` (no GPU needed): mode "cpu" (interpreter), 2 candidates, do_bench reported as not run. Every failure
is printed with its status and reason; nothing is skipped silently. A watchdog ends the script at --deadline s.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import threading
import time
import traceback

FAMILIES = ("softmax", "rmsnorm")


def _say(*a) -> None:
    print(*a, flush=True)


def _candidates(family: str, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(label, source): the starter first, then distinct variants from the family's search space."""
    import importlib

    from kernelsearch.families import load_problem

    space = importlib.import_module(f"kernelsearch.families.{family}").SPACE
    cases = load_problem(family).cases
    rng = random.Random(seed)
    params = [dict(space.default)]
    tries = 0
    while len(params) < n and tries < 200:
        tries += 1
        base = rng.choice(params)
        for p in space.branches(base, 3, rng, fixed=set())[1:]:
            try:
                space.validate(p)
            except Exception as err:  # noqa: BLE001
                _say(f"  [{family}] variant {p} rejected by SPACE.validate: {err}")
                continue
            why = space.refusal(space.render(p), cases)
            if why is not None:   # the controller refuses it before the pool (families/feasibility.py): no evaluation
                _say(f"  [{family}] variant {p} not evaluated, infeasible: {why}")
                continue
            if p not in params and len(params) < n:
                params.append(p)
    out = []
    for i, p in enumerate(params):
        diff = {k: v for k, v in p.items() if space.default.get(k) != v}
        out.append((f"{family}#{i} {diff or 'starter'}", space.render(p)))
    return out


def _time_of(r: dict):
    t = r.get("time_ms")
    if t is None:
        t = (r.get("timing") or {}).get("time_ms")
    return t


def _brief(r: dict) -> str:
    t = _time_of(r)
    s = f"{r.get('status')}"
    if t is not None:
        s += f" {t * 1000:.1f} us"
    if r.get("speedup"):
        s += f" x{r['speedup']:.2f}"
    if r.get("status") != "ok":
        s += f" [{r.get('stage')}] {str(r.get('reason') or r.get('error_text') or '')[:300]}"
    d = r.get("detail") or {}
    stages = " ".join(f"{k}={v:.2f}" for k, v in (d.get("stage_s") or {}).items())
    held = "; longest holds end in: " + str(d["longest_hold"])[:300] if d.get("longest_hold") else ""
    return s + f" (wall {r.get('wall_s', 0):.1f} s; lease wait {d.get('lease_wait_s', 0):.2f}; {stages}{held})"


def _stage_means(results: list[dict]) -> str:
    """Mean seconds per stage over the evaluations, and the rest of the wall time (worker start, CUDA init)."""
    sums: dict[str, float] = {}
    rest = 0.0
    for r in results:
        st = (r.get("detail") or {}).get("stage_s") or {}
        for k, v in st.items():
            sums[k] = sums.get(k, 0.0) + v
        # the stages themselves: the rest are parts of them (in_*, timing_*), waits inside them, and longest holds
        top = sum(v for k, v in st.items() if not k.startswith(("timing_", "in_", "wait_", "hold_max_")))
        rest += r.get("wall_s", 0.0) - top
    n = max(len(results), 1)
    parts = [f"{k} {v / n:.2f}" for k, v in sums.items()] + [f"outside the harness {rest / n:.2f}"]
    return "mean s per evaluation: " + ", ".join(parts)


def _wait_means(results: list[dict]) -> str:
    """Lease waits by the step that asked (judge/waits.py): leases taken and seconds waited, means per evaluation."""
    sums: dict[str, list[float]] = {}
    for r in results:
        for k, (n, s) in ((r.get("detail") or {}).get("waits") or {}).items():
            acc = sums.setdefault(k, [0.0, 0.0])
            acc[0], acc[1] = acc[0] + n, acc[1] + s
    n = max(len(results), 1)
    return "lease waits by step (leases, s an evaluation): " + ", ".join(
        f"{k} {c / n:.1f}/{s / n:.2f}" for k, (c, s) in sorted(sums.items(), key=lambda kv: -kv[1][1]))


def _save(path: str | None, labelled: list[tuple[str, dict]]) -> None:
    """Append each result (its output left out) as a JSON line to `path`."""
    if not path:
        return
    with open(path, "a") as f:
        for label, r in labelled:
            d = dict(r)
            d["detail"] = {k: v for k, v in (r.get("detail") or {}).items() if k != "output"}
            f.write(json.dumps({"label": label, **d}, default=str) + "\n")


def _device_line(plan: dict) -> str:
    """Per call (us), the fastest half's median of each side's per-batch CUDA-event time and the candidate's wall
    time: whether two evaluations of one kernel differ on the device or on the host (the candidate's events are its
    own word: read here, never charged)."""
    from kernelsearch.judge.charges import low

    raw, n = plan.get("batches_ms") or {}, plan.get("calls_per_batch") or 0
    out = []
    for side, what in (("candidate", "events_ms"), ("eager", "events_ms"), ("candidate", "wall_ms"),
                       ("eager", "wall_ms")):
        v = [x for x in (raw.get(side) or {}).get(what) or [] if isinstance(x, (int, float))]
        if v and n:
            out.append(f"{side} {what[:-3]} {low(v) * 1000 / n:.1f}")
    return "; per call, us: " + ", ".join(out) if out else ""


def _warm_rate(results: list[dict], conc: int) -> str:
    """The rate once the pool is warm: evaluations that finished after the first `conc` did (the first wave pays
    the pool's start, its fork server's imports and CUDA init, and cold Triton caches), over the time since."""
    done = sorted(r["done_s"] for r in results if isinstance(r.get("done_s"), (int, float)))
    if len(done) <= conc + 1:
        return f"rate once warm: too few evaluations ({len(done)}) past the first wave of {conc}"
    t_first, rest = done[conc - 1], done[conc:]
    starts = [((r.get("detail") or {}).get("pool_s") or {}).get("start", 0.0) for r in results]
    return (f"rate once warm: {len(rest)} evaluations in the {rest[-1] - t_first:.1f} s after the first wave "
            f"({t_first:.1f} s) = {len(rest) / max(rest[-1] - t_first, 1e-9) * 60:.1f} per minute; "
            f"the pool's start (longest) {max(starts):.1f} s")


def _dict_means(results: list[dict], key: str) -> str:
    """Means over the evaluations of each figure in detail[key] (a dict of seconds)."""
    sums: dict[str, float] = {}
    for r in results:
        for k, v in ((r.get("detail") or {}).get(key) or {}).items():
            sums[k] = sums.get(k, 0.0) + float(v)
    n = max(len(results), 1)
    return ", ".join(f"{k} {v / n:.2f}" for k, v in sums.items()) or "none"


async def _batch(pool, items: list[tuple[str, str, str]]) -> list[dict]:
    t0 = time.monotonic()

    async def one(label, family, src):
        try:
            r = json.loads((await pool.evaluate(src, {"builtin": family})).to_json())
        except Exception as err:  # noqa: BLE001 - a pool failure is a row too
            r = {"status": "bench_error", "reason": f"{type(err).__name__}: {err}", "wall_s": 0.0}
        r["done_s"] = round(time.monotonic() - t0, 3)   # when it finished, from the batch's start
        _say(f"  {label:<60} {_brief(r)}")
        return r
    return await asyncio.gather(*(one(*it) for it in items))


def _do_bench(family: str, source: str) -> float:
    """do_bench's median (ms) for the candidate's forward on the family's timed-case inputs, in this process."""
    import torch
    import triton.testing

    from kernelsearch.families import load_problem
    from kernelsearch.judge.problem import load_source_module

    problem = load_problem(family)
    case = problem.timed_case
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ks_bench_{family}.py")
    with open(path, "w") as f:
        f.write(source)
    mod = load_source_module(source, f"ks_bench_{family}", filename=path)
    model = mod.ModelNew(*problem.build_init_inputs(case)).cuda()
    inputs = problem.build_inputs(case, seed=7, device="cuda")
    with torch.no_grad():
        model(*inputs)
        torch.cuda.synchronize()
        plain = float(triton.testing.do_bench(lambda: model(*inputs), return_mode="median"))
        # replayed from a CUDA graph: no host launch latency inside the timed region (plain do_bench has it
        # wherever the launch takes longer than its L2 flush)
        graph = float(triton.testing.do_bench_cudagraph(lambda: model(*inputs), return_mode="median"))
        return plain, graph


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-family", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=int(os.environ.get("KS_BENCH_CONCURRENCY", "4")),
                    help="evaluations at once (default: KS_BENCH_CONCURRENCY, else 4)")
    ap.add_argument("--fork-server", choices=["on", "off"], default="on",
                    help="workers forked from a torch-loaded parent (on) or a fresh interpreter each (off)")
    ap.add_argument("--compare-compile", action="store_true", help="also time torch.compile(reference)")
    ap.add_argument("--repeats", type=int, default=int(os.environ.get("KS_BENCH_REPEATS", "2")),
                    help="evaluations of each starter one after another, alone on the device (the repeat spread)")
    ap.add_argument("--save", default=os.environ.get("KS_BENCH_SAVE"),
                    help="write every evaluation's result (JSON lines, output left out) to this file")
    ap.add_argument("--dry-run", action="store_true", help="CPU interpreter, 2 candidates, no do_bench")
    ap.add_argument("--deadline", type=float, default=330.0, help="watchdog: exit after this many seconds")
    ap.add_argument("--group-first", type=int, default=int(os.environ.get("KS_GROUP_FIRST", "1")),
                    help="EvalSettings.group_first: first evaluations queued beyond the free slots judged in groups "
                         "of up to this many, timed side by side (default: $KS_GROUP_FIRST or 1)")
    args = ap.parse_args()

    def watchdog():
        _say(f"\nWATCHDOG: still running after {args.deadline:g} s; exiting (partial results above)")
        os._exit(3)
    timer = threading.Timer(args.deadline, watchdog)
    timer.daemon = True
    timer.start()

    from kernelsearch.judge.settings import EvalSettings
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

    mode = "cpu" if args.dry_run else "cuda"
    per_family = 1 if args.dry_run else args.per_family
    conc = 2 if args.dry_run else args.concurrency
    failures: list[str] = []
    rows: list[tuple[str, str, str]] = []
    _say(f"bench_harness: mode={mode} per_family={per_family} concurrency={conc} python={sys.version.split()[0]}")
    if mode == "cuda":
        import torch
        if not torch.cuda.is_available():
            _say("FAIL: mode cuda but torch sees no GPU")
            return 2
        # the name only: nvidia-smi-free; torch.cuda init in the parent does not reach the exec'd workers
        _say(f"device: {torch.cuda.get_device_name(0)}")

    # 1. throughput -------------------------------------------------------------------------------------------
    items = []
    for fam in FAMILIES:
        try:
            items += [(label, fam, src) for label, src in _candidates(fam, per_family)]
        except Exception:  # noqa: BLE001
            failures.append(f"rendering {fam} candidates:\n{traceback.format_exc()}")
            _say("FAIL " + failures[-1])
    pool = EvaluatorPool(PoolSettings(mode=mode, gpus=[0], concurrency=conc,
                                      evaluation=EvalSettings(timeout_s=150, fork_server=args.fork_server == "on",
                                                              compare_compile=args.compare_compile,
                                                              group_first=args.group_first, **(
                                                                  {"timing_iters": int(it)} if (it := os.environ.get(
                                                                      "KS_BENCH_TIMING_ITERS")) else {}))))
    _say(f"fork server {args.fork_server}, torch.compile timed: {args.compare_compile}, "
         f"first evaluations in groups of up to {args.group_first}")
    loop = asyncio.new_event_loop()   # one loop for every batch: the fork server's reader lives on it
    _say(f"\n[1] throughput: {len(items)} candidates")
    t0 = time.monotonic()
    results = loop.run_until_complete(_batch(pool, items)) if items else []
    wall = time.monotonic() - t0
    per_min = len(results) / wall * 60 if wall > 0 else 0.0
    _save(args.save, [(label, r) for (label, _, _), r in zip(items, results)])
    by_status: dict[str, int] = {}
    for (label, _, _), r in zip(items, results):
        by_status[r.get("status", "?")] = by_status.get(r.get("status", "?"), 0) + 1
        if r.get("status") != "ok":
            failures.append(f"{label}: {_brief(r)}")
    _say(f"  {len(results)} evaluations in {wall:.1f} s = {per_min:.1f} per minute; statuses {by_status}")
    _say("  " + _warm_rate(results, conc))
    _say("  " + _stage_means(results))
    seed = getattr(pool, "_seed", None)
    _say(f"  Triton's CUDA utilities built once for the pool: "
         f"{'off' if seed is None else 'yes' if seed.ready() else 'no: ' + (seed.error or 'still building')[:200]}")
    warms = [(r.get("detail") or {}).get("warm") or {} for r in results]
    warms = [w for w in warms if "s" in w]
    if warms:   # the Triton warm-up (judge/runner.py op_warm): kernels compiled in threads, the wait at its end
        _say(f"  warm-up: {len(warms)} evaluations, mean {sum(w['s'] for w in warms) / len(warms):.2f} s, "
             f"{sum(w.get('kernels', 0) for w in warms) / len(warms):.1f} kernels compiled, "
             f"{sum(w.get('wait_s', 0) for w in warms) / len(warms):.2f} s waiting for them at the end, "
             f"{sum(1 for w in warms if w.get('stopped'))} stopped early")
    _say("  " + _wait_means(results))
    for key, what in (("pool_s", "the pool's part (start, the judge to its result, exits, cleanup)"),
                      ("judge_start_s", "the judge's start before the harness")):
        _say(f"  {what}, mean s: " + _dict_means(results, key))
    sizes = [((r.get("detail") or {}).get("timing_group") or 1) for r in results if r.get("status") == "ok"]
    _say(f"  timed side by side with others: {sum(k > 1 for k in sizes)} of {len(sizes)} ok evaluations "
         f"(group sizes {sorted(sizes, reverse=True)})")
    held = sum(b - a for _, a, b in pool.lease_log)
    _say(f"  the GPU held exclusively (timing loops, stability checks) {held:.1f} s of the {wall:.1f} s "
         f"({held / wall:.0%}), {held / max(len(results), 1):.2f} s an evaluation")
    timing_held = sum(b - a for _, a, b in getattr(pool, "timing_log", []))
    _say(f"  the device's one timing stage held {timing_held:.1f} s of the {wall:.1f} s ({timing_held / wall:.0%}), "
         f"{timing_held / max(len(results), 1):.2f} s an evaluation: at most "
         f"{60 * len(results) / max(timing_held, 1e-9):.0f} evaluations a minute while the stage is the same")
    rows.append(("mean s per evaluation, by stage", _stage_means(results).split(": ", 1)[1], ""))
    rows.append(("GPU held exclusively / wall", f"{held:.1f} / {wall:.1f} s", ""))
    rows.append((f"evaluations / minute (1 GPU, all stages, concurrency {conc}, fork server {args.fork_server}"
                 f"{', torch.compile timed' if args.compare_compile else ''})", f"{per_min:.1f}", ">= 30"))
    under_load = {fam: _time_of(r) for (label, fam, _), r in zip(items, results) if label.startswith(f"{fam}#0")}

    # 2. repeatability + 3. agreement ---------------------------------------------------------------------------
    starters = {fam: src for label, fam, src in items if label.startswith(f"{fam}#0")}
    for fam, src in starters.items():
        _say(f"\n[2] {fam} starter timed in two evaluations")
        # one after the other: a concurrent candidate's correctness stage would share the GPU with the timing
        pair = [loop.run_until_complete(_batch(pool, [(f"{fam} starter, evaluation {i + 1}", fam, src)]))[0]
                for i in range(max(args.repeats, 2))]
        _save(args.save, [(f"{fam} repeat {i + 1}", r) for i, r in enumerate(pair)])
        times = [_time_of(r) for r in pair]
        for i, r in enumerate(pair):   # what the clock charged in each: why two evaluations of one kernel differ
            plan = (r.get("detail") or {}).get("timing_plan") or {}
            tim = (r.get("timings") or (r.get("detail") or {}).get("timings") or {}).get("candidate") or {}
            _say(f"    evaluation {i + 1} clock: " + ", ".join(
                f"{k} {plan.get(k)}" for k in ("calls_per_batch", "fixed_ms", "overhead_ms", "cand_overhead_ms",
                                               "charged_overhead_ms", "side_step_charge_ms"))
                 + (f", candidate batches {tim.get('batches')} spread {tim.get('spread')}" if tim else "")
                 + _device_line(plan))
        ours = None
        if all(t is not None for t in times):
            spread = (max(times) - min(times)) / min(times) * 100
            ours = statistics.median(times)
            rows.append((f"{fam}: repeat spread of medians, {len(times)} evaluations", f"{spread:.2f} %", "<= 1 %"))
            if under_load.get(fam):
                amid = f"{(under_load[fam] / ours - 1) * 100:+.2f} %"
                rows.append((f"{fam}: starter timed amid the batch vs alone", amid, "(for the note)"))
        else:
            failures.append(f"{fam} repeat: no time in {[_brief(r) for r in pair]}")
            rows.append((f"{fam}: repeat spread of medians", "FAILED", "<= 1 %"))
        _say(f"\n[3] {fam} starter: our median against triton.testing.do_bench")
        if mode != "cuda":
            _say("  do_bench not run: dry run (no GPU)")
            rows.append((f"{fam}: ours vs do_bench", "not run (dry run)", "within 2 %"))
            continue
        try:
            db, dbg = _do_bench(fam, src)
            _say(f"  do_bench median {db * 1000:.1f} us, do_bench_cudagraph {dbg * 1000:.1f} us; "
                 f"ours {ours * 1000 if ours else float('nan'):.1f} us")
            for what, v in (("do_bench", db), ("do_bench_cudagraph", dbg)):
                if ours:
                    rows.append((f"{fam}: ours vs {what} ({ours * 1000:.1f} / {v * 1000:.1f} us)",
                                 f"{(ours / v - 1) * 100:+.2f} %", "within 2 %"))
                else:
                    rows.append((f"{fam}: ours vs {what}", f"ours missing; {v * 1000:.1f} us", "within 2 %"))
        except Exception:  # noqa: BLE001
            failures.append(f"{fam} do_bench:\n{traceback.format_exc()}")
            _say("  FAIL " + failures[-1])
            rows.append((f"{fam}: ours vs do_bench", "FAILED", "within 2 %"))

    # 4. table ------------------------------------------------------------------------------------------------
    _say("\n| measure | value | target |\n|---|---|---|")
    for r in rows:
        _say(f"| {r[0]} | {r[1]} | {r[2]} |")
    _say(f"\nfailures: {len(failures)}")
    for f in failures:
        _say("  - " + f.replace("\n", "\n    "))
    timer.cancel()
    pool.close()
    loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
