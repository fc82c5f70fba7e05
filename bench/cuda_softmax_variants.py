"""The CUDA C++ softmax starter's variants beside the Triton starter on a GPU (issue 31): which point of the CUDA
space (families/softmax/space_cuda.py over families/cuda_rows.py) comes within 10 % of the Triton starter.

On 2026-12-06 (H100) the CUDA starter of the time (`stash: global`, 256 threads, expf) ran 4096 x 32000 bf16 in
0.3735 ms against the Triton starter's 0.2590. Each variant below is rendered from the space (the new default, the
old default with its expf body, each `stash` at several thread counts and vector widths, and an online max+sum body
that reads the row twice instead of three times), built with load_inline as a candidate builds itself (all of them
first, in parallel subprocesses sharing one build folder, then loaded here from it), and timed with CUDA events
(the median of --reps calls after --warmup, in this process) beside eager torch.softmax, the Triton starter and a
plain copy of the same bytes (the floor: one read and one write), with each one's max error against eager and
whether it is within the family's tolerances. Inputs are 262 MB and more, far past the 50 MB L2, so no flush.

Each line is printed and appended to $OUT/cuda_softmax_variants.txt as it comes (a call cut off keeps what it
measured); the table last, and $OUT/cuda_softmax_variants.json. One variant failing does not stop the rest.

    . bench/device_env.sh && python3 bench/cuda_softmax_variants.py [--only registers,shared] [--reps 50]
    .venv/bin/python bench/cuda_softmax_variants.py --dry-run   # no GPU: render, compile for sm_90a, registers
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("OUT", "/tmp"))
LOG = OUT / "cuda_softmax_variants.txt"
CASES = [("timed", 4096, 32000, "bfloat16"), ("fp32", 4096, 32000, "float32")]

# the body of the starter before 2026-12-06 (expf, as committed in 72d3885): with the old knobs, the old starter
OLD_BODY = """
    float m = -INFINITY;
    each([&](int, float v) { m = fmaxf(m, v); });
    m = row_reduce<Max>(m, scratch);
    float s = 0.f;
    each([&](int, float v) { s += expf(v - m); });
    const float inv = 1.f / row_reduce<Sum>(s, scratch);
    write([&](int, float v) { return expf(v - m) * inv; });
"""
OLD_DEFAULT = {"rows_per": "block", "threads": 256, "vec_bytes": 16, "reduce": "shuffle", "stash": "global"}

# online softmax: each thread's running max and sum of exp(x - max) in one pass, then the row's max, each thread's
# sum rescaled to it, the row's sum, and the write: two reads of the row instead of three (rows of finite values:
# a thread whose first element is -inf would sum a NaN; the bench's inputs are randn)
ONLINE_BODY = """
    constexpr float LOG2E = 1.4426950408889634f;
    float m = -INFINITY, s = 0.f;
    each([&](int, float v) {
        if (v > m) { s = s * exp2f((m - v) * LOG2E) + 1.f; m = v; }
        else s += exp2f((v - m) * LOG2E);
    });
    const float mr = row_reduce<Max>(m, scratch);
    s *= exp2f((m - mr) * LOG2E);   // (a thread with no elements: m = -inf, s = 0)
    const float ml = mr * LOG2E;
    const float inv = 1.f / row_reduce<Sum>(s, scratch);
    write([&](int, float v) { return exp2f(fmaf(v, LOG2E, -ml)) * inv; });
"""


def say(line: str) -> None:
    print(line, flush=True)
    with open(LOG, "a") as f:
        f.write(line + "\n")


def variants() -> list[dict]:
    """Each variant: label, the knobs, which body, and its candidate source (rendered from the CUDA space)."""
    from kernelsearch.families.cuda_rows import render
    from kernelsearch.families.softmax.space_cuda import CUDA_SPACE, OP

    d = dict(CUDA_SPACE.default)
    bodies = {"exp2": OP, "expf": dataclasses.replace(OP, body=OLD_BODY),
              "online": dataclasses.replace(OP, body=ONLINE_BODY)}

    def pt(**k):
        return {**d, **k}

    points = [("new default", "exp2", d),
              ("old default", "expf", OLD_DEFAULT),
              ("global 256 exp2", "exp2", pt(stash="global", threads=256)),
              ("global 512 exp2", "exp2", pt(stash="global", threads=512)),
              ("online global 256", "online", pt(stash="global", threads=256)),
              ("online registers 512", "online", pt(stash="registers", threads=512)),
              ("shared 256", "exp2", pt(stash="shared", threads=256)),
              ("shared 512", "exp2", pt(stash="shared", threads=512)),
              ("shared 1024", "exp2", pt(stash="shared", threads=1024)),
              ("registers 256", "exp2", pt(stash="registers", threads=256)),
              ("registers 512", "exp2", pt(stash="registers", threads=512)),
              ("registers 1024", "exp2", pt(stash="registers", threads=1024)),
              ("registers 512 vec8", "exp2", pt(stash="registers", threads=512, vec_bytes=8)),
              ("registers 512 tree", "exp2", pt(stash="registers", threads=512, reduce="shared"))]
    out, seen = [], {}
    for label, body, p in points:
        CUDA_SPACE.validate(p)
        source = render(bodies[body], p)
        if source in seen:   # (the new default is one of the registers points)
            seen[source]["label"] += f" = {label}"
            continue
        v = {"label": label, "body": body, "params": p, "source": source,
             "slug": re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")}
        seen[source] = v
        out.append(v)
    return out


def dry_run(chosen: list[dict]) -> None:
    """No GPU: each variant's sources compiled for sm_90a by the judge's check, its kernels' registers and spills."""
    from kernelsearch.judge.cuda_check import cuda_report

    cache = Path(tempfile.mkdtemp(prefix="ks-softmax-variants-"))
    for v in chosen:
        t0 = time.monotonic()
        try:
            r = cuda_report(v["source"], cache=cache)
        except Exception as err:  # noqa: BLE001 - one variant failing is a finding too
            say(f"{v['label']:36s} ERROR {type(err).__name__}: {str(err)[:300]}")
            continue
        if r["status"] != "ok":
            say(f"{v['label']:36s} {r['status']}: {str(r.get('error'))[:600]}")
            continue
        ks = []
        for k in r["kernels"]:
            m = re.search(r"<(.*?), (\d+), (\d+)>", k["name"])
            tag = f"{m.group(1).replace('__nv_bfloat16', 'bf16').replace('__half', 'f16')}/V{m.group(2)}/" \
                  f"{['glob', 'shm', 'reg'][int(m.group(3))]}" if m else k["name"][:40]
            ks.append(f"{tag} {k['registers']}r" + (f" SPILL {k['spills_bytes']}B" if k["spills_bytes"] else ""))
        spills = sum(k["spills_bytes"] for k in r["kernels"])
        say(f"{v['label']:36s} ok in {time.monotonic() - t0:.0f} s, {len(ks)} kernels, spills {spills} B: "
            + ", ".join(ks))


def prebuild(chosen: list[dict], tmp: Path, ext_dir: Path) -> None:
    """Import each variant's file in its own fresh process (load_inline builds at import), several at once, all into
    one build folder: the timing process then loads every one of them from it."""
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext_dir)}

    def build(v: dict) -> None:
        path = tmp / f"{v['slug']}.py"
        path.write_text(v["source"])
        v["path"] = str(path)
        t0 = time.monotonic()
        try:
            p = subprocess.run([sys.executable, "-c", f"import runpy; runpy.run_path({str(path)!r})"],
                               capture_output=True, text=True, env=env, timeout=600)
            v["build_error"] = None if p.returncode == 0 else (p.stderr or p.stdout)[-1500:]
        except Exception as err:  # noqa: BLE001 - a build that hangs or cannot start is that variant's finding
            v["build_error"] = f"{type(err).__name__}: {str(err)[:300]}"
        v["build_s"] = round(time.monotonic() - t0, 1)
        say(f"built {v['label']}: {'FAILED' if v['build_error'] else 'ok'} in {v['build_s']} s"
            + (f"\n{v['build_error']}" if v["build_error"] else ""))

    workers = max(1, min(8, (os.cpu_count() or 2) // 2))
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(build, chosen))


def time_ms(fn, reps: int, warmup: int) -> float:
    from kernelsearch.judge.roofline import events_ms  # the one copy of a CUDA-event median

    return events_ms(fn, reps=reps, warmup=warmup)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="no GPU: render and compile each variant for sm_90a")
    ap.add_argument("--only", default="", help="comma-separated substrings of the variants' labels to keep")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cases", default=",".join(c[0] for c in CASES))
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    chosen = variants()
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        chosen = [v for v in chosen if any(k in v["label"] for k in keys)]
    say(f"cuda_softmax_variants: {len(chosen)} variants: " + "; ".join(
        f"{v['label']} [{v['body']}: " + ", ".join(f"{k}={v['params'][k]}" for k in sorted(v["params"])) + "]"
        for v in chosen))
    if args.dry_run:
        dry_run(chosen)
        return

    import torch

    from kernelsearch.families import softmax
    from kernelsearch.families.softmax.spec import TOLERANCES
    from kernelsearch.judge.problem import load_source_module

    if not torch.cuda.is_available():
        sys.exit("no GPU here: run with --dry-run for the sm_90a compile check")
    props = torch.cuda.get_device_properties(0)
    say(f"device {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
        f"cuda {torch.version.cuda}")
    tmp = Path(tempfile.mkdtemp(prefix="ks-softmax-variants-"))
    ext_dir = tmp / "ext"
    t0 = time.monotonic()
    prebuild(chosen, tmp, ext_dir)
    say(f"all builds: {time.monotonic() - t0:.0f} s")
    os.environ["TORCH_EXTENSIONS_DIR"] = str(ext_dir)

    sides: dict[str, object] = {}
    for v in chosen:
        if v.get("build_error"):
            continue
        try:
            t1 = time.monotonic()
            mod = load_source_module(v["source"], f"ks_variant_{v['slug']}", v["path"])
            sides[v["label"]] = mod.ModelNew().cuda()
            v["load_s"] = round(time.monotonic() - t1, 2)
        except Exception as err:  # noqa: BLE001 - the other variants still run
            v["build_error"] = f"load: {type(err).__name__}: {str(err)[:400]}"
            say(f"{v['label']}: {v['build_error']}")
    try:
        (tmp / "triton_starter.py").write_text(softmax.STARTER)   # @jit reads its kernels' source from the file
        tri = load_source_module(softmax.STARTER, "ks_variant_triton", str(tmp / "triton_starter.py"))
        sides = {"triton starter": tri.ModelNew().cuda(), **sides}
    except Exception as err:  # noqa: BLE001
        say(f"triton starter: {type(err).__name__}: {str(err)[:400]}")

    rows: list[dict] = []
    wanted = set(args.cases.split(","))
    for cname, nrows, ncols, dtype in CASES:
        if cname not in wanted:
            continue
        dt = getattr(torch, dtype)
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = (torch.randn(nrows, ncols, device="cuda", generator=gen) * 4.0).to(dt)
        nbytes = 2 * x.numel() * x.element_size()
        atol, rtol = TOLERANCES[dtype]
        case = f"{cname} {nrows}x{ncols} {dtype}"
        with torch.no_grad():
            want = torch.softmax(x, dim=-1)
            y = torch.empty_like(x)
            base = {"case": case}
            for label, fn in [("copy (floor)", lambda: y.copy_(x)), ("eager", lambda: torch.softmax(x, dim=-1))] + \
                    [(label, (lambda m=m: m(x))) for label, m in sides.items()]:
                row = {**base, "variant": label}
                try:
                    if label != "copy (floor)":
                        got = fn()
                        err = (got.float() - want.float()).abs()
                        row["max_err"] = float(err.max())
                        row["ok"] = bool(torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol))
                        del got, err
                    row["ms"] = time_ms(fn, args.reps, args.warmup)
                    row["tb_s"] = nbytes / (row["ms"] * 1e-3) / 1e12
                except Exception as err:  # noqa: BLE001 - one variant failing is a figure too
                    row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
                rows.append(row)
                tri_ms = next((r.get("ms") for r in rows if r["case"] == case and r["variant"] == "triton starter"),
                              None)
                if row.get("ms") and tri_ms:
                    row["x_triton"] = row["ms"] / tri_ms
                say(f"{case} | {label:36s} " + (f"{row['ms']:.4f} ms, {row['tb_s']:.2f} TB/s" if "ms" in row else
                                                f"FAILED {row.get('error')}")
                    + (f", {row['x_triton']:.3f}x Triton" if "x_triton" in row else "")
                    + (f", max err {row['max_err']:.2e} {'ok' if row['ok'] else 'OUT OF TOLERANCE'}"
                       if "max_err" in row else ""))
        del x, y, want
        torch.cuda.empty_cache()
        (OUT / "cuda_softmax_variants.json").write_text(json.dumps(
            {"rows": rows, "variants": [{k: v.get(k) for k in ("label", "body", "params", "build_s", "load_s",
                                                                 "build_error")} for v in chosen]}, indent=1))

    say("\n| case | variant | ms | TB/s | x Triton | max err vs eager | within tol |")
    say("|---|---|---|---|---|---|---|")
    for r in rows:
        ms = f"{r['ms']:.4f}" if "ms" in r else f"FAILED: {r.get('error', '')[:80]}"
        tb = f"{r['tb_s']:.2f}" if "tb_s" in r else ""
        xt = f"{r['x_triton']:.3f}" if "x_triton" in r else ""
        err = f"{r['max_err']:.2e}" if "max_err" in r else ""
        tol = ("yes" if r["ok"] else "NO") if "ok" in r else ""
        say(f"| {r['case']} | {r['variant']} | {ms} | {tb} | {xt} | {err} | {tol} |")
    failed = [v["label"] for v in chosen if v.get("build_error")]
    if failed:
        say(f"\nnot built or not loaded: {', '.join(failed)}")


if __name__ == "__main__":
    main()
