"""From a model's profile to problems in the one contract, each with its real shapes and dtype.

A module that a built-in family fits as a whole is one unit with every operator that ran inside it: an RMSNorm
(class name ending in RMSNorm, a 1-D weight) is the `rmsnorm` family, an affine nn.LayerNorm `layernorm`, an
nn.Linear (or GPT-2's Conv1D) the `matmul` family on (tokens x in) @ (in x out) with the weight pre-transposed
once. Outside them each operator the model called is its own unit: softmax over the last dimension is the `softmax`
family; matmul, bmm, silu, gelu and tensor-tensor mul/add/div become a generated KernelBench-format problem file
(searched by an LLM provider, or by the offline one where generators/match.py matches it). Units of the same
problem (family or operator, sizes, dtype) in different modules or layers are one problem. Views and operators with
no swap are left in the profile table only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from kernelsearch.model.profile import norm_path

MODULE_FAMILY = {"rmsnorm": "rmsnorm", "layernorm": "layernorm", "linear": "matmul", "conv1d": "matmul"}
# operators a generated problem is made for: each has a swap in verify.py (a torch function it intercepts)
GENERATED_OPS = {"aten::matmul": "torch.matmul(a, b)", "aten::bmm": "torch.bmm(a, b)", "aten::silu": "F.silu(a)",
                 "aten::gelu": "F.gelu(a)", "aten::mul": "torch.mul(a, b)", "aten::add": "torch.add(a, b)",
                 "aten::div": "torch.div(a, b)"}
FLOAT = ("float32", "float16", "bfloat16", "float64")


@dataclass
class Part:
    """One extracted problem."""

    key: str                         # unique in the model run: family-or-op, sizes, dtype
    kind: str                        # family | generated
    family: Optional[str]            # the built-in family, for kind family
    op: str                          # what was extracted: the module kind (rmsnorm, linear, ...) or the aten op
    params: dict                     # the family's sizes, or {"shapes": [...]} of a generated problem
    dtype: str
    calls: float = 0.0               # per forward
    time_ms: float = 0.0             # per forward
    share: float = 0.0
    flops: float = 0.0               # per call
    nbytes: float = 0.0              # per call
    swap: dict = field(default_factory=dict)   # what verify.py needs to put a kernel in its place
    source: Optional[str] = None     # a generated problem's file

    @property
    def spec(self) -> str:
        """The child run's `problem:` (a generated one's is its file, written by the pipeline)."""
        if self.kind == "family":
            dims = ",".join(f"{k}={v}" for k, v in self.params.items())
            return f"{self.family}@{dims},dtype={self.dtype}"
        return f"{self.key}.py"

    @property
    def time_per_call_ms(self) -> float:
        return self.time_ms / self.calls if self.calls else 0.0


def _prod(xs) -> int:
    return int(math.prod(xs)) if xs else 1


def _module_part(path: str, info: dict) -> Optional[Part]:
    kind, shape, dtype = info.get("kind"), info.get("shape"), info.get("dtype")
    if kind not in MODULE_FAMILY or not shape or dtype not in FLOAT:
        return None
    family = MODULE_FAMILY[kind]
    if family in ("rmsnorm", "layernorm"):
        params = {"rows": _prod(shape[:-1]), "cols": info["hidden"]}
        key = f"{family}-{params['rows']}x{params['cols']}-{dtype}"
        swap = {"how": "module", "kind": kind, "eps": info["eps"]}
    else:
        params = {"m": _prod(shape[:-1]), "n": info["n"], "k": info["k"]}
        key = f"matmul-{params['m']}x{params['n']}x{params['k']}-{dtype}"
        swap = {"how": "module", "kind": kind, "bias": info["bias"]}
    return Part(key=key, kind="family", family=family, op=kind, params=params, dtype=dtype, swap=swap)


def _op_part(row: dict) -> Optional[Part]:
    op, shapes, dtypes, scalars = row["op"], row["shapes"], row["dtypes"], row["scalars"]
    tensors = [(s, d) for s, d in zip(shapes, dtypes) if d in FLOAT and s]
    if not tensors:
        return None
    dtype = tensors[0][1]
    x = tensors[0][0]
    swap = {"how": "op", "op": op, "modules": [row["module"]], "shapes": [s for s, _ in tensors],
            "dtypes": [d for _, d in tensors]}
    if op == "aten::softmax":
        dim = scalars[1] if len(scalars) > 1 else None
        half = scalars[2] if len(scalars) > 2 else None
        if dim not in (-1, len(x) - 1) or half not in (None, False):
            return None
        params = {"rows": _prod(x[:-1]), "cols": x[-1]}
        return Part(key=f"softmax-{params['rows']}x{params['cols']}-{dtype}", kind="family", family="softmax",
                    op=op, params=params, dtype=dtype, swap=swap)
    if op not in GENERATED_OPS:
        return None
    arity = 2 if "b)" in GENERATED_OPS[op] else 1
    if len(tensors) != arity or len({d for _, d in tensors}) != 1:
        return None   # a scalar operand (its value is not recorded) or mixed dtypes: not extracted
    if op == "aten::add" and len(scalars) > 2 and scalars[2] not in (None, 1):
        return None
    dims = "_".join("x".join(str(n) for n in s) for s, _ in tensors)
    name = op.removeprefix("aten::")
    key = f"{name}-{dims}-{dtype}"
    part = Part(key=key, kind="generated", family=None, op=op, params={"shapes": [s for s, _ in tensors]},
                dtype=dtype, swap=swap)
    part.source = generated_source(part)
    return part


def generated_source(part: Part) -> str:
    """A KernelBench-format problem file for one operator at its shapes (sizes as literals: its own case only)."""
    shapes = part.params["shapes"]
    names = ["a", "b"][:len(shapes)]
    call = GENERATED_OPS[part.op]
    draws = ", ".join(f"torch.randn({', '.join(str(n) for n in s)}, dtype=torch.{part.dtype})" for s in shapes)
    return (f'"""{part.op} at a model\'s shapes {shapes} ({part.dtype}), extracted by kernelsearch from a profile.\n'
            f'Its module path(s): {", ".join(part.swap.get("modules", []))}."""\n'
            "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F  # noqa: F401\n\n\n"
            "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            f"    def forward(self, {', '.join(names)}):\n        return {call}\n\n\n"
            f"def get_inputs():\n    return [{draws}]\n\n\ndef get_init_inputs():\n    return []\n")


def _counts(part: Part) -> tuple[float, float]:
    """FLOPs and the fewest bytes of one call: a family's own counts at the model's case; for a generated
    operator, its inputs and output once and (matmul) 2 m n k per output batch."""
    if part.kind == "family":
        from kernelsearch.families import family_at

        problem = family_at(part.family, part.params, part.dtype)
        case = problem.timed_case
        return float(problem.flops(case)), float(problem.bytes_moved(case))
    import torch

    size = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}[part.dtype]
    shapes = part.params["shapes"]
    with torch.device("meta"):
        args = [torch.empty(s) for s in shapes]
        out = eval(GENERATED_OPS[part.op], {"torch": torch, "F": torch.nn.functional},   # noqa: S307 - our table
                   dict(zip("ab", args)))
    nbytes = (sum(_prod(s) for s in shapes) + out.numel()) * size
    if part.op in ("aten::matmul", "aten::bmm"):
        return 2.0 * out.numel() * shapes[0][-1], float(nbytes)
    return float(out.numel()) * (4 if part.op in ("aten::silu", "aten::gelu") else 1), float(nbytes)


def extract(profile: dict) -> list[Part]:
    """Every problem the profile holds, merged by key, largest share first."""
    modules: dict[str, dict] = profile["modules"]
    unit_paths: dict[str, list[str]] = {}            # normalised unit path -> its raw paths
    unit_part: dict[str, Part] = {}                 # raw path -> its part (per raw path: layers may differ)
    for path, info in modules.items():
        part = _module_part(path, info)
        if part is not None:
            unit_paths.setdefault(norm_path(path), []).append(path)
            unit_part[path] = part
    parts: dict[str, Part] = {}

    def merge(part: Part, calls: float, time_ms: float, share: float, where: list[str]) -> None:
        have = parts.setdefault(part.key, part)
        have.calls += calls
        have.time_ms += time_ms
        have.share += share
        key = "paths" if have.swap["how"] == "module" else "modules"
        for w in where:
            if w not in have.swap.setdefault(key, []):
                have.swap[key].append(w)

    for row in profile["rows"]:
        owner = _owner(row["module"], unit_paths)
        if owner is not None:
            raws = unit_paths[owner]
            by_key: dict[str, list[str]] = {}
            for raw in raws:
                by_key.setdefault(unit_part[raw].key, []).append(raw)
            for key, paths in by_key.items():   # a row of several layers is split by their count
                frac = len(paths) / len(raws)
                part = Part(**{**unit_part[paths[0]].__dict__, "swap": dict(unit_part[paths[0]].swap)})
                merge(part, 0.0, row["time_ms"] * frac, row["share"] * frac, paths)
            continue
        part = _op_part(row)
        if part is not None:
            merge(part, row["calls"], row["time_ms"], row["share"], [row["module"]])
    # a module unit's calls: how often the module ran, not how many operators it called
    for part in parts.values():
        if part.swap["how"] == "module":
            part.calls = float(len(part.swap["paths"]))
        part.flops, part.nbytes = _counts(part)
    return sorted(parts.values(), key=lambda p: -p.share)


def _owner(module: str, unit_paths: dict[str, list[str]]) -> Optional[str]:
    """The innermost unit module `module` lies in (itself or an ancestor), if any."""
    pieces = module.split(".")
    for n in range(len(pieces), 0, -1):
        prefix = ".".join(pieces[:n])
        if prefix in unit_paths:
            return prefix
    return None


def safe_key(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def describe(part: Part) -> str:
    if part.kind == "family":
        return f"{part.family} {','.join(f'{k}={v}' for k, v in part.params.items())} {part.dtype}"
    return f"{part.op} {' x '.join(str(tuple(s)) for s in part.params['shapes'])} {part.dtype}"


def as_dict(part: Part) -> dict[str, Any]:
    return dict(part.__dict__)
