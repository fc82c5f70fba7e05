"""Why two evaluations of one kernel read apart (issue 30): the same kernel through `kernelsearch eval` N times,
each in a fresh process, with what the clock charged in each (the timing plan: calls a batch, the fixed cost, the
reference's and the candidate's batch overheads, the charge for side steps) and the spread of its batches; then
triton's do_bench_cudagraph of the same kernel on the same shape in this process. Lines go to $OUT/spread.txt as they
come.

    . bench/device_env.sh && python3 bench/clock_spread_gpu.py [--n 5] [--candidate PATH] [--problem PATH]
        [--settings "KS_CLOCK_BATCHES=4:12;KS_CLOCK_BATCHES=8:24"]

--settings: clock settings (environment variables of judge/clock.py, `;` between settings, `,` within one) compared
in one call: the evaluations alternate between them, and each gets its own spread line.
"""
from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from round3_gpu import ROUND3, run_eval  # bench/ is the script's folder, first on sys.path

OUT = Path(os.environ.get("OUT", "/tmp")) / "spread.txt"
PLAN_KEYS = ("calls_per_batch", "fixed_ms", "overhead_ms", "cand_overhead_ms", "charged_overhead_ms",
             "side_step_charge_ms")


def say(line: str) -> None:
    print(line, flush=True)
    with open(OUT, "a") as f:
        f.write(line + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--candidate", default=str(ROUND3 / "honest_softmax.py"))
    ap.add_argument("--problem", default=str(ROUND3 / "softmax_gpu.py"))
    ap.add_argument("--settings", default="", help="e.g. KS_CLOCK_BATCHES=4:12;KS_CLOCK_BATCHES=8:24")
    args = ap.parse_args()
    settings = [dict(kv.split("=", 1) for kv in one.split(",") if kv) for one in args.settings.split(";")] or [{}]
    times: dict[int, list[float]] = {i: [] for i in range(len(settings))}
    for i in range(args.n):
        for j, env in enumerate(settings):
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                d = run_eval(args.problem, args.candidate, 200)
            finally:
                for k, v in saved.items():
                    os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
            tag = ",".join(f"{k}={v}" for k, v in env.items()) or "default"
            if d.get("status") != "ok":
                say(f"[{tag}] eval {i}: {d.get('status')} {str(d.get('reason'))[:300]}")
                continue
            plan = d["detail"].get("timing_plan", {})
            tc, te = d["detail"]["timings"]["candidate"], d["detail"]["timings"]["eager"]
            times[j].append(d["time_ms"])
            say(f"[{tag}] eval {i}: cand {d['time_ms']:.4f} ms (batches {tc['batches']}, {tc['min_ms']:.4f}-"
                f"{tc['max_ms']:.4f}) eager {d['ref_time_ms']:.4f} ({te['min_ms']:.4f}-{te['max_ms']:.4f}) | "
                + " ".join(f"{k}={plan.get(k)}" for k in PLAN_KEYS)
                + f" | timing {d['detail'].get('stage_s', {}).get('timing_loop')} s | {d['wall_s']:.0f} s")
            # per batch: the candidate's side steps beyond the reference's, and each side's ping and describe (ms)
            pings, descs = plan.get("pings_ms") or [], plan.get("describes_ms") or []
            say(f"    side steps ms {plan.get('side_steps_ms')}")
            for b, (p, q) in enumerate(zip(pings, descs)):
                say(f"    batch {b}: ping " + " ".join(f"{k} {v:.3f}" for k, v in p.items())
                    + " | describe " + " ".join(f"{k} {v:.3f}" for k, v in q.items()))
    for j, env in enumerate(settings):
        ts = times[j]
        if len(ts) > 1:
            med = statistics.median(ts)
            tag = ",".join(f"{k}={v}" for k, v in env.items()) or "default"
            say(f"[{tag}] candidate over {len(ts)} evaluations: {min(ts):.4f}-{max(ts):.4f} ms, median {med:.4f}, "
                f"spread {(max(ts) - min(ts)) / med * 100:.2f} %")
    times = [t for ts in times.values() for t in ts]
    try:   # the same kernel by triton's own clock, for agreement
        import importlib.util

        import torch
        import triton.testing

        from kernelsearch.judge.problem import load_problem

        problem = load_problem(args.problem)
        spec = importlib.util.spec_from_file_location("ks_bench_candidate", args.candidate)   # @jit needs a file
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        torch.manual_seed(0)
        case = problem.timed_case
        x = problem.build_inputs(case, 0, "cuda")
        model = mod.ModelNew(*problem.build_init_inputs(case)).cuda()
        ms = triton.testing.do_bench_cudagraph(lambda: model(*x), rep=200)
        off = f"; the evaluations' median is {statistics.median(times) / ms * 100 - 100:+.2f} %" if times else ""
        say(f"do_bench_cudagraph: {ms:.4f} ms{off}")
    except Exception as err:   # noqa: BLE001 - the figure is extra
        say(f"do_bench_cudagraph not measured: {type(err).__name__}: {err}")


if __name__ == "__main__":
    main()
