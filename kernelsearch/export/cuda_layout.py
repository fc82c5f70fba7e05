"""A CUDA C++ (load_inline) kernel as the source layout kernel-builder builds from.

    build.toml                    [general] edition 6, [torch] (the binding), [kernel.<py>] language cpp-cuda
    csrc/<py>.cu                  what load_inline compiled as cuda.cu: its three implicit includes, then the
                                  candidate's cuda_sources joined by newlines (byte for byte)
    torch-ext/torch_binding.cpp   the candidate's cpp_sources (byte for byte), then the operator registrations:
                                  one wrapper per function load_inline bound, with the types a torch op takes
    torch-ext/<py>/__init__.py    the functions, calling the registered ops (`_ops` is written by kernel-builder)

Nothing is built here: a build needs kernel-builder (Nix) for every variant. Where `nvcc` exists the sources are
compile-checked for sm_90 against this machine's torch headers, and the README says what was and was not done.
"""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from kernelsearch.export.layout import ExportError, python_name

IMPLICIT_CUDA = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
NVCC_TIMEOUT_S = 600

# C++ parameter types -> (schema type, wrapper parameter type, how the wrapper passes it on)
_SCALARS = {"int": "int", "int64_t": "int", "long": "int", "int32_t": "int", "long long": "int", "size_t": "int",
            "unsigned int": "int", "float": "float", "double": "float", "bool": "bool"}
_CXX = {"int": "int64_t", "float": "double", "bool": "bool"}
_TENSOR = re.compile(r"^(const\s+)?(torch::|at::)?Tensor\s*(&)?$")
_TENSORS = re.compile(r"^(const\s+)?std::vector<\s*(torch::|at::)?Tensor\s*>\s*(&)?$")


@dataclass
class Inline:
    name: str
    cpp: list[str]
    cuda: list[str]
    functions: list[str]
    implicit_headers: bool


def _value(node: ast.expr, names: dict[str, ast.expr], depth: int = 0):
    """A string or a list of strings from a constant, a name bound once at the top of the file, or `+` of
    those."""
    if depth > 8:
        raise ValueError("too deep")
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool)):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, names, depth + 1) for e in node.elts]
    if isinstance(node, ast.Name) and node.id in names:
        return _value(names[node.id], names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _value(node.left, names, depth + 1) + _value(node.right, names, depth + 1)
    raise ValueError(ast.unparse(node)[:60])


def read_inline(code: str) -> Inline:
    """The one load_inline call of a candidate, its arguments read from the source (never run)."""
    tree = ast.parse(code)
    counts: dict[str, int] = {}
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            n = node.targets[0].id
            counts[n] = counts.get(n, 0) + 1
            names[n] = node.value
    names = {k: v for k, v in names.items() if counts[k] == 1}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and ast.unparse(n.func).endswith("load_inline")]
    if len(calls) != 1:
        raise ExportError(f"a CUDA kernel is exported from one load_inline call; this one has {len(calls)}")
    call = calls[0]
    args = dict(zip(("name", "cpp_sources", "cuda_sources"), call.args))
    args.update({k.arg: k.value for k in call.keywords if k.arg})
    got = {}
    for key in ("name", "cpp_sources", "cuda_sources", "functions", "no_implicit_headers"):
        if key not in args:
            continue
        try:
            got[key] = _value(args[key], names)
        except (ValueError, TypeError) as err:
            raise ExportError(f"load_inline's {key} is not text the export can read from the source without "
                              f"running it ({err})") from None
    as_list = lambda v: [v] if isinstance(v, str) else list(v or [])
    if not got.get("cuda_sources"):
        raise ExportError("load_inline has no cuda_sources: nothing to export as a CUDA kernel")
    if not got.get("functions"):
        raise ExportError("load_inline binds no functions (functions=[...]): the export registers those as ops")
    return Inline(name=str(got.get("name", "ext")), cpp=as_list(got.get("cpp_sources")),
                  cuda=as_list(got["cuda_sources"]), functions=as_list(got["functions"]),
                  implicit_headers=not got.get("no_implicit_headers", False))


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)


def signature(fn: str, sources: str) -> tuple[str, list[tuple[str, str]]]:
    """(return type, [(parameter type, name)]) of the C++ function `fn`, from its declaration."""
    m = re.search(rf"([\w:<>,\s]+?)\s*\b{re.escape(fn)}\s*\(([^()]*)\)\s*[;{{]", _strip_comments(sources))
    if not m:
        raise ExportError(f"no C++ declaration of {fn}(...) in the kernel's sources")
    ret = " ".join(m.group(1).split()).removeprefix("static ").removeprefix("inline ")
    params = []
    for i, p in enumerate(x.strip() for x in m.group(2).split(",") if x.strip() and x.strip() != "void"):
        p = p.split("=")[0].strip()
        pm = re.match(r"^(.*?)([A-Za-z_]\w*)$", p)
        if not pm or not pm.group(1).strip():
            params.append((" ".join(p.split()), f"arg{i}"))
        else:
            params.append((" ".join(pm.group(1).replace("&", " & ").split()).replace(" &", "&"), pm.group(2)))
    return ret, params


def _schema_type(cxx: str, fn: str, alias: list[int]) -> tuple[str, str]:
    """(schema type, wrapper parameter type) of one C++ parameter type."""
    t = cxx.replace(" &", "&").strip()
    m = _TENSOR.match(t)
    if m:
        if m.group(3) and not m.group(1):   # a non-const reference: the op writes to it
            alias[0] += 1
            return f"Tensor({chr(ord('a') + alias[0] - 1)}!)", "at::Tensor&"
        return "Tensor", "const at::Tensor&"
    if _TENSORS.match(t):
        return "Tensor[]", "const std::vector<at::Tensor>&"
    base = re.sub(r"^const\s+|&$", "", t).strip().removeprefix("std::")
    if base in _SCALARS:
        return _SCALARS[base], _CXX[_SCALARS[base]]
    raise ExportError(f"{fn}: parameter type {cxx!r} has no torch operator schema type the export knows "
                      "(Tensor, std::vector<Tensor>, integers, float, double, bool)")


def _return(ret: str, fn: str) -> tuple[str, str]:
    r = re.sub(r"^const\s+", "", ret).strip()
    if r == "void":
        return "()", "void"
    if _TENSOR.match(r) and not r.endswith("&"):
        return "Tensor", "at::Tensor"
    if _TENSORS.match(r) and not r.endswith("&"):
        return "Tensor[]", "std::vector<at::Tensor>"
    raise ExportError(f"{fn}: return type {ret!r} has no torch operator schema type the export knows")


def binding(inline: Inline) -> tuple[str, list[tuple[str, list[str]]]]:
    """torch_binding.cpp, and each function with its parameter names (for the Python wrappers)."""
    sources = "\n".join(inline.cpp + inline.cuda)
    wrappers, defs, pyfns = [], [], []
    for fn in inline.functions:
        ret, params = signature(fn, sources)
        alias = [0]
        typed = [(*_schema_type(t, fn, alias), n) for t, n in params]
        schema_ret, cxx_ret = _return(ret, fn)
        args = ", ".join(f"{s} {n}" for s, _, n in typed)
        defs.append(f'  ops.def("{fn}({args}) -> {schema_ret}");\n'
                    f'  ops.impl("{fn}", torch::kCUDA, &ks_op_{fn});')
        cargs = ", ".join(f"{c} {n}" for _, c, n in typed)
        body = f"{fn}({', '.join(n for _, _, n in typed)})"
        wrappers.append(f"static {cxx_ret} ks_op_{fn}({cargs}) {{ {'return ' if cxx_ret != 'void' else ''}{body}; }}")
        pyfns.append((fn, [n for _, _, n in typed]))
    text = ("// The kernel's cpp_sources as load_inline compiled them (its implicit include first), then one wrapper\n"
            "// per function it bound, with the parameter types a torch operator takes, registered as ops.\n"
            '#include <torch/library.h>\n#include "registration.h"\n\n'
            + ("#include <torch/extension.h>\n" if inline.implicit_headers else "") + "\n".join(inline.cpp)
            + "\n\n// ---- kernelsearch export: operator registration ----\n" + "\n".join(wrappers)
            + "\n\nTORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n" + "\n".join(defs)
            + "\n}\n\nREGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n")
    return text, pyfns


def cuda_text(inline: Inline) -> str:
    return "\n".join((IMPLICIT_CUDA if inline.implicit_headers else []) + inline.cuda)


def write(stage: Path, code: str, name: str, license: str, archs: list[str]) -> tuple[dict[str, str], Inline]:
    """Write the source layout; returns {path: what it is} and the parsed load_inline call."""
    inline = read_inline(code)
    py = python_name(name)
    bind, pyfns = binding(inline)
    (stage / "csrc").mkdir()
    (stage / "csrc" / f"{py}.cu").write_bytes(cuda_text(inline).encode("utf-8"))
    ext = stage / "torch-ext" / py
    ext.mkdir(parents=True)
    (stage / "torch-ext" / "torch_binding.cpp").write_text(bind)
    funcs = "".join(f"\n\n\ndef {fn}({', '.join(ps)}):\n    return ops.{fn}({', '.join(ps)})" for fn, ps in pyfns)
    (ext / "__init__.py").write_text(
        f'"""{name}: the functions the kernel\'s load_inline call bound, as torch ops (`_ops` is written by\n'
        f'kernel-builder at build time)."""\nfrom ._ops import ops\n\n__all__ = {[fn for fn, _ in pyfns]!r}'
        f"{funcs}\n")
    (stage / "candidate.py").write_bytes(code.encode("utf-8"))
    caps = ", ".join(f'"{a}"' for a in archs)
    (stage / "build.toml").write_text(
        f'[general]\nedition = 6\nname = "{name}"\nversion = 1\nlicense = "{license}"\nbackends = ["cuda"]\n\n'
        f'[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n\n'
        f'[kernel.{py}]\nlanguage = "cpp-cuda"\nsrc = ["csrc/{py}.cu"]\ndepends = ["torch"]\n'
        f"cuda-capabilities = [{caps}]\n")
    files = {f"csrc/{py}.cu": "load_inline's cuda.cu: its implicit includes, then the candidate's cuda_sources",
             "torch-ext/torch_binding.cpp": "the candidate's cpp_sources and the operator registrations",
             f"torch-ext/{py}/__init__.py": f"the functions {', '.join(inline.functions)}, calling the ops",
             "candidate.py": "the evaluated candidate file, byte for byte (its ModelNew for reference; it "
                             "compiles with load_inline at import, the layout does not)"}
    return files, inline


REGISTRATION_STANDIN = """#pragma once
// A stand-in for kernel-builder's registration.h, for the compile check only (not part of the export).
#include <Python.h>
#define _KS_CONCAT(A, B) A##B
#define KS_CONCAT(A, B) _KS_CONCAT(A, B)
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define REGISTER_EXTENSION(NAME) PyMODINIT_FUNC KS_CONCAT(PyInit_, NAME)(void) { return nullptr; }
"""


def nvcc_check(stage: Path, name: str, arch: str = "9.0") -> Optional[str]:
    """Compile csrc/*.cu and torch-ext/torch_binding.cpp with nvcc for `arch` against this machine's torch
    headers. None: no nvcc here (nothing checked); else a line saying what passed or the first error."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    import torch
    from torch.utils.cpp_extension import include_paths

    abi = torch.compiled_with_cxx11_abi()

    sm = arch.replace(".", "")
    incs = [f"-I{p}" for p in include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "registration.h").write_text(REGISTRATION_STANDIN)
        jobs = [(stage / "csrc" / f"{python_name(name)}.cu", []),
                (stage / "torch-ext" / "torch_binding.cpp", ["-x", "cu", f"-I{tmp}",
                                                             f"-DTORCH_EXTENSION_NAME=_{python_name(name)}"])]
        for src, extra in jobs:
            cmd = [nvcc, "-c", str(src), "-o", str(Path(tmp, src.stem + ".o")), "-std=c++17",
                   f"-gencode=arch=compute_{sm},code=sm_{sm}", f"-D_GLIBCXX_USE_CXX11_ABI={int(abi)}", *incs, *extra]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return f"nvcc compile check failed: {src.name} took over {NVCC_TIMEOUT_S} s"
            if p.returncode != 0:
                err = next((ln for ln in p.stderr.splitlines() if "error" in ln), p.stderr.strip()[-300:])
                return f"nvcc compile check failed on {src.relative_to(stage)}: {err.strip()[:300]}"
    return (f"nvcc compile check passed for sm_{sm} ({version[-1] if version else 'nvcc'}): csrc/ and "
            "torch-ext/torch_binding.cpp compiled against this machine's torch headers")
