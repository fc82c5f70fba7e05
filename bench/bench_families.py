"""Time every built-in family's starter against eager PyTorch, torch.compile and Liger-Kernel on one GPU.

    python bench/bench_families.py                       # every family, its timed case
    python bench/bench_families.py rmsnorm matmul        # some families
    python bench/bench_families.py --cases gpu           # every non-CPU case, not only the timed one
    python bench/bench_families.py layernorm --params '{"variant": "welford"}'   # a point of the search space
    python bench/bench_families.py softmax --sweep       # also every one-move neighbour of the starter
    python bench/bench_families.py matmul --sweep '[{"variant": "tma"}, {"num_stages": 4}]'   # chosen points

Timing: CUDA events around each call, L2 flushed (a 256 MB memset) before each, median of --iters calls after
--warmup calls. Every implementation runs on the same inputs in the same process. The starter (or --params
point) is checked against the reference computed in float64 at the family's tolerance first; a wrong kernel is
reported, not timed. Roofline: the ideal time is max(bytes / 4.2 TB/s, flops / 690 TFLOP/s) (the copy bandwidth
and cuBLAS bf16 rate measured on an H200 on 2026-12-02; fp32 matmul-like work is held to 67 TFLOP/s), and
`roof` is ideal / ours. Liger-Kernel is used where it has the op and is installed (liger_kernel).
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from kernelsearch.families import load_family
from kernelsearch.judge.problem import Case, Problem, family_names, load_source_module

COPY_BW = 4.2e12                                  # bytes/s, read + write counted
MMA_PEAK = {"bfloat16": 690e12, "float16": 690e12, "float32": 67e12}  # flop/s


# -- Liger-Kernel, where it has the op: (reference model, inputs) -> a zero-argument callable --------------------
def _liger_ops() -> dict:
    try:
        from liger_kernel.transformers import functional as lf
    except ImportError:
        return {}

    def rope(model, inputs):
        x, cos, sin = inputs
        k = x[:, :1].contiguous()  # Liger rotates q and k together; a one-head k adds 1/heads of the work
        return lambda: lf.liger_rope(x, k, cos.unsqueeze(0), sin.unsqueeze(0))

    def mlp(model, inputs):
        (x,) = inputs
        return lambda: model.down_proj(lf.liger_swiglu(model.gate_proj(x), model.up_proj(x)))

    ops = {
        "rmsnorm": lambda m, i: (lambda: lf.liger_rms_norm(i[0], m.weight, m.eps)),
        "layernorm": lambda m, i: (lambda: lf.liger_layer_norm(i[0], m.weight, m.bias, m.eps)),
        "layernorm_crfm": lambda m, i: (lambda: lf.liger_layer_norm(
            i[0].reshape(i[0].shape[0], -1), m.ln.weight.reshape(-1), m.ln.bias.reshape(-1), m.ln.eps)),
        "cross_entropy": lambda m, i: (lambda: lf.liger_cross_entropy(i[0], i[1], ignore_index=m.ignore_index)),
        "rotary_embedding": rope,
        "fused_mlp": mlp,
    }
    softmax = getattr(lf, "liger_softmax", None)
    if softmax is not None:
        ops["softmax"] = lambda m, i: (lambda: softmax(i[0]))
        ops["softmax_crfm"] = ops["softmax"]
    return ops


# -- timing ----------------------------------------------------------------------------------------------------
_FLUSH: torch.Tensor | None = None


def time_ms(fn, iters: int, warmup: int) -> float:
    """Median milliseconds of `fn()` over `iters` calls, L2 flushed before each."""
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    # a 0.2 ms sleep kernel per call keeps the GPU behind the host, so no call's events include launch latency
    # (without it, rmsnorm-sized kernels read up to 2x slow: the harness's timing.py says how this was seen)
    from kernelsearch.judge.timing import sleep_rate

    cycles = int(0.2 * sleep_rate())
    for s, e in zip(starts, ends):
        torch.cuda._sleep(cycles)
        _FLUSH.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


# -- correctness ------------------------------------------------------------------------------------------------
def worst_ratio(out: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> float:
    """max |out - want| / (atol + rtol |want|): at most 1 is within tolerance; NaN counts as infinitely off."""
    err = (out.double() - want).abs() / (atol + rtol * want.abs())
    return float(err.nan_to_num(float("inf")).max()) if err.numel() else 0.0


def _to64(values: list) -> list:
    return [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


# -- one family ---------------------------------------------------------------------------------------------------
def load_candidate(source: str, workdir: Path, name: str):
    path = workdir / f"{name}.py"  # Triton reads kernel source back from the file
    path.write_text(source)
    return load_source_module(source, name, str(path))


def build(problem: Problem, case: Case, source: str, workdir: Path, tag: str):
    init = problem.build_init_inputs(case)
    torch.manual_seed(0)
    ref = problem.module.Model(*init).cuda()
    cand = load_candidate(source, workdir, f"bench_{problem.name}_{tag}").ModelNew(*init).cuda()
    cand.load_state_dict(ref.state_dict())
    inputs = problem.build_inputs(case, 1234, "cuda")
    return ref, cand, inputs


def reference64(ref, inputs) -> torch.Tensor:
    """The reference output computed in float64 (in the case dtype if float64 does not fit)."""
    with torch.no_grad():
        try:
            return copy.deepcopy(ref).double()(*_to64(inputs))
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            return ref(*inputs).double()


def check(problem: Problem, case: Case, cand, inputs, want: torch.Tensor) -> float:
    with torch.no_grad():
        out = cand(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
    ratio = worst_ratio(out, want, *problem.tolerance(case))
    del out
    return ratio


def ideal_ms(problem: Problem, case: Case) -> tuple[float, str]:
    mem = problem.bytes_moved(case) / COPY_BW
    mma = problem.flops(case) / MMA_PEAK.get(case.dtype, 690e12) if problem.flops else 0.0
    return (1e3 * max(mem, mma), "mem" if mem >= mma else "mma")


def copy_ms(nbytes: int, iters: int, warmup: int) -> float:
    """A device copy moving `nbytes` in all (half read, half written), on the same clock: the bandwidth a kernel of
    this size can reach. A 134 MB kernel pays launch ramp and tail that the 4.2 TB/s of a multi-GB copy hides."""
    n = max(int(nbytes) // 32, 1)  # int32 x 4: 16 bytes a row, half the bytes read
    src = torch.empty((n, 4), dtype=torch.int32, device="cuda")
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), iters, warmup)
    del src, dst
    return ms


def bench_case(problem: Problem, case: Case, source: str, args, liger, workdir: Path) -> dict:
    row = {"family": problem.name, "case": case.name, "shape": _shape(case), "dtype": case.dtype}
    ref, cand, inputs = build(problem, case, source, workdir, case.name)
    want = reference64(ref, inputs)
    row["ratio"] = check(problem, case, cand, inputs, want)
    del want
    torch.cuda.empty_cache()
    with torch.no_grad():
        if row["ratio"] <= 1.0:
            row["ours"] = time_ms(lambda: cand(*inputs), args.iters, args.warmup)
        row["eager"] = time_ms(lambda: ref(*inputs), args.iters, args.warmup)
        if not args.no_compile:
            compiled = torch.compile(ref)
            row["compile"] = time_ms(lambda: compiled(*inputs), args.iters, args.warmup)
        if problem.name in liger:
            try:
                row["liger"] = time_ms(liger[problem.name](ref, inputs), args.iters, args.warmup)
            except Exception as e:  # noqa: BLE001 - an op signature Liger changed: report, keep going
                row["liger_error"] = f"{type(e).__name__}: {e}"[:200]
    row["ideal"], row["bound"] = ideal_ms(problem, case)
    if row["bound"] == "mem":
        row["copy"] = copy_ms(problem.bytes_moved(case), args.iters, args.warmup)
    del ref, cand, inputs
    torch.cuda.empty_cache()
    return row


def sweep(problem: Problem, case: Case, params: dict, changes: list[dict] | None, args, workdir: Path) -> list[dict]:
    """The point and every one-move neighbour of it (what one offline round sees), or the point with each of
    `changes` applied, timed on `case`."""
    space = problem.family.SPACE
    if changes is None:
        points = [("(start)", params)] + [(m.title, p) for m, p in space.applicable(params)]
    else:
        points = [("(start)", params)] + [(json.dumps(c), {**params, **c}) for c in changes]
    rows = []
    want = None
    for i, (title, p) in enumerate(points):
        row = {"move": title}
        try:
            ref, cand, inputs = build(problem, case, space.render(p), workdir, f"sweep{i}")
            want = reference64(ref, inputs) if want is None else want  # same seed: same inputs every time
            row["ratio"] = check(problem, case, cand, inputs, want)
            if row["ratio"] <= 1.0:
                with torch.no_grad():
                    row["ms"] = time_ms(lambda: cand(*inputs), args.iters, args.warmup)
            del ref, cand, inputs
        except Exception as e:  # noqa: BLE001 - a point that does not compile or run is a result
            row["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:160]
        torch.cuda.empty_cache()
        rows.append(row)
        print(_sweep_line(row, rows[0].get("ms")), flush=True)
    del want
    torch.cuda.empty_cache()
    return rows


# -- printing -------------------------------------------------------------------------------------------------------
def _shape(case: Case) -> str:
    return "x".join(str(v) for k, v in case.params.items() if isinstance(v, int) and not isinstance(v, bool)) or \
        "x".join(str(v) for v in case.params.get("shape", []))


def _ms(row: dict, key: str) -> str:
    return f"{row[key]:.3f}" if key in row else "-"


HEADER = (f"{'family':22s} {'shape':22s} {'dtype':9s} {'eager':>8s} {'compile':>8s} {'liger':>8s} {'ours':>8s} "
          f"{'x eager':>8s} {'x comp':>7s} {'roof':>9s} {'copy':>6s}  check")


def _line(row: dict) -> str:
    ours = row.get("ours")
    x_eager = f"{row['eager'] / ours:.2f}" if ours else "-"
    x_comp = f"{row['compile'] / ours:.2f}" if ours and "compile" in row else "-"
    roof = f"{100 * row['ideal'] / ours:.0f}% {row['bound']}" if ours else "-"
    # ours against a copy of the same bytes timed beside it: what this size allows (roof is against 4.2 TB/s)
    of_copy = f"{100 * row['copy'] / ours:.0f}%" if ours and "copy" in row else "-"
    check = "ok" if row["ratio"] <= 1.0 else f"WRONG ({row['ratio']:.3g}x tol)"
    return (f"{row['family']:22s} {row['shape']:22s} {row['dtype']:9s} {_ms(row, 'eager'):>8s} "
            f"{_ms(row, 'compile'):>8s} {_ms(row, 'liger'):>8s} {_ms(row, 'ours'):>8s} {x_eager:>8s} {x_comp:>7s} "
            f"{roof:>9s} {of_copy:>6s}  {check}")


def _sweep_line(row: dict, base: float | None) -> str:
    if "error" in row:
        return f"  {row['move'][:60]:60s} error: {row['error']}"
    if "ms" not in row:
        return f"  {row['move'][:60]:60s} WRONG ({row['ratio']:.3g}x tol)"
    rel = f"{base / row['ms']:.2f}x" if base else ""
    return f"  {row['move'][:60]:60s} {row['ms']:8.3f} ms {rel}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("families", nargs="*", help=f"default: all of {', '.join(family_names())}")
    parser.add_argument("--cases", choices=["timed", "gpu"], default="timed")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (it compiles for minutes)")
    parser.add_argument("--params", default=None, help="JSON: search-space parameters instead of the starter")
    parser.add_argument("--sweep", nargs="?", const="moves", default=None,
                        help="also time every one-move neighbour of the point, or, given a JSON list of parameter "
                             "changes, the point with each change applied")
    parser.add_argument("--json", default=None, help="write the rows here too")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_families: needs a CUDA GPU", file=sys.stderr)
        return 2
    names = args.families or family_names()
    unknown = sorted(set(names) - set(family_names()))
    if unknown:
        parser.error(f"unknown families {unknown}; built-in: {family_names()}")
    liger = _liger_ops()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"liger: {'yes' if liger else 'not installed'}; {args.iters} calls, median, L2 flushed", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="bench_families_"))
    rows, sweeps = [], {}
    print(HEADER, flush=True)
    for name in names:
        problem = load_family(name)
        space = problem.family.SPACE
        params = {**space.default, **json.loads(args.params)} if args.params else dict(space.default)
        source = space.render(params)
        cases = [problem.timed_case] if args.cases == "timed" else [c for c in problem.cases if not c.cpu]
        for case in cases:
            t0 = time.time()
            try:
                row = bench_case(problem, case, source, args, liger, workdir)
            except Exception as e:  # noqa: BLE001 - one broken family must not hide the others
                print(f"{name:22s} {case.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
                continue
            row["seconds"] = round(time.time() - t0, 1)
            rows.append(row)
            print(_line(row), flush=True)
            if "liger_error" in row:
                print(f"  liger: {row['liger_error']}", flush=True)
        if args.sweep:
            print(f"sweep of {name} on {problem.timed_case.describe()}:", flush=True)
            changes = None if args.sweep == "moves" else json.loads(args.sweep)
            sweeps[name] = sweep(problem, problem.timed_case, params, changes, args, workdir)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "sweeps": sweeps}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
