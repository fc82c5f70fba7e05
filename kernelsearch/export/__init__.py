"""`kernelsearch export KERNEL --hf DIR`: a kernel of the store in the Hugging Face `kernels` layout.

A Triton kernel becomes a loadable noarch build (`kernels.get_local_kernel(DIR)` on a CUDA machine); a CUDA C++
(load_inline) kernel becomes the source layout kernel-builder builds, compile-checked with nvcc where it exists.
`--model RUN` writes a model run's verified kernels as one repository with `patch(model)` (model_layout.py).
The export's files and their checksum are recorded in the store (table kernelexport). Layout details:
layout.py (shared), triton_layout.py, cuda_layout.py, model_layout.py; source.py reads what is exported
from the store.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Annotated, Optional

import typer
from sqlalchemy.exc import DatabaseError

from kernelsearch.export import cuda_layout, triton_layout
from kernelsearch.export.layout import (
    ExportError,
    Source,
    build_id,
    capability,
    check_name,
    check_target,
    default_name,
    move_into,
    op_name,
    readme,
    staging,
    write_metadata,
    write_sums,
)
from kernelsearch.export.source import read_source, with_store
from kernelsearch.store import DEFAULT_DB
from kernelsearch.store import queries as q
from kernelsearch.store.models import KernelExport

__all__ = ["ExportError", "export_cmd", "export_kernel"]

def _problem_init(problem: str) -> tuple[tuple, bool, str]:
    """The init inputs of the problem's timed case, whether the evaluation cast the layer to the case's dtype
    (built-in families), and the first line of the reference's docstring."""
    from kernelsearch.families import load_problem
    from kernelsearch.judge.problem import ProblemError, describe_exception

    try:
        prob = load_problem(problem)
        init = prob.build_init_inputs(prob.timed_case)
    except ProblemError as err:
        raise ExportError(f"the problem cannot be loaded for its init inputs: {err}") from None
    except Exception as err:   # noqa: BLE001 - whatever the reference raises is the problem's, in one line
        raise ExportError(f"problem {problem}: get_init_inputs() raised {describe_exception(err)}") from None
    try:
        doc = (ast.get_docstring(ast.parse(prob.reference_source)) or "").strip().splitlines()
    except SyntaxError:
        doc = []
    return triton_layout.literal_init(init), prob.family is not None, doc[0] if doc else ""


def _speedups(src: Source) -> dict:
    ev = src.evaluation or {}
    return {k: ev.get(k) for k in ("speedup", "speedup_compile", "time_ms", "timings", "ref_time_ms", "ref_timings",
                                   "eval_speedup", "timing_kind", "device")}


def export_kernel(db: Path, kernel: Optional[str], target: Path, *, name: Optional[str] = None,
                  run_name: Optional[str] = None, force: bool = False, overwrite: bool = False,
                  license: str = "Apache-2.0", compile_check: bool = True) -> dict:
    """Write the export; returns what was written (the store row's fields, and the compile check's line)."""
    if not Path(db).is_file():
        raise ExportError(f"no store at {db} (give one with --db)")
    check_target(target, overwrite)
    src = with_store(db, True, lambda s: read_source(s, db, kernel, run_name, force))
    name = check_name(name) if name else default_name(src.problem, src.kernel_id)
    done = _write(src, target, name, license, compile_check)
    row = KernelExport(kernel_id=src.kernel_id, evaluation_id=src.eval_id, name=name, path=str(target.resolve()),
                       language=src.language, kernel_sha256=src.code_sha256, checksum=done["checksum"],
                       forced=src.forced)
    # recorded once the files are in place; opened for writing only now (an old store gets the table here)
    done["export_id"] = with_store(db, False, lambda s: q.add_export(s, row))
    return done


def _write(src: Source, target: Path, name: str, license: str, compile_check: bool) -> dict:
    if src.language not in ("triton", "cuda"):
        raise ExportError(f"kernel {src.kernel_id} is in {src.language!r}; the export knows triton and cuda")
    ev = src.evaluation or {}
    cap = capability(ev.get("device"))
    if cap is None and (src.detail.get("sm90") or {}).get("status") == "ok":
        cap = "9.0"   # a CPU evaluation compiled it for the H200 (sm_90)
    archs = [cap] if cap else None
    where = f"k{src.kernel_id} of run `{src.run_name}`, evaluation {src.eval_id}"
    stage = staging(target)
    try:
        if src.language == "triton":
            init, cast, about = _problem_init(src.problem)
            op = op_name(src.problem)
            params = triton_layout.forward_params(src.code)[0]
            problem_lines = [f"- operation: `{op}({params})`, the parameters of ModelNew.forward; ModelNew's init "
                             f"inputs: `{init!r}` (the timed case's)"] + ([f"- reference: {about}"] if about else [])
            summary = f"the {src.problem} kernel {where} ({src.status}, {_x(ev.get('speedup'))} over eager)"
            files = triton_layout.write(stage, src, name=name, op=op, init=init, cast=cast, summary=summary)
            variant = stage / "build" / triton_layout.VARIANT
            kid = build_id(name, variant)
            triton_layout.write_compat(stage, name, kid)
            write_metadata(variant, kid=kid, name=name, license=license, archs=archs, src=src,
                           speedups=_speedups(src))
            (stage / "build.toml").write_text(triton_layout.build_toml(name, license, archs))
            usage, notes, checked = _triton_text(name, op, init, archs), _triton_notes(archs), None
        else:
            files, inline = cuda_layout.write(stage, src.code, name, license, archs or ["9.0"])
            checked = cuda_layout.nvcc_check(stage, name, (archs or ["9.0"])[0]) if compile_check else None
            usage = [f"This is the source layout; build it with kernel-builder, then load the build with "
                     f"`kernels.get_local_kernel(Path(...))` and call `{'`, `'.join(inline.functions)}`."]
            problem_lines = [f"- functions (load_inline's `functions`, registered as torch ops): "
                             f"`{'`, `'.join(inline.functions)}`"]
            notes = _cuda_notes(checked, compile_check, archs)
        title = (f"A {src.language} kernel found by kernelsearch for `{src.problem}`: {where} "
                 f"({src.status}, {_x(ev.get('speedup'))} over eager on {ev.get('device') or 'an unknown device'}).")
        (stage / "README.md").write_text(readme(src, name=name, title_line=title, usage=usage, problem=problem_lines,
                                                layout_notes=notes, files=files))
        checksum = write_sums(stage)
        move_into(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return {"name": name, "path": str(target), "language": src.language, "kernel_id": src.kernel_id,
            "evaluation_id": src.eval_id, "checksum": checksum, "forced": src.forced, "compile_check": checked}


def _x(v) -> str:
    return "no speedup measured" if v is None else f"{v:.3g}x"


def _triton_text(name: str, op: str, init: tuple, archs) -> list[str]:
    return ["```python", "from pathlib import Path", "import torch", "from kernels import get_local_kernel", "",
            f'k = get_local_kernel(Path("path/to/{name}"))   # a CUDA machine: picks build/torch-cuda',
            f"y = k.{op}(...)          # the operation, on CUDA tensors like the reference's inputs",
            f"layer = k.ModelNew({', '.join(map(repr, init))})   # the layer itself", "```", "",
            "On a machine without CUDA, `kernels` picks no variant (the only one is for the cuda backend); "
            f'`get_local_kernel(Path("path/to/{name}/build/torch-cuda"))` names it directly, which is how the '
            "tests run it under Triton's interpreter (TRITON_INTERPRET=1)."]


def _triton_notes(archs) -> list[str]:
    arch = (f"metadata.json declares the arch it was evaluated on ({', '.join(archs)}); on another GPU `kernels` "
            "refuses it unless loaded with `check_arch=False` (Triton compiles for the device at launch, but only "
            "this arch was checked).") if archs else \
        "metadata.json declares no arch: the evaluation's device was not a known CUDA GPU."
    return ["- `build/torch-cuda/`: a noarch build (Triton compiles at launch), the variant `kernels` >= 0.17 "
            "prefers for the cuda backend; `torch-universal`, the older name, is not written.",
            "- `build.toml` has the `[torch-noarch]` section kernel-builder builds the same variant from "
            "`torch-ext/`.", f"- {arch}"]


def _cuda_notes(checked: Optional[str], asked: bool, archs) -> list[str]:
    check = checked or ("no nvcc compile check was asked for" if not asked else
                        "no nvcc on the exporting machine: the sources were not compile-checked")
    return ["- This is kernel-builder's source layout, not a build: nothing here was built for any variant "
            "(that takes kernel-builder, for each torch and CUDA version), and `build/` is absent.",
            f"- {check}.", f"- `cuda-capabilities`: {', '.join(archs or ['9.0'])}"
            + ("" if archs else " (the evaluation's device was not a known GPU: the H200's, the project's target)")]


def export_cmd(
    hf: Annotated[Path, typer.Option("--hf", help="The directory to write (the `kernels` layout).")],
    kernel: Annotated[Optional[str], typer.Argument(metavar="[KERNEL_ID]",
                                                    help="A kernel id (12 or k12); none: the best of --run.")] = None,
    name: Annotated[Optional[str], typer.Option(help="The kernel's name (default: problem-kID; with --model: the "
                                                     "model file's stem and the run's name, llama-style-m1).")] = None,
    run: Annotated[Optional[str], typer.Option("--run", help="The run whose best kernel to export.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", metavar="RUN", help=(
        "A model run: its kernels verify accepted in the whole model, in one repository with patch(model)."))] = None,
    force: Annotated[bool, typer.Option(help="Export a kernel that did not pass its evaluation; with --model, a "
                                             "model run's kernels that were never verified in the model.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace an export's files in a non-empty DIR (other files "
                                                 "there are kept).")] = False,
    license: Annotated[str, typer.Option(help="The license metadata.json and build.toml state.")] = "Apache-2.0",
    db: Annotated[Path, typer.Option("--db", help="The SQLite store.")] = DEFAULT_DB,
) -> None:
    """Write a kernel in the Hugging Face `kernels` layout (loadable with kernels.get_local_kernel).

    `--model RUN`: a model run's verified kernels in one repository, each a function named after its problem, with
    `patch(model)` putting them into an instance of the model where the run's verify step put them; the README lists
    the kernels verify left out, and why."""
    try:
        if model is not None:
            if kernel is not None or run is not None:
                raise ExportError("--model RUN exports a model run's kernels; give no KERNEL_ID or --run with it")
            from kernelsearch.export.model_layout import export_model

            done = export_model(db, model, hf, name=name, force=force, overwrite=overwrite, license=license)
        else:
            done = export_kernel(db, kernel, hf, name=name, run_name=run, force=force, overwrite=overwrite,
                                 license=license)
    except ExportError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    except DatabaseError as err:
        orig = getattr(err, "orig", None) or err
        typer.echo(f"error: store {db}: SQLite says {str(orig).splitlines()[0] if str(orig) else orig!r}", err=True)
        raise typer.Exit(2) from None
    if model is not None:
        _say_model(done)
        return
    if done["forced"]:
        typer.echo(f"warning: kernel {done['kernel_id']} did not pass its evaluation; exported with --force", err=True)
    typer.echo(f"exported k{done['kernel_id']} ({done['language']}, evaluation {done['evaluation_id']}) as "
               f"{done['name']} to {done['path']} (checksum {done['checksum'][:16]}...)")
    if done["compile_check"]:
        typer.echo(done["compile_check"])


def _say_model(done: dict) -> None:
    if done["forced"]:
        typer.echo(f"warning: model run {done['run']}'s kernels were not verified in the model; exported with --force",
                   err=True)
    ks = ", ".join(f"{k['function']} (k{k['kernel_id']}, evaluation {k['evaluation_id']})" for k in done["kernels"])
    x = done["speedup"]
    typer.echo(f"exported {len(done['kernels'])} kernel(s) of model run {done['run']} as {done['name']} to "
               f"{done['path']}: {ks}; patch(model) puts them in"
               + (f" (end-to-end {x:.3g}x of eager as verified)" if x is not None else "")
               + f" (checksum {done['checksum'][:16]}...)")
    for x in done["left_out"]:
        typer.echo(f"left out {x['key']}: {x['status']}: {x['reason']}")
