"""`kernelsearch export --model RUN --hf DIR`: a model run's verified kernels in one `kernels`-layout repository.

The repository is one noarch build, `build/torch-cuda/`, like a single Triton kernel's (triton_layout.py), holding:

    __init__.py            a plain function per kernel, named after its problem key (`rmsnorm_32x64_float32`), and
                           `patch(model)`, which puts every kernel into an instance of the model where the run's
                           verify step put it; `KERNELS` says what each one replaces
    _swap.py               kernelsearch/model/swap.py byte for byte: the code verify swapped the kernels in with
    winners/<function>.py  each kernel's evaluated candidate file, byte for byte

The kernels are those verify accepted in the whole model; the ones it left out (broke the model's output, raised,
or were not faster on a GPU) are not exported, and the README lists them with the reason. A model run whose
kernels were never verified (verify did not run or failed) is refused unless --force, which then exports its child
runs' best kernels unverified, never one that verify rejected.
"""
from __future__ import annotations

import json
import pprint
import re
import shutil
from pathlib import Path
from typing import Optional

from kernelsearch.export import triton_layout as tl
from kernelsearch.export.layout import (
    ExportError,
    Source,
    build_id,
    capability,
    cases_table,
    check_name,
    check_target,
    digest_files,
    fmt_ms,
    fmt_x,
    move_into,
    op_name,
    python_name,
    staging,
    write_sums,
)
from kernelsearch.export.source import read_source, with_store
from kernelsearch.model import swap as swap_module
from kernelsearch.model.verify import family_init
from kernelsearch.store import queries as q
from kernelsearch.store.model_queries import model_problems, model_run_of, run_named
from kernelsearch.store.models import KernelExport

VARIANT = tl.VARIANT
_RESERVED = {"patch", "torch", "KERNELS", "winners", "_swap"}
_EVAL_SPEEDUPS = ("speedup", "speedup_compile", "time_ms", "ref_time_ms", "timing_kind", "device")

INIT_HEAD = '''"""{name}: the kernels kernelsearch found for the model `{model}` (model run `{run}`), and patch(model).

Exported by kernelsearch. winners/<function>.py is each kernel's evaluated candidate file, byte for byte;
_swap.py is kernelsearch's model/swap.py, the code the model run's verify step put the kernels into the model with.
`patch(model)` puts every kernel into an instance of that model (the same module paths, shapes and dtypes) where
verify put it, and returns a handle whose `remove()` undoes it. Each kernel is also a plain function named after
its problem, with ModelNew.forward's parameters, built with its INIT inputs on first use (one layer per device and
dtype of its first tensor argument).
"""
from __future__ import annotations

import torch

from . import _swap
{imports}

__all__ = ["patch", "KERNELS", {names}]

# problem key -> the function, what verify swapped (extract.py's part: `swap` says where), ModelNew's init inputs
KERNELS: dict = {kernels}
_MODULES = {{{modules}}}
_LAYERS: dict = {{}}


def _layer(key: str, args: tuple) -> torch.nn.Module:
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    cache = (key, None) if first is None else (key, first.device, first.dtype)
    layer = _LAYERS.get(cache)
    if layer is None:
        spec = KERNELS[key]
        layer = _MODULES[key].ModelNew(*spec["init"])
        if isinstance(layer, torch.nn.Module) and first is not None:
            layer = layer.to(first.device)
            if spec["part"]["kind"] == "family" and first.is_floating_point():   # evaluated cast to the dtype
                layer = layer.to(first.dtype)
        _LAYERS[cache] = layer
    return layer


def patch(model: torch.nn.Module, device=None) -> _swap.Patch:
    """Put every kernel into `model` where the model run's verify step put it (device: of the model's first
    parameter unless given); returns the handle, whose remove() puts the model back."""
    return _swap.patch(model, [(spec["part"], _MODULES[key].ModelNew, spec["init"])
                               for key, spec in KERNELS.items()], device)
'''

FUNCTION = '''

def {fn}({params}):
    """{key}: k{kernel_id}, {what}."""
    return _layer({key!r}, ({tensors}))({call})
'''


def function_name(key: str) -> str:
    """The plain function's name: the problem key as a Python identifier (`rmsnorm_32x64_float32`)."""
    name = op_name(key)
    return f"{name}_op" if name in _RESERVED else name


def shapes_text(part: dict) -> str:
    if part.get("kind") == "family":
        return ", ".join(f"{k}={v}" for k, v in part.get("params", {}).items()) + f"; {part.get('dtype')}"
    sw = part.get("swap", {})
    return " x ".join(str(tuple(s)) for s in sw.get("shapes", [])) + f"; {', '.join(sw.get('dtypes', []))}"


def where_text(part: dict) -> str:
    sw = part.get("swap", {})
    if sw.get("how") == "module":
        paths = sw.get("paths", [])
        return f"module {sw.get('kind')} at {len(paths)} path(s): " + ", ".join(f"`{p}`" for p in paths)
    return f"operator `{sw.get('op')}` in " + ", ".join(f"`{m}`" for m in sw.get("modules", []))


def _choose(s, db: Path, run_name: str, force: bool) -> dict:
    """The model run, the kernels to export (each a Source with its problem row and verify result), the ones left
    out and the problems not searched; refuses an unknown model run and one with no verified kernel unless forced."""
    run = run_named(s, run_name)
    mr = model_run_of(s, run.id) if run is not None else None
    if mr is None:
        what = f"{run_name!r} is a run but not a model run (`export --run {run_name}` exports its best kernel)" \
            if run is not None else f"no model run named {run_name!r}"
        raise ExportError(f"{what} in {db}")
    try:
        verify = json.loads(mr.verify_json) if mr.verify_json else None
    except ValueError:
        verify = {"error": "its stored verify result is not JSON"}
    checked = {r["key"]: r for r in (verify or {}).get("problems", []) if isinstance(r, dict) and "key" in r}
    accepted = set((verify or {}).get("accepted", [])) if verify and "error" not in verify else set()
    verified_ran = verify is not None and "error" not in verify
    on_gpu = (verify or {}).get("device", run.device) == "cuda"
    problems = model_problems(s, mr.id)
    chosen, unverified, left_out, not_searched = [], [], [], []
    plan = json.loads(mr.plan_json) if mr.plan_json else {}
    reasons = {e.get("key"): e.get("reason") for e in plan.get("entries", []) if isinstance(e, dict)}
    for mp in problems:
        if not mp.selected:
            not_searched.append({"key": mp.key, "reason": reasons.get(mp.key) or "not selected by the plan"})
            continue
        r = checked.get(mp.key)
        if r is not None:
            if r.get("status") == "ok" and mp.key in accepted:
                chosen.append((mp, r["kernel_id"], r))
            else:
                left_out.append({"key": mp.key, "kernel_id": r.get("kernel_id"), "status": r.get("status"),
                                 "reason": r.get("reason") or r.get("status")})
            continue
        best = q.best_kernels(s, mp.child_run_id, 1) if mp.child_run_id is not None else []
        if not best:
            why = "its child run never started" if mp.child_run_id is None else \
                "its search found no correct kernel with a speedup"
            left_out.append({"key": mp.key, "kernel_id": None, "status": "no_kernel", "reason": why})
        elif verified_ran or (on_gpu and (best[0].speedup or 0.0) <= 1.0):   # what pipeline._winners kept out
            left_out.append({"key": mp.key, "kernel_id": best[0].id, "status": "not_faster",
                             "reason": f"its best kernel ({fmt_x(best[0].speedup)} of eager) is not faster than the "
                                       "operator it would replace: not swapped in"})
        else:
            unverified.append((mp, best[0].id, None))
    if not chosen:
        why = f"its verify step has not run; the model run is at stage {mr.stage!r}" if verify is None else \
            f"its verify step failed: {verify['error']}" if "error" in verify else \
            "verify accepted none of its kernels" + (": " + "; ".join(f"{x['key']} {x['status']}" for x in left_out)
                                                     if left_out else "")
        if not force:
            raise ExportError(f"model run {run_name!r} has no verified kernels ({why}); --force exports its child "
                              "runs' best kernels unverified (never one verify rejected)")
        if not unverified:
            raise ExportError(f"model run {run_name!r} has no verified kernels ({why}), and no unverified one to "
                              "export with --force")
        chosen = unverified
    kernels = []
    for mp, kid, result in chosen:
        src = read_source(s, db, str(kid), None, force)
        part = json.loads(mp.part_json)
        try:
            init = family_init(part) if part.get("kind") == "family" else []
        except Exception as err:   # noqa: BLE001 - the family's, said in one line
            raise ExportError(f"problem {mp.key}: its init inputs cannot be built ({type(err).__name__}: "
                              f"{str(err).splitlines()[0] if str(err) else ''})") from None
        init = tl.literal_init(init)
        kernels.append({"src": src, "key": mp.key, "spec": mp.spec, "part": part, "init": init, "verify": result,
                        "function": function_name(mp.key)})
    names = [k["function"] for k in kernels]
    if len(set(names)) != len(names):
        raise ExportError(f"two problems of model run {run_name!r} have the same function name: {names}")
    return {"run": run.name, "model": mr.model, "verify": verify, "kernels": kernels, "left_out": left_out,
            "not_searched": not_searched, "forced": not any(r is not None for _, _, r in chosen)}


def export_model(db: Path, run_name: str, target: Path, *, name: Optional[str] = None, force: bool = False,
                 overwrite: bool = False, license: str = "Apache-2.0") -> dict:
    """Write the model run's export; returns what was written (the kernels, the checksum, the store rows' ids)."""
    if not Path(db).is_file():
        raise ExportError(f"no store at {db} (give one with --db)")
    check_target(target, overwrite)
    info = with_store(db, True, lambda s: _choose(s, db, run_name, force))
    name = check_name(name) if name else default_model_name(info["model"], info["run"])
    done = _write(info, target, name, license)
    rows = [KernelExport(kernel_id=k["src"].kernel_id, evaluation_id=k["src"].eval_id, name=name,
                         path=str(target.resolve()), language=k["src"].language, kernel_sha256=k["src"].code_sha256,
                         checksum=done["checksum"], forced=info["forced"]) for k in info["kernels"]]
    done["export_ids"] = with_store(db, False, lambda s: [q.add_export(s, r) for r in rows])
    return done


def default_model_name(model: str, run: str) -> str:
    """`llama-style-m1`: the model file's stem and the run's name, lowered to kernels' name rule."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"{Path(model).stem}-{run}".lower()).strip("-") or "model"
    return slug if slug[0].isalpha() else f"model-{slug}"


def _write(info: dict, target: Path, name: str, license: str) -> dict:
    kernels = info["kernels"]
    archs = sorted({c for k in kernels if (c := _arch(k["src"]))}) or None
    stage = staging(target)
    try:
        variant = stage / "build" / VARIANT
        (variant / "winners").mkdir(parents=True)
        (variant / "_swap.py").write_bytes(Path(swap_module.__file__).read_bytes())
        (variant / "winners" / "__init__.py").write_text('"""Each kernel\'s evaluated candidate file, byte for byte: '
                                                        'winners/<function>.py."""\n')
        for k in kernels:
            (variant / "winners" / f"{k['function']}.py").write_bytes(k["src"].code.encode("utf-8"))
        init_py = _init_py(info, name)
        compile(init_py, "__init__.py", "exec")   # a bug here is ours: fail before anything is moved into place
        (variant / "__init__.py").write_text(init_py)
        shutil.copytree(variant, stage / "torch-ext" / python_name(name))
        kid = build_id(name, variant)
        tl.write_compat(stage, name, kid)
        meta = _metadata(info, kid, name, license, archs, digest_files(variant))
        (variant / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
        (stage / "build.toml").write_text(tl.build_toml(name, license, archs))
        (stage / "README.md").write_text(_readme(info, name, archs))
        checksum = write_sums(stage)
        move_into(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return {"name": name, "path": str(target), "run": info["run"], "checksum": checksum, "forced": info["forced"],
            "kernels": [{"key": k["key"], "function": k["function"], "kernel_id": k["src"].kernel_id,
                         "evaluation_id": k["src"].eval_id} for k in kernels],
            "left_out": info["left_out"], "speedup": (info["verify"] or {}).get("speedup")}


def _arch(src: Source) -> Optional[str]:
    cap = capability((src.evaluation or {}).get("device"))
    if cap is None and (src.detail.get("sm90") or {}).get("status") == "ok":
        cap = "9.0"   # a CPU evaluation compiled it for the H200 (sm_90)
    return cap


def _init_py(info: dict, name: str) -> str:
    kernels = info["kernels"]
    table = {k["key"]: {"function": k["function"], "kernel_id": k["src"].kernel_id, "problem": k["spec"],
                        "init": list(k["init"]), "part": _swap_part(k["part"])} for k in kernels}
    text = INIT_HEAD.format(
        name=name, model=Path(info["model"]).name, run=info["run"],
        imports="\n".join(f"from .winners import {k['function']} as _m_{k['function']}" for k in kernels),
        names=", ".join(f'"{k["function"]}"' for k in kernels),
        kernels=pprint.pformat(table, width=110, sort_dicts=False),
        modules=", ".join(f"{k['key']!r}: _m_{k['function']}" for k in kernels))
    for k in kernels:
        params, tensors, call = tl.forward_params(k["src"].code)
        text += FUNCTION.format(fn=k["function"], params=params, key=k["key"], kernel_id=k["src"].kernel_id,
                                what=_what(k["part"]),
                                tensors=tensors, call=call)
    return text


def _what(part: dict) -> str:
    sw = part.get("swap", {})
    if sw.get("how") == "module":
        return f"in place of the {sw.get('kind')} modules at {len(sw.get('paths', []))} path(s) (KERNELS says which)"
    return f"in place of {sw.get('op')} in {', '.join(sw.get('modules', []))} at {shapes_text(part)}"


def _swap_part(part: dict) -> dict:
    """What swap.py reads of an extracted part, and what says which operator it is."""
    return {k: part[k] for k in ("key", "kind", "family", "op", "params", "dtype", "swap") if k in part}


def _metadata(info: dict, kid: str, name: str, license: str, archs, files: dict) -> dict:
    backend: dict = {"type": "cuda"}
    if archs:
        backend["archs"] = archs
    v = info["verify"] or {}
    model = {k: v.get(k) for k in ("device", "clock", "tolerance", "seed", "rel_error", "eager_ms", "kernels_ms",
                                   "speedup", "predicted", "compile_ms")}
    kernels = []
    for k in info["kernels"]:
        src, r = k["src"], k["verify"] or {}
        ev = src.evaluation or {}
        kernels.append({
            "key": k["key"], "function": k["function"], "file": f"winners/{k['function']}.py",
            "problem": k["spec"], "child_run": src.run_name, "kernel_id": src.kernel_id, "evaluation_id": src.eval_id,
            "status": src.status, "language": src.language, "kernel_sha256": src.code_sha256,
            "op": k["part"].get("op"), "shapes": shapes_text(k["part"]), "swap": k["part"].get("swap"),
            "share": k["part"].get("share"), "verified": k["verify"] is not None,
            **{f"eval_{c}": ev.get(c) for c in _EVAL_SPEEDUPS},
            "model_rel_error": r.get("rel_error"), "model_alone_ms": r.get("alone_ms"),
            "model_speedup_measured": r.get("measured"), "model_speedup_predicted": r.get("predicted")})
    return {"id": kid, "name": name, "version": 1, "license": license, "python-depends": [], "backend": backend,
            "digest": {"algorithm": "sha256", "files": files},
            # read by nothing in kernels (it ignores keys it does not know): where the kernels came from
            "kernelsearch": {"store": info["kernels"][0]["src"].db, "model_run": info["run"], "model": info["model"],
                             "forced": info["forced"],
                             "model_speedup": model, "kernels": kernels, "left_out": info["left_out"],
                             "not_searched": info["not_searched"]}}


def _readme(info: dict, name: str, archs) -> str:
    v = info["verify"] or {}
    kernels = info["kernels"]
    model_name = Path(info["model"]).name
    cpu = v.get("device") == "cpu"
    lines = [f"# {name}", "",
             f"The {len(kernels)} kernel(s) kernelsearch found for the model `{model_name}` (model run "
             f"`{info['run']}`), with `patch(model)`, which puts them into an instance of that model where the run's "
             "verify step put them. "
             + (f"With them the whole model ran {fmt_x(v.get('speedup'))} of eager ({v.get('clock')})."
                if v.get("speedup") is not None else "No end-to-end speedup was measured."), ""]
    if info["forced"]:
        lines += ["> **Warning: these kernels were not verified in the whole model** (exported with `--force`: "
                  + ("the model run's verify step failed: " + v["error"] if "error" in v else
                     "the model run's verify step has not run" if not v else "verify accepted none of them")
                  + "). Each passed its own evaluation; the model's output with them was not checked.", ""]
    py = python_name(name)
    lines += ["## Use", "", "```python", "from pathlib import Path", "from kernels import get_local_kernel", "",
              f'k = get_local_kernel(Path("path/to/{name}"))   # a CUDA machine: picks build/torch-cuda',
              f"model = ...                  # an instance of the model in {model_name}, as the run built it",
              "handle = k.patch(model)      # every kernel below, where verify put it",
              "y = model(x)                 # runs with the kernels",
              "handle.remove()              # the model as it was", ""]
    lines += [f"y = k.{k['function']}(...)   # {k['key']} alone, as a plain function" for k in kernels[:1]]
    lines += ["```", "",
              "`patch` replaces the listed modules with ones that call the kernel (their weights are copied in at "
              "patch time, so patch after loading the weights), and runs the model's forward under a "
              "TorchFunctionMode that calls a kernel in place of its operator only in the listed modules, at the "
              "listed shapes and dtypes; anything else runs as before. It is the code the run's verify step used "
              "(`_swap.py`, kernelsearch's `model/swap.py`).", "",
              "On a machine without CUDA, `kernels` picks no variant (the only one is for the cuda backend); "
              f'`get_local_kernel(Path("path/to/{name}/build/torch-cuda"))` names it directly, which is how the '
              "tests run it under Triton's interpreter (TRITON_INTERPRET=1).", "",
              "## Kernels", "",
              "| function | problem | kernel (evaluation) | swapped in at | shapes; dtype | kernel vs eager | "
              "model with it alone: predicted / measured | model rel. error |", "|---|---|---|---|---|---|---|---|"]
    for k in kernels:
        src, r = k["src"], k["verify"] or {}
        ev = src.evaluation or {}
        err = "-" if r.get("rel_error") is None else f"{r['rel_error']:.2e}"
        lines.append(f"| `{k['function']}` | `{k['spec']}` | k{src.kernel_id} of `{src.run_name}` ({src.eval_id}) | "
                     f"{where_text(k['part'])} | {shapes_text(k['part'])} | {fmt_x(ev.get('speedup'))} "
                     f"({ev.get('timing_kind') or 'no timing'}) | {fmt_x(r.get('predicted'))} / "
                     f"{fmt_x(r.get('measured'))} | {err} |")
    lines += ["", "## The whole model", ""]
    if v and "error" not in v:
        lines += [f"- device: {v.get('device')}; clock: {v.get('clock')}; fresh inputs, seed {v.get('seed')}",
                  f"- output compared with the original's by relative L2 error: {v.get('rel_error', 0.0):.3g} with "
                  f"every kernel (tolerance {v.get('tolerance')})",
                  f"- eager {fmt_ms(v.get('eager_ms'))}, with the kernels {fmt_ms(v.get('kernels_ms'))}: "
                  f"{fmt_x(v.get('speedup'))} (predicted by Amdahl's law from the kernels' own speedups: "
                  f"{fmt_x(v.get('predicted'))})"
                  + (f"; torch.compile {fmt_ms(v['compile_ms'])}" if v.get("compile_ms") is not None else "")]
        if cpu:
            lines.append("- these are CPU timings of Triton's interpreter, not GPU timings: they say nothing about "
                         "the kernels' speed on a GPU")
    else:
        lines.append("- not verified: " + (v.get("error") or "the verify step has not run"))
    lines += ["", "## Left out", ""]
    if info["left_out"]:
        lines += ["Searched, but not exported:", "", "| problem | kernel | why |", "|---|---|---|"]
        lines += [f"| `{x['key']}` | {'k' + str(x['kernel_id']) if x.get('kernel_id') else '-'} | "
                  f"{x['status']}: {x['reason']} |" for x in info["left_out"]]
    else:
        lines.append("No searched problem's kernel was left out.")
    if info["not_searched"]:
        lines += ["", "Not searched (the plan): " + "; ".join(f"`{x['key']}`: {x['reason']}"
                                                               for x in info["not_searched"]) + "."]
    lines += ["", "## Checked on", "", "Each kernel's own evaluation compared its outputs with the problem's reference "
              "on fresh random inputs, per case:", ""]
    for k in kernels:
        lines += [f"### `{k['function']}` (k{k['src'].kernel_id}, evaluation {k['src'].eval_id})", "",
                  *cases_table(k["src"].detail), ""]
    arch = (f"metadata.json declares the arch(s) the kernels were evaluated on ({', '.join(archs)})."
            if archs else "metadata.json declares no arch: the evaluations' device was not a known CUDA GPU.")
    lines += ["## Layout", "",
              f"- `build/{VARIANT}/`: a noarch build (Triton compiles at launch), the variant `kernels` >= 0.17 "
              "prefers for the cuda backend.",
              f"- `build/{VARIANT}/__init__.py`: `patch`, `KERNELS` and the functions; `_swap.py`: the swap code; "
              f"`winners/<function>.py`: each evaluated candidate file, byte for byte (sha256 in metadata.json); "
              f"`{py}/__init__.py`: the compatibility package, re-exporting the same names.",
              "- `build.toml` has the `[torch-noarch]` section kernel-builder builds the same variant from "
              f"`torch-ext/{py}/` (the same Python sources).", f"- {arch}", "",
              "`SHA256SUMS` lists every file with its sha256 (`sha256sum -c SHA256SUMS`)."]
    return "\n".join(lines) + "\n"
