"""A Triton kernel in the `kernels` layout: a noarch build, `build/torch-cuda/`.

The evaluated candidate file is the kernel module, `kernel.py`, byte for byte. `__init__.py` exposes the
operation as a plain function with ModelNew.forward's parameters, which builds ModelNew with the problem's init
inputs on first use (one layer per device and dtype, as the evaluation built it), and ModelNew itself. Triton
compiles for the device at launch, so there is no per-arch build; the variant is the backend-specific noarch one
that kernels 0.17 prefers (`torch-universal`, the older name, still loads but ranks last and is not written).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

from kernelsearch.export.layout import ExportError, Source, python_name

VARIANT = "torch-cuda"

INIT_TEMPLATE = '''"""{name}: {summary}

Exported by kernelsearch. kernel.py is the evaluated candidate file, byte for byte (sha256 {sha}).
`{op}` is the operation as a plain function: it calls ModelNew built with INIT_INPUTS (the init inputs of the
problem's timed case), one layer per device and dtype of its first tensor argument, made on first use.
"""
from __future__ import annotations

import torch

from .kernel import ModelNew

__all__ = ["ModelNew", "{op}", "INIT_INPUTS"]

INIT_INPUTS: tuple = {init!r}
_CAST_TO_INPUT_DTYPE = {cast!r}   # the evaluation cast the layer to the case's dtype (a built-in family)
_LAYERS: dict = {{}}


def _layer(args: tuple) -> torch.nn.Module:
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    key = None if first is None else (first.device, first.dtype)
    layer = _LAYERS.get(key)
    if layer is None:
        layer = ModelNew(*INIT_INPUTS)
        if isinstance(layer, torch.nn.Module) and first is not None:
            layer = layer.to(first.device)
            if _CAST_TO_INPUT_DTYPE and first.is_floating_point():
                layer = layer.to(first.dtype)
        _LAYERS[key] = layer
    return layer


def {op}({params}):
    return _layer(({tensors}))({call})
'''

COMPAT_TEMPLATE = '''"""Compatibility: loaders that import build/<variant>/{py}/ as a package get the module of
build/<variant>/__init__.py, loaded from there under the kernel's id, and its public names."""
import importlib.util
import sys
from pathlib import Path

_ID = {kid!r}
_module = sys.modules.get(_ID)
if _module is None:
    _dir = Path(__file__).resolve().parent.parent
    _spec = importlib.util.spec_from_file_location(_ID, _dir / "__init__.py", submodule_search_locations=[str(_dir)])
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_ID] = _module
    try:
        _spec.loader.exec_module(_module)
    except BaseException:
        sys.modules.pop(_ID, None)
        raise
__all__ = list(_module.__all__)
globals().update({{k: getattr(_module, k) for k in __all__}})
'''


def forward_params(code: str) -> tuple[str, str, str]:
    """(parameters, the tuple of positional values, the call's arguments) of ModelNew.forward, without `self`
    and without annotations. Defaults that are not plain constants make it `*args, **kwargs`."""
    tree = ast.parse(code)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    fwd = None if cls is None else next((n for n in cls.body if isinstance(n, ast.FunctionDef)
                                         and n.name == "forward"), None)
    if fwd is None:
        raise ExportError("the kernel's ModelNew has no forward method at the top of its class body")
    a = fwd.args
    positional = [*a.posonlyargs, *a.args][1:]   # without self
    defaults = list(a.defaults)
    if a.args or a.posonlyargs:
        n_pos = len(a.posonlyargs) + len(a.args)
        if len(defaults) == n_pos:   # a default on self: nothing sensible to mirror
            return "*args, **kwargs", "*args, *kwargs.values()", "*args, **kwargs"
    consts = defaults + [d for d in a.kw_defaults if d is not None]
    if not all(isinstance(d, ast.Constant) for d in consts):
        return "*args, **kwargs", "*args, *kwargs.values()", "*args, **kwargs"
    params, values, call = [], [], []
    first_default = len(positional) - len(defaults)
    for i, arg in enumerate(positional):
        d = defaults[i - first_default] if i >= first_default else None
        params.append(arg.arg if d is None else f"{arg.arg}={d.value!r}")
        values.append(arg.arg)
        call.append(arg.arg)
    if a.posonlyargs and len(a.posonlyargs) > 1:
        params.insert(len(a.posonlyargs) - 1, "/")
    if a.vararg:
        params.append(f"*{a.vararg.arg}")
        values.append(f"*{a.vararg.arg}")
        call.append(f"*{a.vararg.arg}")
    elif a.kwonlyargs:
        params.append("*")
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(arg.arg if d is None else f"{arg.arg}={d.value!r}")
        values.append(arg.arg)
        call.append(f"{arg.arg}={arg.arg}")
    if a.kwarg:
        params.append(f"**{a.kwarg.arg}")
        values.append(f"*{a.kwarg.arg}.values()")
        call.append(f"**{a.kwarg.arg}")
    tensors = ", ".join(values) + ("," if len(values) == 1 else "")
    return ", ".join(params), tensors, ", ".join(call)


def literal_init(init: list) -> tuple:
    """The init inputs as a tuple that can be written into the module as a Python literal."""
    for i, v in enumerate(init):
        try:
            ok = ast.literal_eval(repr(v)) == v
        except (ValueError, SyntaxError):
            ok = False
        if not ok:
            raise ExportError(f"init input {i} of the problem ({type(v).__name__}) cannot be written into the "
                              "export as a Python literal")
    return tuple(init)


def write(stage: Path, src: Source, *, name: str, op: str, init: tuple, cast: bool,
          summary: str) -> dict[str, str]:
    """Write the variant's module files (not metadata.json) and the torch-ext sources; returns
    {path: what it is} of the kernel's own files, for the README."""
    params, tensors, call = forward_params(src.code)
    py = python_name(name)
    init_py = INIT_TEMPLATE.format(name=name, summary=summary, sha=src.code_sha256, op=op, init=init, cast=cast,
                                   params=params, tensors=tensors, call=call)
    compile(init_py, "__init__.py", "exec")   # a bug here is ours: fail before anything is written out
    variant = stage / "build" / VARIANT
    for d in (variant, stage / "torch-ext" / py):
        d.mkdir(parents=True)
        (d / "kernel.py").write_bytes(src.code.encode("utf-8"))
        (d / "__init__.py").write_text(init_py)
    return {f"build/{VARIANT}/kernel.py": "the evaluated candidate file, byte for byte",
            f"build/{VARIANT}/__init__.py": f"`{op}` (the plain function) and `ModelNew`",
            f"build/{VARIANT}/{py}/__init__.py": "the compatibility package, re-exporting the same names",
            f"torch-ext/{py}/": "the same Python sources, where kernel-builder reads them (`build.toml`)"}


def write_compat(stage: Path, name: str, kid: str) -> None:
    """The compatibility package; written after metadata.json's id is known, and digested with the variant."""
    d = stage / "build" / VARIANT / python_name(name)
    d.mkdir()
    (d / "__init__.py").write_text(COMPAT_TEMPLATE.format(py=python_name(name), kid=kid))


def build_toml(name: str, license: str, archs: Optional[list[str]]) -> str:
    caps = f"cuda_capabilities = {archs!r}\n".replace("'", '"') if archs else ""
    return (f'[general]\nedition = 6\nname = "{name}"\nversion = 1\nlicense = "{license}"\nbackends = ["cuda"]\n\n'
            f"[torch-noarch]\n{caps}")
