"""Static checks, the cheapest stage: the source parses, defines ModelNew, and carries a kernel of its own
(`check_source`); and the scan of what its host code reaches (`scan_source`, rules below), run by the judge on the
source as text before any process loads it."""
from __future__ import annotations

import ast

from kernelsearch.judge.status import CandidateFailure, Status


def kernel_language(tree: ast.AST) -> str | None:
    """'triton' if a function is decorated with triton.jit / triton.autotune, 'cuda' for load_inline."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = ast.unparse(target)
                if name.endswith(("jit", "autotune", "heuristics")) and "triton" in name or name == "jit":
                    return "triton"
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(("load_inline", "cpp_extension.load")):
            return "cuda"
    return None


MAX_SOURCE_BYTES = 1 << 20   # 1 MB: a kernel file is a few KB (the largest starter, flash_attention, is 9 KB)


def check_size(source: str) -> None:
    """Refuse a source that is not text, holds a NUL byte, or is over MAX_SOURCE_BYTES (UTF-8), before it is
    parsed, stored or sent to a worker."""
    if not isinstance(source, str):
        raise CandidateFailure(Status.compile_error, f"source is {type(source).__name__}, not text",
                               stage="static")
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        raise CandidateFailure(Status.rejected, f"source is {size} bytes, over the 1 MB cap "
                               f"({MAX_SOURCE_BYTES} bytes)", stage="static")
    if "\x00" in source:
        raise CandidateFailure(Status.compile_error, "source contains a NUL byte", stage="static")


def check_source(source: str) -> str:
    """Return the kernel language, or raise CandidateFailure naming what is wrong."""
    check_size(source)
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise CandidateFailure(Status.compile_error, f"syntax error: line {err.lineno}: {err.msg}",
                               stage="static") from None
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        raise CandidateFailure(Status.compile_error, "the candidate defines no class ModelNew", stage="static")
    lang = kernel_language(tree)
    if lang is None:
        raise CandidateFailure(Status.rejected, "no kernel of its own: no @triton.jit function and no "
                               "load_inline CUDA source", stage="static")
    return lang


from kernelsearch.judge.scan import LOW_PRECISION, scan_source  # noqa: E402,F401 - the scan's home is the scan/ package
