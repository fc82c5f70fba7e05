"""The judge's own work per evaluation, this tree against another (issue 29: what the third round's checks cost).

Each side evaluates the same candidate with `kernelsearch eval --json` in a fresh process, alternating sides so drift
on the machine falls on both; printed: the wall time and each stage's seconds (the evaluation's `stage_s`), median
over the repeats. The other tree is a checkout laid out as an installed package (a folder holding `kernelsearch/`
with its rooms linked in): its path goes first on PYTHONPATH, which the sandbox's environment keeps, and the runs
start outside this checkout so its own `kernelsearch/` folder is not found first.

    python3 bench/judge_work.py --other /tmp/oldpkg [--problem softmax] [--candidate FILE] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(problem: str, candidate: Path, pythonpath: str | None, device: str) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "kernelsearch", "eval", problem, str(candidate), "--json",
                        "--device", device], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    out = p.stdout.strip()
    d = json.loads(out[out.index("{"):]) if "{" in out else {"status": f"no json (rc {p.returncode})"}
    d["wall_s"] = time.monotonic() - t0
    return d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--other", required=True, help="a folder holding the other tree's kernelsearch/ package")
    ap.add_argument("--problem", default="softmax")
    ap.add_argument("--candidate", default=str(ROOT / "tests/fixtures/cheats/round3/honest_softmax.py"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="auto")
    a = ap.parse_args()
    problem = a.problem if not a.problem.endswith(".py") else str(Path(a.problem).resolve())
    runs: dict[str, list[dict]] = {"this": [], "other": []}
    for i in range(a.repeats):
        for side in ("other", "this"):
            d = run(problem, Path(a.candidate).resolve(), a.other if side == "other" else None, a.device)
            runs[side].append(d)
            print(f"{side:5} #{i}: {d.get('status')} wall {d['wall_s']:.1f} s "
                  f"stages {json.dumps((d.get('detail') or {}).get('stage_s'))}", flush=True)
    print(f"\n{'stage':>22} {'other s':>9} {'this s':>9} {'change':>8}")
    keys = sorted({k for side in runs.values() for d in side for k in ((d.get('detail') or {}).get('stage_s') or {})})
    for key in ["wall_s", *keys]:
        med = {}
        for side, ds in runs.items():
            vals = [d["wall_s"] if key == "wall_s" else ((d.get("detail") or {}).get("stage_s") or {}).get(key)
                    for d in ds]
            vals = [v for v in vals if isinstance(v, (int, float))]
            med[side] = statistics.median(vals) if vals else None
        change = (f"{(med['this'] - med['other']) / med['other'] * 100:+.0f} %"
                  if med["this"] is not None and med["other"] else "")
        fmt = lambda v: f"{v:9.2f}" if v is not None else f"{'-':>9}"  # noqa: E731
        print(f"{key:>22} {fmt(med['other'])} {fmt(med['this'])} {change:>8}")


if __name__ == "__main__":
    main()
