"""What the offline provider's matchers share: `Match` (what a matcher returns), `Unmatched` (the one-line refusal),
and the helpers the matchers of a family's operation use: `adapted_space` (a family's template and search space
with a `ModelNew` of the problem's constructor and forward), `with_helper` (host code pasted before that ModelNew),
`core_ops`, `tensor_input`, `operand` and `LAYOUT` (reading the traced graph), `shape_text` (a summary's shapes).

The dispatch is generators/match.py (`match_problem`), which imports every matcher; the matchers (matched_*.py,
pooling.py, losses.py, cumulative.py) import this module, never match.py, and this module imports none of them.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Callable

import torch

from kernelsearch.families.space import SearchSpace
from kernelsearch.generators.pointwise import DEFAULT_INIT, FLOATS
from kernelsearch.generators.trace import Traced, meta, op_name
from kernelsearch.judge.problem import Case

# the limits of a matched space depend on the problem's shape, not on a case: one stands for all where none is given
ANY_CASE = Case("problem", {}, timed=True)
LLM_HINT = "use an LLM provider (openai, anthropic, openai-compatible)"


class Unmatched(Exception):
    """The offline provider has nothing to search for this problem; the message is one line saying why."""


@dataclass
class Match:
    """What a matcher found for a problem: the kernels' kind, one line saying what, and the space searched."""

    kind: str            # "pointwise", or the family whose template is used
    summary: str         # what was found: "elementwise gelu -> mul on 16x1000 float32", "softmax over dim 1 of ..."
    space: SearchSpace


# -- a family's template around the problem's ModelNew ---------------------------------------------------------------

_ADAPTER = '''


import math  # noqa: E402,F401 - what the reference's constructor may use
import torch.nn as nn  # noqa: E402,F401


class ModelNew(torch.nn.Module):
    # the problem's constructor and forward around the {family} family's kernel ({summary})
{init}

    def forward(self, {args}):
{body}
'''


def adapted_space(family: str, traced: Traced, body: list[str], summary: str, default: dict | None = None,
                  fits: Callable[[dict], bool] | None = None, space_module: str | None = None,
                  case: Case | None = None, family_template: Callable[[dict], str] | None = None,
                  case_limits: bool = False) -> SearchSpace:
    """`family`'s search space whose every kernel ends with a ModelNew of the problem's constructor and forward,
    whose forward is `body` (lines calling the family's public function). The starter is the family's point for
    the problem's shape `case` (its space's `default_for`: a 512-wide softmax row does not start from the 32000-wide
    one's 32 warps), `default` overriding it where given; `fits` drops points that cannot run at the shape."""
    fam = importlib.import_module(f"kernelsearch.families.{space_module or family}.space").SPACE
    adapter = _ADAPTER.format(family=family, summary=summary, init=traced.init_source or DEFAULT_INIT,
                              args=", ".join(traced.forward_args) or "*inputs",
                              body="\n".join("        " + line for line in body))

    render = family_template or fam.template

    def template(p: dict) -> str:
        code = render(p)
        return code.replace("class ModelNew(", "class _FamilyModelNew(", 1).rstrip("\n") + adapter

    start = {**(fam.default_for(case) if case is not None else fam.default), **(default or {})}

    # the family's own limits model reads its own cases' dimensions; here the problem's shape decides (`fits`, or
    # the family's model at the problem's `case` where its dimensions are the family's)
    def limits(p: dict, _case: Case) -> str | None:
        if fits is not None and not fits(p):
            return f"does not fit {summary}"
        return fam.limits(p, case) if case_limits and case is not None else None

    return SearchSpace(params=fam.params, default=start, template=template, moves=fam.moves, tuning=fam.tuning,
                       cases=(ANY_CASE,), limits=limits)


def core_ops(traced: Traced, names: set[str]) -> list:
    """The graph's ops other than getitem and copies; None where one is not in `names`."""
    ops = [n for n in traced.ops if op_name(n) not in ("getitem", "clone", "alias", "detach")]
    return ops if all(op_name(n) in names for n in ops) else None


def tensor_input(traced: Traced, node):
    """The forward argument `node` is, where it is a floating-point tensor; else None."""
    inp = traced.input_of(node) if isinstance(node, torch.fx.Node) else None
    return inp if inp is not None and inp.kind == "tensor" and inp.dtype in FLOATS else None


# the layout ops a matched product reads through (transposes, views, broadcasts)
LAYOUT = {"t", "permute", "transpose", "view", "_unsafe_view", "reshape", "expand"}


def operand(traced: Traced, node) -> tuple[str, object] | None:
    """A matmul operand as host code: a forward argument, transposed or with its leading dims flattened."""
    x = tensor_input(traced, node)
    if x is not None:
        return x.name, x
    if not isinstance(node, torch.fx.Node) or op_name(node) not in LAYOUT:
        return None
    src = operand(traced, node.args[0])
    m, s = meta(node), meta(node.args[0])
    if src is None or m is None or s is None:
        return None
    expr, inp = src
    name = op_name(node)
    if name in ("t", "permute", "transpose") and m.dim() == 2 and s.dim() == 2 and \
            tuple(m.shape) == tuple(reversed(s.shape)):
        return f"{expr}.t()", inp
    if name in ("transpose", "permute") and m.dim() == 3 and s.dim() == 3 and \
            tuple(m.shape) == (s.shape[0], s.shape[2], s.shape[1]):
        return f"{expr}.transpose(1, 2)", inp
    if name in ("view", "reshape", "_unsafe_view") and m.dim() == 2 and s.dim() > 2 and \
            m.shape[1] == s.shape[-1] and m.shape[0] == math.prod(s.shape[:-1]):
        return f"{expr}.reshape(-1, {expr}.shape[-1])", (inp, expr)
    return None


def with_helper(space: SearchSpace, helper: str) -> SearchSpace:
    """`space` with `helper` (host or kernel code) pasted into every kernel just before its ModelNew."""
    inner = space.template

    def template(p: dict) -> str:
        code = inner(p)
        at = code.index("\n\nclass ModelNew(")
        return code[:at] + "\n" + helper.rstrip("\n") + code[at:]

    return SearchSpace(params=space.params, default=space.default, template=template, moves=space.moves,
                       tuning=space.tuning, cases=space.cases, limits=space.limits, shaped=space.shaped)


def shape_text(inp) -> str:
    """A forward input's shape and dtype as a summary reads them: "16x1000 float32"."""
    return "x".join(map(str, inp.shape)) + " " + str(inp.dtype).removeprefix("torch.")
