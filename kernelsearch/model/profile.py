"""Profile a whole model: torch.profiler time per operator, grouped by aten operator + module path + shapes + dtypes.

Runs in a subprocess of its own (`python -m kernelsearch.model.profile REQUEST OUT`): the model's memory and its
CUDA context never live in the process that then starts the evaluator pool. The model file is the user's own
reference (trusted, as a problem's reference is); no candidate code is loaded here.

Every module's forward is wrapped in a profiler range `ks.module::<path>`, so each operator the model calls from
Python (an aten op whose parent is not an aten op) is charged to the innermost module it ran in. On a GPU an
operator's time is the CUDA time of the kernels it launched; on the CPU its CPU time, labelled `cpu`. Paths are
kept per layer and also normalised (`layers.3.mlp` -> `layers.*.mlp`), so one row covers every layer's copy.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from kernelsearch.model.swap import ROOT, norm_path  # one definition, shared with the swaps

MODULE_RANGE = "ks.module::"
# profiler dtype names -> torch dtype names
_DTYPES = {"float": "float32", "c10::BFloat16": "bfloat16", "c10::Half": "float16", "double": "float64",
           "long int": "int64", "int": "int32", "bool": "bool", "unsigned char": "uint8", "signed char": "int8",
           "short int": "int16"}


@dataclass
class Row:
    op: str                        # aten operator as called from Python (aten::linear, aten::softmax, ...)
    module: str                    # the innermost module it ran in, normalised path (`model` for the root)
    module_class: str
    shapes: list                   # input shapes, [] for a non-tensor argument
    dtypes: list                   # input dtypes (torch names) or the profiler's name for non-tensors
    scalars: list                  # the non-tensor arguments' values, where the profiler recorded them
    calls: float = 0.0             # per forward
    time_ms: float = 0.0           # per forward, all calls
    share: float = 0.0             # of the model's profiled time
    paths: list = field(default_factory=list)   # the raw module paths (every layer's)


def _kind(module) -> Optional[str]:
    """What a module is, where a built-in family or the matmul problem fits it as a whole."""
    import torch.nn as nn

    name = type(module).__name__
    weight = getattr(module, "weight", None)
    if name.endswith("RMSNorm") and weight is not None and weight.dim() == 1:
        return "rmsnorm"
    if isinstance(module, nn.LayerNorm) and module.elementwise_affine and module.bias is not None \
            and len(module.normalized_shape) == 1:
        return "layernorm"
    if isinstance(module, nn.Linear):
        return "linear"
    if name == "Conv1D" and weight is not None and weight.dim() == 2:   # GPT-2's x @ W + b, W (in, out)
        return "conv1d"
    return None


def _module_info(module, args) -> dict:
    import torch

    kind = _kind(module)
    x = args[0] if args and isinstance(args[0], torch.Tensor) else None
    info: dict[str, Any] = {"class": type(module).__name__, "kind": kind,
                            "shape": list(x.shape) if x is not None else None,
                            "dtype": str(x.dtype).removeprefix("torch.") if x is not None else None}
    w = getattr(module, "weight", None)
    if kind == "rmsnorm":
        eps = getattr(module, "eps", None)
        eps = getattr(module, "variance_epsilon", 1e-6) if eps is None else eps
        info.update(hidden=int(w.shape[0]), eps=float(eps))
    elif kind == "layernorm":
        info.update(hidden=int(module.normalized_shape[0]), eps=float(module.eps))
    elif kind == "linear":
        info.update(k=int(module.in_features), n=int(module.out_features), bias=module.bias is not None)
    elif kind == "conv1d":
        info.update(k=int(w.shape[0]), n=int(w.shape[1]), bias=getattr(module, "bias", None) is not None)
    return info


def load_model(path: str, device: str, seed: int):
    """The model file's Model(*get_init_inputs()) and get_inputs(), drawn from `seed`, on `device`, in eval mode."""
    import torch

    from kernelsearch.judge.problem import load_source_module

    module = load_source_module(Path(path).read_text(), "ks_model_" + re.sub(r"\W", "_", Path(path).stem),
                                filename=str(path))
    torch.manual_seed(seed)
    with torch.device(device):   # weights drawn on the device itself (a GPU-sized model's init on one CPU is slow)
        model = module.Model(*module.get_init_inputs())
    return model.to(device).eval(), module


def model_inputs(module, device: str, seed: int) -> list:
    import torch

    torch.manual_seed(seed)
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in module.get_inputs()]


def first_tensor(out):
    """A model's output as one tensor: itself, `logits` of a Hugging Face output, or the first of a tuple."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, (tuple, list)) and out:
        return first_tensor(out[0])
    raise TypeError(f"the model returned {type(out).__name__}, not a tensor")


def profile(model, inputs: list, device: str, iters: int) -> dict:
    """The grouped table of one model; times per forward."""
    import torch
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    modules: dict[str, dict] = {}
    stack: list = []
    handles = []
    for path, m in model.named_modules():
        name = path or ROOT

        def pre(mod, args, name=name):
            if name not in modules:
                modules[name] = _module_info(mod, args)
            rf = record_function(MODULE_RANGE + name)
            rf.__enter__()
            stack.append(rf)

        def post(mod, args, out):
            stack.pop().__exit__(None, None, None)

        handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with torch.no_grad():
            model(*inputs)   # warm-up: lazy initialisation, cuBLAS handles, autotuning
            if cuda:
                torch.cuda.synchronize()
            with torch_profile(activities=activities, record_shapes=True) as prof:
                for _ in range(iters):
                    out = model(*inputs)
                if cuda:
                    torch.cuda.synchronize()
    finally:
        for h in handles:
            h.remove()
    groups: dict[tuple, Row] = {}
    kineto_dtypes = None   # torch before 2.12: FunctionEvent has no input_dtypes; its id is the kineto correlation id
    for e in prof.events():
        if not e.name.startswith("aten::") or (e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::")):
            continue
        parent, path = e.cpu_parent, ROOT
        while parent is not None:
            if parent.name.startswith(MODULE_RANGE):
                path = parent.name[len(MODULE_RANGE):]
                break
            parent = parent.cpu_parent
        us = e.device_time_total if cuda else e.cpu_time_total
        shapes = [list(s) for s in e.input_shapes]
        raw = getattr(e, "input_dtypes", None)
        if raw is None:
            if kineto_dtypes is None:
                kineto_dtypes = {k.correlation_id(): list(k.dtypes()) for k in prof.profiler.kineto_results.events()
                                 if k.device_type() == torch.autograd.DeviceType.CPU}
            raw = kineto_dtypes.get(e.id, [])
        dtypes = [_DTYPES.get(d, d) for d in raw]
        scalars = [_plain(v) for v in (getattr(e, "concrete_inputs", None) or [])]
        key = (e.name, norm_path(path), json.dumps(shapes), json.dumps(dtypes), json.dumps(scalars))
        row = groups.get(key)
        if row is None:
            row = groups[key] = Row(op=e.name, module=norm_path(path),
                                    module_class=modules.get(path, {}).get("class", ""),
                                    shapes=shapes, dtypes=dtypes, scalars=scalars)
        row.calls += 1
        row.time_ms += us / 1000.0
        if path not in row.paths:
            row.paths.append(path)
    rows = sorted(groups.values(), key=lambda r: -r.time_ms)
    total = sum(r.time_ms for r in rows)
    for r in rows:
        r.calls /= iters
        r.time_ms /= iters
        r.share = r.time_ms * iters / total if total else 0.0
    out_t = first_tensor(out)
    return {"clock": "cuda" if cuda else "cpu", "iters": iters, "total_ms": total / iters,
            "rows": [asdict(r) for r in rows], "modules": modules,
            "output": {"shape": list(out_t.shape), "dtype": str(out_t.dtype).removeprefix("torch.")}}


def _plain(v):
    """A profiler's concrete input as JSON: numbers and strings as they are, anything else as its text."""
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v)


def cpu_ceilings() -> dict:
    """Rough ceilings of this CPU, measured in a moment: copy bandwidth and an fp32 matmul rate. Only for a plan
    made on the CPU, where the times themselves are CPU times."""
    import time

    import torch

    n = 1 << 23
    a, b = torch.randn(n), torch.empty(n)
    b.copy_(a)
    t0 = time.perf_counter()
    for _ in range(5):
        b.copy_(a)
    copy_s = (time.perf_counter() - t0) / 5
    x = torch.randn(512, 512)
    x @ x
    t0 = time.perf_counter()
    for _ in range(5):
        x @ x
    mm_s = (time.perf_counter() - t0) / 5
    rate = 2 * 512 ** 3 / mm_s / 1e12
    return {"copy_gbps": 2 * n * 4 / copy_s / 1e9, "float32_tflops": rate, "bfloat16_tflops": rate,
            "float16_tflops": rate, "device": "cpu"}


def run_request(req: dict) -> dict:
    import torch

    device = req["device"]
    model, module = load_model(req["model"], device, req.get("seed", 0))
    inputs = model_inputs(module, device, req.get("seed", 0) + 1)
    result = profile(model, inputs, device, req.get("iters", 3))
    del model, inputs
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        from kernelsearch.judge.roofline import ceilings

        result["ceilings"] = ceilings(device)
        result["device_name"] = torch.cuda.get_device_name(torch.device(device))
    else:
        result["ceilings"] = cpu_ceilings()
        result["device_name"] = "cpu"
    return result


def main(argv: list[str]) -> int:
    req = json.loads(Path(argv[0]).read_text())
    try:
        result = run_request(req)
    except Exception as err:   # noqa: BLE001 - the model's failure, said in one line to the parent
        from kernelsearch.judge.problem import describe_exception

        result = {"error": describe_exception(err)}
    Path(argv[1]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
