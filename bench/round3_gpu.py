"""The judge's third round on a GPU (issue 29), and the clock's spread (issue 30): every round-3 fixture through
`kernelsearch eval` on an 8192 x 8191 fp32 softmax, each in a fresh process as a user runs it, then the honest kernel
evaluated five times in a row (the spread of its time and of the reference's). Each line is printed and appended to
$OUT/round3.txt as it comes (a call cut off keeps what it measured); a table last.

    . bench/device_env.sh && python3 bench/round3_gpu.py [--repeats 5] [--only a,b]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUND3 = ROOT / "tests" / "fixtures" / "cheats" / "round3"
PROBLEM = ROUND3 / "softmax_gpu.py"
# fixture -> what the judge should say (a prefix of status, or status and the start of the reason)
EXPECT = {
    "honest_softmax": "ok", "honest_autotune": "ok", "no_max_softmax": "incorrect", "spin_reference": "rejected",
    "forged_oom_count": "crash", "kill_judge": "crash|incorrect", "cpp_aten": "rejected", "getattr_reduce": "rejected",
    "kernelsearch_reexport": "rejected", "honest_cuda": "ok", "noop_launch": "rejected",
}
OUT = Path(os.environ.get("OUT", "/tmp")) / "round3.txt"


def say(line: str) -> None:
    print(line, flush=True)
    with open(OUT, "a") as f:
        f.write(line + "\n")


def run_eval(problem: str | Path, candidate: str | Path, timeout: float) -> dict:
    """`kernelsearch eval PROBLEM CANDIDATE --json` in a fresh process, as a user runs it: its JSON and `wall_s`."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "kernelsearch", "eval", str(problem), str(candidate), "--json"],
                           capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        out = p.stdout.strip()
        d = json.loads(out[out.index("{"):]) if "{" in out else {"status": f"no json (rc {p.returncode})",
                                                                   "reason": p.stderr[-300:]}
    except subprocess.TimeoutExpired:
        d = {"status": "bench timeout", "reason": f"over {timeout:g} s"}
    d["wall_s"] = round(time.monotonic() - t0, 1)
    return d


def evaluate(name: str, timeout: float) -> dict:
    return run_eval(PROBLEM, ROUND3 / f"{name}.py", timeout)


def probe_figures() -> None:
    """The quiet-device probe (judge/clock.py) on an idle device and beside a process spinning sleep kernels."""
    import torch

    from kernelsearch.judge.quiet import PROBE_BUSY_MS, _probe_ms

    def walls(k: int = 40) -> list[float]:
        out = []
        for _ in range(k):
            out.append(min(_probe_ms() for _ in range(3)))
            time.sleep(0.01)
        return sorted(out)

    torch.cuda.init()
    idle = walls()
    spinner = subprocess.Popen([sys.executable, "-c", "import time, torch\nend = time.time() + 30\n"
                                "while time.time() < end:\n    torch.cuda._sleep(400_000_000)\n"
                                "    torch.cuda.synchronize()\n"])
    time.sleep(8)
    busy = walls()
    spinner.kill()
    limit = PROBE_BUSY_MS
    for what, v in (("idle", idle), ("beside a spinner", busy)):
        say(f"probe {what}: min {v[0]:.3f} median {statistics.median(v):.3f} max {v[-1]:.3f} ms; "
            f"{sum(x > limit for x in v)} of {len(v)} over the {limit:.2f} ms limit")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=float, default=150)
    ap.add_argument("--probe", action="store_true", help="first, the quiet-device probe's figures")
    args = ap.parse_args()
    if args.probe:
        probe_figures()
    names = [n for n in EXPECT if not args.only or n in args.only.split(",")]
    rows = []
    for name in names:
        d = evaluate(name, args.timeout)
        good = any(str(d.get("status")) == s for s in EXPECT[name].split("|"))
        rows.append((name, d, good))
        say(f"{name:24s} {str(d.get('status')):10s} {'as expected' if good else 'UNEXPECTED':12s} "
            f"speedup {d.get('speedup')} time_ms {d.get('time_ms')} ref_ms {d.get('ref_time_ms')} "
            f"{d['wall_s']} s | {str(d.get('reason'))[:220]}")
    times, refs = [], []
    for i in range(args.repeats):
        d = evaluate("honest_softmax", args.timeout)
        if d.get("status") == "ok":
            times.append(d["time_ms"])
            refs.append(d["ref_time_ms"])
        say(f"repeat {i}: {d.get('status')} time_ms {d.get('time_ms')} ref_ms {d.get('ref_time_ms')} "
            f"spread {d.get('detail', {}).get('timings', {}).get('candidate', {}).get('spread')} {d['wall_s']} s")
    say("\n| fixture | status | expected | speedup |\n|---|---|---|---|")
    for name, d, good in rows:
        say(f"| {name} | {d.get('status')} | {EXPECT[name]}{'' if good else ' (NOT MET)'} | {d.get('speedup')} |")
    if len(times) >= 2:
        for what, v in (("candidate", times), ("eager", refs)):
            say(f"{what}: {len(v)} evaluations, {min(v):.4f}-{max(v):.4f} ms, median {statistics.median(v):.4f}, "
                f"spread {(max(v) - min(v)) / statistics.median(v) * 100:.2f} %")


if __name__ == "__main__":
    main()
