"""Why the candidate's batches carry more host overhead than eager's (issue 30): the same starter evaluated on its
family's problem and on a twin problem whose reference IS that starter (the same Triton kernel, in a reference
runner), each through the pool (`kernelsearch eval`: the candidate's runner under a user of its own where the pool
can make one) and through the in-process judge (`judge.harness.evaluate`: plain local runners, the judge's user).

Per evaluation, from the timing plan's per-batch readings: each side's own overhead a batch (its wall time on the
judge's clock beyond its CUDA-event time: socket round trip, graph launch, waking, synchronize), median and range.
Stored GPU plans (2026-12-07, H100) read the candidate's at 0.4-0.9 ms against eager's steady 0.32:
- twin's candidate like its reference -> the difference is the kernels' graph (Triton's against torch's), not the
  candidate's runner;
- twin's candidate still above its reference -> the candidate's runner (its role's setup, its correctness history);
- local like pool -> not the candidate's own user nor the pool's sandbox.
Lines go to $OUT/twin.txt as they come.

    . bench/device_env.sh && python3 bench/twin_overhead_gpu.py [--families softmax,rmsnorm] [--n 3]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from round3_gpu import ROOT, run_eval  # bench/ is the script's folder, first on sys.path

OUT = Path(os.environ.get("OUT", "/tmp")) / "twin.txt"
TWIN = '''"""{family}'s timed case, its reference the family's Triton starter (bench/twin_overhead_gpu.py)."""
import sys

import torch

sys.path.insert(0, {folder!r})
from ks_twin_{family} import ModelNew  # noqa: E402  (Triton's JIT reads the kernel's file)
from kernelsearch.judge.problem import load_problem  # noqa: E402

_P = load_problem({spec!r})
_C = _P.timed_case


class Model(ModelNew):
    def forward(self, *xs):   # the judge's float64 reference, and inputs the starter is not written for (a problem
        # file's extra checks: strided or other-dtype inputs), by the family's own math; the timed case by the kernel
        # (on an H100 the twin crashed the judge with an illegal memory access without the layout test)
        ts = [x for x in xs if isinstance(x, torch.Tensor)]
        if any(x.dtype == torch.float64 or not x.is_contiguous() for x in ts):
            return _P.module.Model.forward(self, *xs)
        return super().forward(*xs)


def get_inputs():
    return _P.build_inputs(_C, torch.initial_seed() % 2**31, "cpu")


def get_init_inputs():
    return _P.build_init_inputs(_C)
'''
LOCAL = '''import json, sys
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.problem import load_problem
from kernelsearch.judge.settings import EvalSettings
r = evaluate(load_problem(sys.argv[1]), open(sys.argv[2]).read(), EvalSettings(timeout_s=200), mode=sys.argv[3])
print(r.to_json())
'''


def say(line: str) -> None:
    print(line, flush=True)
    with open(OUT, "a") as f:
        f.write(line + "\n")


def run_local(problem: str, candidate: Path, mode: str) -> dict:
    try:
        p = subprocess.run([sys.executable, "-c", LOCAL, problem, str(candidate), mode], capture_output=True, text=True,
                           timeout=240, cwd=ROOT)
        out = p.stdout.strip()
        return json.loads(out[out.index("{"):]) if "{" in out else {"status": f"no json (rc {p.returncode})",
                                                                     "reason": p.stderr[-300:]}
    except subprocess.TimeoutExpired:
        return {"status": "bench timeout"}


def own_ms(plan: dict) -> dict[str, list[float]]:
    """Per side, per batch: wall beyond events (ms), where the side replied an event time."""
    out = {}
    for side, raw in (plan.get("batches_ms") or {}).items():
        out[side] = [w - e for w, e in zip(raw.get("wall_ms", []), raw.get("events_ms", []))
                     if isinstance(w, (int, float)) and isinstance(e, (int, float))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default="softmax,rmsnorm")
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--arms", default="pool,pool-twin,local,local-twin")
    ap.add_argument("--at", default="", help="a shape for both problems, e.g. @rows=64,cols=256,dtype=float32")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of the script (local arms, small --at)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ks-twin-"))
    os.chmod(tmp, 0o755)   # the pool's runners of another user import the twin's kernel from here
    summary: dict[tuple[str, str], dict[str, list[float]]] = {}
    for family in args.families.split(","):
        starter = ROOT / "families" / family / "starter.py"
        shutil.copy(starter, tmp / f"ks_twin_{family}.py")
        twin = tmp / f"twin_{family}.py"
        twin.write_text(TWIN.format(family=family, spec=family + args.at, folder=str(tmp)))
        for p in tmp.iterdir():
            os.chmod(p, 0o644)
        for i in range(args.n):
            for arm in args.arms.split(","):
                problem = str(twin) if arm.endswith("twin") else family + args.at
                d = run_eval(problem, starter, 240) if arm.startswith("pool") else run_local(problem, starter,
                                                                                             args.device)
                if d.get("status") != "ok":
                    say(f"{family} {arm} #{i}: {d.get('status')} {str(d.get('reason'))[:300]}")
                    continue
                plan = (d.get("detail") or {}).get("timing_plan") or {}
                own = own_ms(plan)
                acc = summary.setdefault((family, arm), {})
                for side, v in own.items():
                    acc.setdefault(side, []).extend(v)
                acc.setdefault("time_ms", []).append(d["time_ms"])
                sides = " | ".join(f"{s} own {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f}) ms"
                                   for s, v in own.items() if v)
                say(f"{family} {arm} #{i}: cand {d['time_ms']:.4f} ms, eager {d['ref_time_ms']:.4f} | n "
                    f"{plan.get('calls_per_batch')} batches {len(next(iter(own.values()), []))} | {sides} | "
                    f"overhead {plan.get('overhead_ms')} cand_overhead {plan.get('cand_overhead_ms')} charged "
                    f"{plan.get('charged_overhead_ms')} | user {(d.get('detail') or {}).get('candidate_user')}")
    say("\n| family | arm | candidate's own overhead a batch, median (ms) | eager's | candidate time: range, spread |")
    say("|---|---|---|---|---|")
    for (family, arm), acc in summary.items():
        c, e, t = acc.get("candidate") or [0], acc.get("eager") or [0], acc["time_ms"]
        say(f"| {family} | {arm} | {statistics.median(c):.3f} ({len(c)} batches) | {statistics.median(e):.3f} | "
            f"{min(t):.4f}-{max(t):.4f} ms, {(max(t) - min(t)) / statistics.median(t) * 100:.2f} % |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
