"""CUDA C++ beside Triton on a GPU (issue 31), in one device call:

1. each row family's CUDA C++ starter (starter_cuda.py) beside its Triton starter, eager and torch.compile, at the
   family's timed case: CUDA-event medians in this process (judge/roofline.events_ms), each kernel's max error
   against eager; and the CUDA starter's build: cold, then from torch's warm build folder, each in a fresh process;
2. the softmax CUDA starter launched on the legacy default stream (`<<<grid, block>>>`) beside the same kernel on
   the current stream, each through `kernelsearch eval --json` twice (status, time, what the clock said of its graph);
3. an offline CUDA search (`search.language: cuda`, no API key) of one family through `kernelsearch run`.

Each line is printed and appended to $OUT/cuda_gpu.txt as it comes (a call cut off keeps what it measured); the
tables last. Targets (benchmark, not tests): CUDA starters within 10 % of the Triton starters; a warm build under 1 s;
legacy-stream kernels ok, within 5 % of the current-stream time.

    . bench/device_env.sh && python3 bench/cuda_gpu.py [--families softmax,rmsnorm] [--search rmsnorm]
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from round3_gpu import run_eval  # noqa: E402 - the one copy of `kernelsearch eval --json` in a fresh process

OUT = Path(os.environ.get("OUT", "/tmp"))
LOG = OUT / "cuda_gpu.txt"
FAMILIES = ("softmax", "rmsnorm", "layernorm", "reduce")
CURRENT = ", smem, at::cuda::getCurrentCUDAStream()>>>("


def say(line: str) -> None:
    print(line, flush=True)
    with open(LOG, "a") as f:
        f.write(line + "\n")


def legacy(source: str) -> str:
    """The same kernel on the legacy default stream, under an extension name of its own."""
    return source.replace(CURRENT, ", smem>>>(").replace('name="ks_softmax_', 'name="ks_legacy_softmax_')


def build_times(source: str, ext_dir: Path) -> list[float]:
    """Seconds to import the candidate (load_inline builds at import) in two fresh processes sharing one build
    folder: the first builds, the second loads from torch's warm build folder."""
    ext_dir.mkdir(parents=True, exist_ok=True)
    path = ext_dir / "candidate.py"
    path.write_text(source)
    code = ("import importlib.util, sys, time\nt = time.perf_counter()\n"
            f"spec = importlib.util.spec_from_file_location('cand', {str(path)!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(round(time.perf_counter() - t, 3))")
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext_dir / "ext")}
    out = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
        out.append(float(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else float("nan"))
        if p.returncode != 0:
            say(f"  build failed: {p.stderr[-600:]}")
    return out


def family_row(name: str, tmp: Path) -> dict:
    import torch

    from kernelsearch.families import load_family
    from kernelsearch.judge.problem import load_source_module
    from kernelsearch.judge.roofline import events_ms

    problem = load_family(name)
    case = problem.timed_case
    pkg = importlib.import_module(f"kernelsearch.families.{name}")
    init = problem.build_init_inputs(case)
    torch.manual_seed(0)
    ref = problem.module.Model(*init).cuda()
    inputs = problem.build_inputs(case, 1234, "cuda")
    row: dict = {"family": name, "case": case.describe()}
    cold, warm = build_times(pkg.CUDA_STARTER, tmp / name)
    row["build_cold_s"], row["build_warm_s"] = cold, warm
    with torch.no_grad():
        want = ref(*inputs).float()
        sides = {"eager": ref, "compile": torch.compile(ref)}
        for lang, src in (("triton", pkg.STARTER), ("cuda", pkg.CUDA_STARTER)):
            path = tmp / name / f"{lang}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(src)
            os.environ["TORCH_EXTENSIONS_DIR"] = str(tmp / name / "ext")
            model = load_source_module(src, f"ks_bench_{name}_{lang}", str(path)).ModelNew(*init).cuda()
            model.load_state_dict(ref.state_dict())
            sides[lang] = model
        for side, model in sides.items():
            try:
                got = model(*inputs)
                row[f"{side}_err"] = float((got.float() - want).abs().max())
                row[f"{side}_ms"] = events_ms(lambda model=model: model(*inputs), reps=50, warmup=3)
            except Exception as err:  # noqa: BLE001 - one side failing is a figure too
                row[f"{side}_ms"] = None
                say(f"  {name} {side}: {type(err).__name__}: {str(err)[:300]}")
    c, t = row.get("cuda_ms"), row.get("triton_ms")
    row["cuda_over_triton"] = round(c / t, 3) if c and t else None
    say(f"{name:10s} {row['case']}: " + ", ".join(f"{s} {row.get(f'{s}_ms') or float('nan'):.4f} ms "
                                                  f"(err {row.get(f'{s}_err', float('nan')):.2e})"
                                                  for s in ("eager", "compile", "triton", "cuda"))
        + f"; cuda/triton {row['cuda_over_triton']}; build cold {cold} s, warm {warm} s")
    return row


def streams(tmp: Path, repeats: int) -> list[dict]:
    from kernelsearch.families import softmax

    rows = []
    for label, src in (("current stream", softmax.CUDA_STARTER), ("legacy stream", legacy(softmax.CUDA_STARTER))):
        path = tmp / f"{label.split()[0]}_softmax.py"
        path.write_text(src)
        for i in range(repeats):
            d = run_eval("softmax", path, 600)
            detail = d.get("detail") or {}
            graph = detail.get("timing_plan", {}).get("graphs", {}).get("candidate")
            # the judge's build of its extension (judge/cuda_build.py): the second evaluation's should be cached
            built = detail.get("cuda_build") or {}
            build = built.get("skipped") or [(e.get("status"), e.get("cached"), e.get("build_s"))
                                             for e in built.get("extensions", [])]
            compile_s = detail.get("stage_s", {}).get("compile")
            rows.append({"launch": label, "i": i, "status": d.get("status"), "time_ms": d.get("time_ms"),
                         "speedup": d.get("speedup"), "graph": graph, "build": build, "compile_s": compile_s})
            say(f"{label:15s} #{i}: {d.get('status')} time_ms {d.get('time_ms')} speedup {d.get('speedup')} "
                f"graph {str(graph)[:160]} build {build} compile stage {compile_s} s, {d['wall_s']} s | "
                f"{str(d.get('reason'))[:200]}")
    return rows


def search(family: str, evaluations: int) -> None:
    db = OUT / "cuda_search.db"
    cfg = OUT / "cuda_search.yaml"
    cfg.write_text(json.dumps({
        "problem": family, "store": str(db), "device": "cuda", "name": f"cuda-{family}",
        "llm": {"provider": "offline"},
        "search": {"language": "cuda", "rounds": 3, "ideas_per_round": 3, "branches_per_idea": 2,
                   "seeds_per_round": 2, "concurrency": 4, "timings": 1},
        "budgets": {"evaluations": evaluations, "wall_time_s": 420}}))   # JSON is YAML
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "kernelsearch", "run", str(cfg)], capture_output=True, text=True,
                       cwd=ROOT, timeout=560)
    say(f"search {family} (language cuda, offline): rc {p.returncode} in {time.monotonic() - t0:.0f} s; "
        f"{p.stdout.strip()[-600:]} {p.stderr.strip()[-400:]}")
    tree = subprocess.run([sys.executable, "-m", "kernelsearch", "tree", f"cuda-{family}", "--db", str(db)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    say(tree.stdout[-3000:] + tree.stderr[-300:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--repeats", type=int, default=2, help="evaluations of each stream's kernel")
    ap.add_argument("--search", default="rmsnorm", help="the family of the offline CUDA search ('' for none)")
    ap.add_argument("--evaluations", type=int, default=12)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ks-cuda-bench-"))
    rows = []
    for name in filter(None, args.families.split(",")):
        try:
            rows.append(family_row(name, tmp))
        except Exception as err:  # noqa: BLE001 - the other families still run
            say(f"{name}: {type(err).__name__}: {str(err)[:400]}")
        (OUT / "cuda_starters.json").write_text(json.dumps(rows, indent=1))
    stream_rows = streams(tmp, args.repeats) if args.repeats else []
    (OUT / "cuda_streams.json").write_text(json.dumps(stream_rows, indent=1))
    if args.search:
        search(args.search, args.evaluations)
    say("\n| family | case | eager ms | compile ms | Triton ms | CUDA ms | CUDA/Triton | build cold s | warm s |")
    say("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = {k: (f"{r[k]:.4f}" if isinstance(r.get(k), float) else str(r.get(k)))
             for k in ("eager_ms", "compile_ms", "triton_ms", "cuda_ms")}
        say(f"| {r['family']} | {r['case']} | {f['eager_ms']} | {f['compile_ms']} | {f['triton_ms']} | "
            f"{f['cuda_ms']} | {r['cuda_over_triton']} | {r['build_cold_s']} | {r['build_warm_s']} |")
    if stream_rows:
        say("\n| launch | status | time ms | compile stage s | judge's build | graph |\n|---|---|---|---|---|---|")
        for r in stream_rows:
            say(f"| {r['launch']} | {r['status']} | {r['time_ms']} | {r['compile_s']} | {str(r['build'])[:50]} | "
                f"{str(r['graph'])[:60]} |")


if __name__ == "__main__":
    main()
