"""Verify a whole model with its winning kernels swapped in, in a subprocess of its own.

`python -m kernelsearch.model.verify REQUEST OUT`. This process loads candidate code (each child run's best kernel,
a `ModelNew` file), so it is never the trusted one: the pipeline starts it with the workers' scrubbed environment
(no API keys) and a timeout, and reads back only its JSON. It is not the judge's full sandbox (no separate user,
no network namespace): a kernel here has already passed the judge in its child run.

Each winner goes where its operator ran: a module unit (RMSNorm, LayerNorm, nn.Linear, Conv1D) is replaced by a
module that calls the kernel's ModelNew (weights copied in; a Linear's weight transposed once, its bias added after);
an operator unit (softmax, a generated operator) is taken over by a TorchFunctionMode that calls the kernel when the
operator runs in one of the problem's modules with the problem's shapes and dtypes. The model's output on fresh
inputs is compared with the original's by relative L2 error, at the tolerance of its dtype (verify.tolerance):
first each kernel alone (one that breaks the model is reported and left out), then all the accepted ones together.
Then the model is timed three ways, side by side: eager, with the kernels, and torch.compile (where asked); and
with each kernel alone, for its measured contribution against the predicted one, 1 / ((1 - f) + f / s) with s the
speedup its child run measured.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from kernelsearch.model.plan import amdahl, amdahl_many
from kernelsearch.model.swap import ModuleSwap, OpSwaps


def _kernel_class(path: str, key: str):
    from kernelsearch.judge.problem import load_source_module

    module = load_source_module(Path(path).read_text(), f"ks_winner_{abs(hash(key))}", filename=path)
    return module.ModelNew


def family_init(part: dict) -> list:
    """A family part's init inputs (its timed case's, as its child run built ModelNew)."""
    from kernelsearch.families import family_at

    problem = family_at(part["family"], part["params"], part["dtype"])
    return problem.build_init_inputs(problem.timed_case)


def _init(part: dict) -> list:
    return family_init(part) if part["kind"] == "family" else []


def _timed(fn, device: str, iters: int) -> float:
    """Median ms of `iters` calls after two warm-ups: CUDA events on a GPU, the wall clock on the CPU."""
    if device == "cuda":
        from kernelsearch.judge.roofline import events_ms

        return events_ms(fn, iters, warmup=2)
    for _ in range(2):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def rel_error(out, ref) -> float:
    import torch

    if out.shape != ref.shape:
        return float("inf")
    o, r = out.double(), ref.double()
    if not torch.isfinite(o).all():
        return float("inf")
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def run_request(req: dict) -> dict:
    import contextlib

    import torch

    from kernelsearch.judge.problem import describe_exception
    from kernelsearch.model.profile import first_tensor, load_model, model_inputs

    device = req["device"]
    model, module = load_model(req["model"], device, 0)   # the profile's weights (seed 0)
    inputs = model_inputs(module, device, req["seed"])    # fresh inputs
    tol = req["tolerance"].get(req["output_dtype"], 1e-4)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ops = OpSwaps(model)

    def forward(mode_on: bool):
        ctx = ops.mode() if mode_on else contextlib.nullcontext()
        ops.stack.clear()
        with torch.no_grad(), ctx:
            return first_tensor(model(*inputs))

    ref = forward(False).clone()
    results, accepted = [], []
    for w in req["winners"]:
        part = w["part"]
        r = {"key": w["key"], "kernel_id": w["kernel_id"], "problem_speedup": w["speedup"], "share": w["share"]}
        results.append(r)
        w["_result"] = r
        try:
            cls = _kernel_class(w["kernel_file"], w["key"])
            if part["swap"]["how"] == "module":
                swap = ModuleSwap(model, part, cls, _init(part), device)
                w["_on"], w["_off"] = swap.install, swap.remove
            else:
                entry = ops.add(part, cls, _init(part), device)
                op = part["swap"]["op"]
                ops.discard(op, entry)
                w["_on"] = lambda entry=entry, op=op: ops.handlers.setdefault(op, []).append(entry)
                w["_off"] = lambda entry=entry, op=op: ops.discard(op, entry)
            w["_on"]()
            try:
                err = rel_error(forward(True), ref)
            finally:
                w["_off"]()
        except Exception as exc:   # noqa: BLE001 - the kernel's failure inside the model is a result
            r.update(status="error", reason=describe_exception(exc))
            continue
        r["rel_error"] = err
        if err <= tol:
            r["status"] = "ok"
            accepted.append(w)
        else:
            r.update(status="breaks_model", reason=f"relative error {err:.3g} over the model's tolerance {tol:g}")
    out: dict = {"device": device, "clock": "cuda-events" if device == "cuda" else "cpu-wall-clock",
                 "tolerance": tol, "seed": req["seed"], "problems": results, "accepted": [w["key"] for w in accepted]}
    for w in accepted:
        w["_on"]()
    out["rel_error"] = rel_error(forward(True), ref) if accepted else 0.0
    for w in accepted:
        w["_off"]()
    iters = req["iters"]
    eager = _timed(lambda: forward(False), device, iters)
    out["eager_ms"] = eager
    if accepted:
        for w in accepted:
            w["_on"]()
        out["kernels_ms"] = _timed(lambda: forward(True), device, iters)
        for w in accepted:
            w["_off"]()
        for w in accepted:   # each kernel alone: its measured contribution
            r = w["_result"]
            w["_on"]()
            r["alone_ms"] = _timed(lambda: forward(True), device, iters)
            w["_off"]()
            r["measured"] = eager / r["alone_ms"]
            r["predicted"] = amdahl(r["share"], r["problem_speedup"]) if r["problem_speedup"] else None
        out["speedup"] = eager / out["kernels_ms"]
        out["predicted"] = amdahl_many([(r["share"], r["problem_speedup"]) for r in results
                                        if r.get("status") == "ok" and r["problem_speedup"]])
    if req["compile"]:
        try:
            compiled = torch.compile(model)
            with torch.no_grad():
                out["compile_ms"] = _timed(lambda: compiled(*inputs), device, iters)
        except Exception as exc:   # noqa: BLE001 - torch.compile's failure is reported, not fatal
            out["compile_error"] = describe_exception(exc)
    return out


def report_lines(result: dict) -> list[str]:
    if "error" in result:
        return [f"verify: {result['error']}"]
    clock = result["clock"] + ("" if result["device"] == "cuda" else " (CPU, Triton interpreter: not GPU timings)")
    lines = [f"verify ({clock}; output compared by relative L2 error, tolerance {result['tolerance']:g}):"]
    for r in result["problems"]:
        if r.get("status") == "ok":
            meas = f"{r['measured']:.3f}x" if "measured" in r else "-"
            pred = f"{r['predicted']:.3f}x" if r.get("predicted") else "-"
            lines.append(f"  {r['key'][:40]:<40} ok  rel.err {r['rel_error']:.2e}  kernel {r['problem_speedup']:.3g}x "
                         f"alone  model: predicted {pred} measured {meas}")
        else:
            lines.append(f"  {r['key'][:40]:<40} LEFT OUT ({r.get('status')}): {r.get('reason')}")
    lines.append(f"  eager {result['eager_ms']:.3f} ms"
                 + (f" | with kernels {result['kernels_ms']:.3f} ms ({result['speedup']:.3f}x, predicted "
                    f"{result['predicted']:.3f}x; whole-model rel.err {result['rel_error']:.2e})"
                    if "kernels_ms" in result else " | no kernel accepted")
                 + (f" | torch.compile {result['compile_ms']:.3f} ms" if "compile_ms" in result else "")
                 + (f" | torch.compile failed: {result['compile_error']}" if "compile_error" in result else ""))
    if "kernels_ms" in result and "compile_ms" in result:
        lines.append(f"  with kernels vs torch.compile: {result['compile_ms'] / result['kernels_ms']:.3f}x")
    return lines


def main(argv: list[str]) -> int:
    req = json.loads(Path(argv[0]).read_text())
    try:
        result = run_request(req)
    except Exception as err:   # noqa: BLE001 - said in one line to the parent
        from kernelsearch.judge.problem import describe_exception

        result = {"error": describe_exception(err)}
    Path(argv[1]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
