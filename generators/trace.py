"""The reference of a problem as a graph of ATen operations, traced without drawing its inputs.

The model is built on the meta device and traced with make_fx at the problem's own inputs as the meta device gives
them (problem.probe_inputs: shapes and dtypes, no memory; a level-1 file's inputs are gigabytes). Its parameters
and buffers enter as named placeholders (torch.func.functional_call), so a graph names `ln.weight`, not a copy.
A number that forward receives (`A * s`) is traced as a 0-dim float64 tensor, so it stays an input of the graph
rather than a constant baked in; where that cannot trace (forward branches on it) it is traced as the number.

What it gives the matchers (generators/match.py, generators/pointwise.py): the nodes in order, each input's kind
(a forward argument, tensor or number, or a parameter with its name) and the output.
"""
from __future__ import annotations

import ast
import operator
import textwrap
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelsearch.judge.problem import Problem, describe_exception, probe_inputs


class TraceError(Exception):
    """The reference cannot be traced into a graph (data-dependent control flow, an op the meta device lacks)."""


@dataclass
class Input:
    node: Any                # the fx placeholder
    kind: str                # "tensor" | "number" (forward's arguments) | "param" (a parameter or buffer)
    index: int               # position among forward's arguments; for a param, -1
    name: str                # forward's parameter name, or the parameter's qualified name (ln.weight)
    shape: tuple[int, ...] = ()
    dtype: torch.dtype | None = None
    value: Any = None        # a number's value in the problem's own inputs


@dataclass
class Traced:
    graph: torch.fx.Graph
    inputs: list[Input]
    ops: list[Any]                    # the call_function nodes, in order
    output: Any                       # the one node the graph returns
    forward_args: list[str]           # forward's parameter names, in order (for the candidate's forward)
    init_source: str | None = None    # the reference Model's __init__, made a candidate's (see candidate_init)
    by_node: dict = field(default_factory=dict)
    reference_source: str | None = None   # the reference file's text (a matcher may read its constructor's calls)
    problem: Any = None                   # the Problem traced (a matcher may run its reference at a small case)

    def input_of(self, node) -> Input | None:
        return self.by_node.get(node)

    def op_names(self) -> list[str]:
        """The ops found, by their ATen names, in order and without repeats: what a refusal names."""
        out: list[str] = []
        for n in self.ops:
            name = op_name(n)
            if name not in ("getitem", "detach", "alias", "clone") and name not in out:
                out.append(name)
        return out


def op_name(node) -> str:
    """`relu`, `mm`, `_softmax`: an ATen overload's packet name; `getitem` for operator.getitem."""
    t = node.target
    if t is operator.getitem:
        return "getitem"
    packet = getattr(t, "overloadpacket", None)
    return getattr(packet, "__name__", None) or getattr(t, "__name__", str(t))


def schema_args(node) -> dict[str, Any]:
    """The node's arguments by their schema names, defaults filled in (leaky_relu's negative_slope = 0.01 where the
    call left it out)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {f"arg{i}": a for i, a in enumerate(node.args)}
    out: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            out[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
    return out


def trace_problem(problem: Problem) -> Traced:
    """The problem's reference as an ATen graph at its own inputs (on the meta device); TraceError if it cannot."""
    module = problem.module
    where = f"problem {problem.name!r}"
    sample = probe_inputs(module, where)
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
    except Exception as err:   # noqa: BLE001 - a reference the meta device cannot build is not traced
        raise TraceError(f"building Model on the meta device raised {describe_exception(err)}") from None
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    metas = [v if not isinstance(v, torch.Tensor) else v.to("meta") for v in sample]
    from torch.fx.experimental.proxy_tensor import make_fx

    def run(state, *args):
        return torch.func.functional_call(model, state, args)

    as_tensors = [torch.empty((), dtype=torch.float64, device="meta") if _is_number(v) else v for v in metas]
    gm = None
    for attempt in (as_tensors, metas):
        try:
            gm = make_fx(run, tracing_mode="fake")(state, *attempt)
            numbers_traced = attempt is as_tensors
            break
        except Exception as err:   # noqa: BLE001 - tried again with numbers as constants, then refused
            last = err
    if gm is None:
        raise TraceError(f"tracing the reference raised {describe_exception(last)}")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = list(state)
    if len(placeholders) != len(names) + len(metas):
        raise TraceError("the traced graph's inputs do not match the reference's (a nested input?)")
    fwd = forward_arg_names(problem.reference_source, len(metas))
    inputs: list[Input] = []
    for i, node in enumerate(placeholders):
        if i < len(names):
            t = state[names[i]]
            inputs.append(Input(node, "param", -1, names[i], tuple(t.shape), t.dtype))
            continue
        j = i - len(names)
        v = metas[j]
        if isinstance(v, torch.Tensor):
            inputs.append(Input(node, "tensor", j, fwd[j], tuple(v.shape), v.dtype))
        else:
            inputs.append(Input(node, "number" if numbers_traced and _is_number(v) else "constant", j, fwd[j],
                                value=v))
    outs = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    if len(outs) != 1 or not isinstance(outs[0], torch.fx.Node):
        raise TraceError(f"the reference returns {len(outs)} values; one tensor is matched")
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    traced = Traced(gm.graph, inputs, ops, outs[0], fwd, candidate_init(problem.reference_source))
    traced.by_node = {i.node: i for i in inputs}
    traced.reference_source = problem.reference_source
    traced.problem = problem
    return traced


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def meta(node) -> torch.Tensor | None:
    """The fake tensor a node produced (its shape and dtype), or None."""
    v = node.meta.get("val") if hasattr(node, "meta") else None
    return v if isinstance(v, torch.Tensor) else None


# -- the candidate's constructor and forward, from the reference's source ------------------------------------------

def _model_class(source: str) -> ast.ClassDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)


def _method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def forward_arg_names(source: str, n: int) -> list[str]:
    """forward's parameter names after self (x, A, s), as many as the inputs; `input{i}` where they are not named."""
    fn = _method(_model_class(source), "forward")
    names = [a.arg for a in fn.args.args[1:]] if fn is not None and not fn.args.vararg else []
    return [names[i] if i < len(names) else f"input{i}" for i in range(n)]


# torch.nn classes a candidate may hold (they carry weights the judge loads into it); any other nn module
# instantiated in the reference's __init__ (nn.ReLU, nn.Softmax) computes and is left out of the candidate's
_HOLDERS = {"Linear", "Bilinear", "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
            "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Embedding", "Parameter", "Buffer",
            "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Module",
            "ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict", "Identity"}


def candidate_init(source: str) -> str | None:
    """The reference Model's __init__ as a candidate's: the same signature and statements (so the same parameters
    under the same names, which the judge loads the reference's weights into), with `super().__init__()` for any
    spelling of it and without the statements that instantiate torch.nn modules that compute (nn.ReLU()), which a
    candidate may not hold. None where the class or its __init__ is not found."""
    fn = _method(_model_class(source), "__init__")
    if fn is None:
        return None

    class _Strip(ast.NodeTransformer):
        def visit_Call(self, node):   # super(Model, self) -> super()
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "super":
                node.args = []
            return node

    def computes(stmt) -> bool:
        value = getattr(stmt, "value", None)
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)) or not isinstance(value, ast.Call):
            return False
        f = value.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        base = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
        return name not in _HOLDERS and base in ("nn", "torch.nn") and name[:1].isupper()

    fn = _Strip().visit(ast.parse(ast.unparse(fn)).body[0])
    fn.body = [s for s in fn.body if not computes(s)] or [ast.Pass()]
    fn.body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] or \
        [ast.parse("super().__init__()").body[0]]
    fn.decorator_list = []
    return textwrap.indent(ast.unparse(fn), "    ")
