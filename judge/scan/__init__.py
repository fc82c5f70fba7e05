"""The scan of what a candidate's host code reaches (issue 18), run by the judge on the source as text before any
process loads it: `scan_source`, which rejects a candidate whose host code computes with torch (or reaches past
what a scan can follow) and notes the torch operations a config allowed and the low-precision casts.

The scan resolves what each name and attribute in host code is bound to, from every binding of it in the file, and
applies its rules to what it finds:

  kinds.py        the kinds of value a name or an expression resolves to (`Kind`)
  torch_paths.py  what a path in torch is: a module, a class, a function that allocates or one that computes
  allowance.py    the torch operations a config may allow (ALLOWABLE_TORCH), matched by identity
  bindings.py     what the file binds each name to (one pass over its statements)
  infer.py        the kinds of the names and expressions of host code, worked out from the bindings
  rules.py        the checks, each named in the reason (torch compute, getattr, dynamic code, introspection, torch
                  override)

`scan_source` adds the fallback check (an except handler that computes with torch or calls the reference) and picks
the reason: when several rules fire, the most specific check (override, introspection, dynamic code, getattr, then
torch compute), at its first line.

What the scan does not claim: it reads one file; anything reached by a route it cannot resolve is either one of the
routes rejected by the rules or an unknown value, whose tensor-op methods are rejected by name. Not caught: operators
on values it cannot tell are tensors (the parameter of a lambda or of a helper that no call in the file feeds a
tensor, as in map or functools.reduce); plain-Python compute on the values of x.tolist(); and what the process does
outside torch (its files, descriptors, other processes: the judge's process boundary and the sandbox stand there).
The kernel-launch check and the judge's comparison stand behind it.
"""
from __future__ import annotations

import ast

from kernelsearch.judge.scan.allowance import ALLOWABLE_TORCH, Allowance
from kernelsearch.judge.scan.infer import Inference
from kernelsearch.judge.scan.rules import Rules
from kernelsearch.judge.status import CandidateFailure, Status

__all__ = ["ALLOWABLE_TORCH", "LOW_PRECISION", "scan_source"]

# the most specific reason first: what makes the rest of the file unreadable to a scan, then torch compute
PRIORITY = ["torch-override check", "introspection check", "dynamic-code check", "import check", "getattr check",
            "native-code check", "torch-compute check"]
LOW_PRECISION = ("float16", "half", "bfloat16", "float8", "tf32", "allow_tf32")


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    end = getattr(outer, "end_lineno", outer.lineno)
    return outer.lineno <= getattr(node, "lineno", -1) <= end


def scan_source(source: str, language: str | None = "triton", allow=()) -> dict:
    """Static anti-cheat scan of the host code (the rules of rules.py), for Triton and CUDA C++ candidates alike (a
    load_inline extension's functions are the candidate's own; `language` is kept for callers). `allow` names the
    torch operations the config allows (ALLOWABLE_TORCH; none by default). Raises CandidateFailure(rejected) naming
    the check and the line; returns notes for the result's detail: `torch_ops`, the allowed operations the host code
    calls (sorted; empty when none), and low-precision casts, for the precision check."""
    tree = ast.parse(source)
    allowance = Allowance(allow)
    infer = Inference(tree)
    rules = Rules(infer, allowance)
    found = sorted(rules.findings(), key=lambda f: f.lineno)
    for handler in rules.except_handlers():
        for sub in ast.walk(handler):
            called = ast.unparse(sub.func) if isinstance(sub, ast.Call) else ""
            if called in ("Model", "super().forward") or (called.endswith("Model") and called != "ModelNew"):
                raise CandidateFailure(Status.rejected, f"fallback check: an except handler (line {handler.lineno}) "
                                       f"computes with torch or the reference ({called}) instead of the kernel",
                                       stage="static")
        for f in found:
            if f.check == "torch-compute check" and _inside(f.node, handler):
                raise CandidateFailure(Status.rejected, f"fallback check: an except handler (line {handler.lineno}) "
                                       f"computes with torch or the reference (line {f.lineno}: {f.what}) instead "
                                       "of the kernel", stage="static")
    if found:
        f = min(found, key=lambda f: (PRIORITY.index(f.check), f.lineno))
        why = f"{f.check}: line {f.lineno} {f.what}"
        if f.check == "torch-compute check" and allowance.names:
            why += f" (this problem allows only: {', '.join(allowance.names)})"
        raise CandidateFailure(Status.rejected, why, stage="static")
    notes: dict = {"torch_ops": sorted(allowance.used, key=list(ALLOWABLE_TORCH).index)}
    casts = set()
    for node in infer.bindings.nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("half", "bfloat16"):
                casts.add(ast.unparse(node)[:60])
            elif node.func.attr in ("to", "cast", "astype") and any(
                    w in ast.unparse(a) for a in node.args for w in LOW_PRECISION):
                casts.add(ast.unparse(node)[:60])
    if casts:
        notes["low_precision_casts"] = sorted(casts)
    return notes
