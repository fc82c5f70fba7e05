"""The sources of a candidate's load_inline extensions, read from the file's text, and the one definition of an
extension as load_inline writes it (`from_args`): the sm_90a check (cuda_check.py) compiles what `extensions(source)`
reads; on a GPU the judge builds the same (cuda_build.py) and the candidate's runner, given the arguments at run
time, finds that build by the same key.

The reader evaluates literals only, never the file: module-level assignments in order, then, inside a function, its
own assignments before the call; names bound to literals, f-strings of them, lists, `+`, `"sep".join([...])`.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

# a candidate's extra_cuda_cflags that change code generation and nothing on this machine; others are left out
KEPT_FLAGS = re.compile(r"^(-O[0-3]|--use_fast_math|-use_fast_math|--ftz=(true|false)|--prec-div=(true|false)|"
                        r"--prec-sqrt=(true|false)|--fmad=(true|false)|-lineinfo|--extra-device-vectorization|"
                        r"-D\w+(=\w+)?|--maxrregcount=\d+|-maxrregcount=\d+)$")

# the build options besides the sources: part of what an extension is (its key), read where the reader can
OPTIONS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths", "is_python_module")


class Unreadable(Exception):
    """An expression the reader cannot evaluate from literals."""


@dataclass(frozen=True)
class Extension:
    name: str
    cpp: str                  # main.cpp as load_inline writes it
    cuda: str | None          # cuda.cu as load_inline writes it, or None (a C++-only extension)
    flags: tuple[str, ...]    # the candidate's extra_cuda_cflags that are kept (KEPT_FLAGS)
    line: int
    options: str = "{}"       # OPTIONS as given (JSON), or "unreadable": what else the build would be given


class _Reader:
    """Values of the file's literal expressions: module-level assignments in order, then, inside a function, its own
    assignments before the call."""

    def __init__(self, tree: ast.Module):
        self.module = self._assign(tree.body, {})

    def _assign(self, body: list[ast.stmt], env: dict, until: int | None = None) -> dict:
        env = dict(env)
        for stmt in body:
            if until is not None and stmt.lineno >= until:
                break
            targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
            for t in targets:
                if isinstance(t, ast.Name):
                    try:
                        env[t.id] = self.value(stmt.value, env)
                    except Unreadable:
                        env.pop(t.id, None)
        return env

    def value(self, node: ast.AST, env: dict) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
            return node.value
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id]
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e, env) for e in node.elts]
        if isinstance(node, ast.Dict):
            return {self.value(k, env): self.value(v, env) for k, v in zip(node.keys, node.values) if k is not None}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, env), self.value(node.right, env)
            if type(left) is type(right) and isinstance(left, (str, list)):
                return left + right
        if isinstance(node, ast.JoinedStr):
            return "".join(self.value(v, env) if isinstance(v, ast.Constant) else self._formatted(v, env)
                           for v in node.values)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str) \
                and len(node.args) == 1 and not node.keywords:
            parts = self.value(node.args[0], env)
            if isinstance(parts, list) and all(isinstance(p, str) for p in parts):
                return node.func.value.value.join(parts)
        raise Unreadable(ast.unparse(node)[:80])

    def _formatted(self, node: ast.FormattedValue, env: dict) -> str:
        v = self.value(node.value, env)
        if node.conversion == ord("r"):
            v = repr(v)
        elif node.conversion in (ord("s"), ord("a")):
            v = str(v) if node.conversion == ord("s") else ascii(v)
        spec = "" if node.format_spec is None else self.value(node.format_spec, env)
        return format(v, spec)

    def env_at(self, call: ast.Call, scopes: list[ast.AST]) -> dict:
        env = self.module
        for scope in scopes:   # the functions around the call, outermost first
            env = self._assign(scope.body, env, until=call.lineno)
        return env


def _calls(tree: ast.AST, scopes: list[ast.AST] | None = None):
    """(load_inline call, the functions around it) for every such call of the file."""
    scopes = scopes or []
    for node in ast.iter_child_nodes(tree):
        inner = scopes + [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else scopes
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name == "load_inline":
                yield node, scopes
        yield from _calls(node, inner)


def _listed(v: Any, what: str) -> list[str]:
    v = [] if v is None else [v] if isinstance(v, str) else v
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise Unreadable(f"{what} is not a string or a list of strings")
    return v


def extensions(source: str) -> list[Extension]:
    """Every load_inline extension of the file, as load_inline would write it. An argument the reader cannot evaluate
    from literals raises Unreadable (the native-code check rejects such a candidate before this runs)."""
    tree = ast.parse(source)
    reader = _Reader(tree)
    out = []
    for call, scopes in _calls(tree):
        env = reader.env_at(call, scopes)
        args = dict(zip(("name", "cpp_sources", "cuda_sources"), call.args))
        args.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
        val = {k: reader.value(v, env) for k, v in args.items()
               if k in ("name", "cpp_sources", "cuda_sources", "functions", "no_implicit_headers",
                        "with_pytorch_error_handling")}
        options = None
        for k in (k for k in args if k in OPTIONS):
            try:
                val[k] = reader.value(args[k], env)
            except Unreadable:
                options = "unreadable"   # compiled with what can be read; never built ahead on a GPU
        out.append(from_args(val, call.lineno, options))
    return out


def from_args(val: dict, line: int = 0, options: str | None = None) -> Extension:
    """The extension load_inline makes of these arguments (its keyword names): main.cpp with torch/extension.h and
    the pybind11 module of `functions`, cuda.cu with its implicit headers, as torch 2.x writes them."""
    name = val.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"\w+", name):
        raise Unreadable(f"load_inline's name is {name!r}, not an identifier")
    cpp, cuda = _listed(val.get("cpp_sources"), "cpp_sources"), _listed(val.get("cuda_sources"), "cuda_sources")
    implicit = not val.get("no_implicit_headers", False)
    functions = val.get("functions")
    functions = [functions] if isinstance(functions, str) else functions
    if isinstance(functions, list):
        functions = {f: f for f in functions}
    if functions is not None and not isinstance(functions, dict):
        raise Unreadable("functions is not a name, a list of names or a dict")
    cpp = (["#include <torch/extension.h>"] if implicit else []) + cpp
    if functions:
        wrap = val.get("with_pytorch_error_handling", True)
        cpp += ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"] + [
            f'm.def("{f}", {"torch::wrap_pybind_function(" + f + ")" if wrap else f}, "{doc}");'
            for f, doc in functions.items()] + ["}"]
    if cuda and implicit:
        cuda = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"] + cuda
    flags = tuple(f.strip() for f in _listed(val.get("extra_cuda_cflags"), "extra_cuda_cflags")
                  if KEPT_FLAGS.match(f.strip()))
    if options is None:   # the options given, a default given or not given the same
        given = {k: val[k] for k in OPTIONS if val.get(k) not in (None, [], (), "") and
                 not (k == "is_python_module" and val[k] is True)}
        options = json.dumps(given, sort_keys=True, default=str)
    return Extension(name, "\n".join(cpp), "\n".join(cuda) if cuda else None, flags, line, options)


