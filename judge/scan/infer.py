"""What a name or an expression in a candidate's host code holds (`Inference.kinds`), worked out from every binding
of the names in it (bindings.py): a path in torch, a tensor, the candidate's own class or function, a plain value, a
container of these, or unknown. Each node's and each binding's kinds are worked out once; a circle of bindings (a
name bound from itself) reads as unknown where it closes.
"""
from __future__ import annotations

import ast
import builtins

from kernelsearch.judge.scan.bindings import (
    AugExpr,
    Binding,
    Bindings,
    Expr,
    Fixed,
    Imported,
    Iter,
    Param,
    Scope,
    Unpack,
)
from kernelsearch.judge.scan.kinds import EXT, KERNEL, PLAIN, TENSOR, UNKNOWN, Kind, Tag
from kernelsearch.judge.scan.torch_paths import TENSOR_PLAIN_ATTRS, TENSOR_PLAIN_RESULTS, classify

KERNEL_DECORATORS = ("jit", "autotune", "heuristics")
# what a name holds that the file never binds: the usual aliases of a kernel file
DEFAULT_BINDINGS = {"torch": Kind(Tag.TORCH, "torch"), "F": Kind(Tag.TORCH, "torch.nn.functional"),
                    "nn": Kind(Tag.TORCH, "torch.nn"), "tl": Kind(Tag.MOD, "triton.language"),
                    "triton": Kind(Tag.MOD, "triton")}
# builtins whose result is a plain value whatever they are given (type(x) is not: type(x).softmax is torch's)
PLAIN_BUILTINS = frozenset({
    "len", "int", "float", "bool", "str", "dict", "range", "isinstance", "issubclass", "hasattr", "repr", "format",
    "print", "id", "hash", "callable", "divmod", "round", "min", "max", "sum", "abs", "all", "any", "ord", "chr", "hex",
    "bin", "object", "super", "slice", "property", "staticmethod", "classmethod", "open"})
CONTAINER_BUILTINS = frozenset({"list", "tuple", "set", "frozenset", "sorted", "reversed", "iter", "enumerate", "zip",
                                "filter", "next"})
# builtins that compute with what they are given: of tensors, torch compute
REDUCING_BUILTINS = frozenset({"sum", "max", "min", "abs", "pow", "round", "divmod", "sorted", "map", "filter"})


class Inference:
    """The kinds of the names and expressions of one file; collects its bindings first."""

    def __init__(self, tree: ast.Module):
        self.bindings = Bindings(tree, self.is_kernel)
        self.call_args: dict[str, list] = {}          # qualname -> [(call, scope, offset)], indexed when first needed
        self.returns: dict[str, frozenset] = {}       # qualname -> the kinds of what it returns
        self._node_kinds: dict[ast.AST, frozenset] = {}
        self._binding_kinds: dict[Binding, frozenset] = {}
        self._busy: set[object] = set()               # the nodes and bindings being worked out
        self.bindings.collect()

    def is_kernel(self, fn: ast.AST, scope: Scope) -> bool:
        """A function decorated with triton.jit, triton.autotune or triton.heuristics (resolved, not by name)."""
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            for k in self.kinds(target, scope):
                if k.tag is Tag.MOD and k.name.startswith("triton") and \
                        k.name.rsplit(".", 1)[-1] in KERNEL_DECORATORS:
                    return True
        return False

    def lookup(self, name: str, scope: Scope) -> frozenset:
        s = scope
        while s is not None:
            if name in s.bindings and not s.class_scope:
                out: set = set()
                for b in s.bindings[name]:
                    out |= self.binding_kinds(b)
                return frozenset(out)
            s = s.parent
        if name in DEFAULT_BINDINGS:
            return frozenset({DEFAULT_BINDINGS[name]})
        if hasattr(builtins, name):
            return frozenset({Kind(Tag.BUILTIN, name)})
        return frozenset({UNKNOWN})

    def binding_kinds(self, b: Binding) -> frozenset:
        if b in self._binding_kinds:
            return self._binding_kinds[b]
        if b in self._busy:
            return frozenset({UNKNOWN})
        self._busy.add(b)
        try:
            out = self._work_out_binding(b)
        finally:
            self._busy.discard(b)
        self._binding_kinds[b] = out
        return out

    def _work_out_binding(self, b: Binding) -> frozenset:
        if isinstance(b, Fixed):
            return frozenset({b.kind})
        if isinstance(b, Expr):
            return self.kinds(b.node, b.scope)
        if isinstance(b, AugExpr):
            return self._binop_kinds(self.kinds(b.stmt.target, b.scope), self.kinds(b.stmt.value, b.scope))
        if isinstance(b, Iter):
            return self._element_kinds(self.kinds(b.node, b.scope))
        if isinstance(b, Unpack):
            inner, idx = b.inner, b.index
            if isinstance(inner, Expr) and isinstance(inner.node, (ast.Tuple, ast.List)) and idx is not None \
                    and idx < len(inner.node.elts) and not any(isinstance(e, ast.Starred) for e in inner.node.elts):
                return self.kinds(inner.node.elts[idx], inner.scope)
            return self._element_kinds(self.binding_kinds(inner))
        if isinstance(b, Imported):
            st, alias = b.stmt, b.alias
            if isinstance(st, ast.Import):
                path = alias.name if alias.asname else alias.name.split(".")[0]
            elif st.level:
                return frozenset({UNKNOWN})
            else:
                path = f"{st.module}.{alias.name}"
            return frozenset({Kind(Tag.TORCH if path.split(".")[0] == "torch" else Tag.MOD, path)})
        if isinstance(b, Param):
            return self._param_kinds(b.qual, b.index, b.name)
        return frozenset({UNKNOWN})

    def _param_kinds(self, qual: str, index: int | None, name: str) -> frozenset:
        """What the calls in the file pass for a parameter (a tensor for forward's, by contract)."""
        fn, _ = self.bindings.functions[qual]
        out: set = set()
        if fn.name == "forward":
            out.add(TENSOR)   # the contract: forward is called with the problem's inputs
        sites = self.call_args.get(qual)
        if sites is None:
            self._index_calls()
            sites = self.call_args.get(qual, [])
        for call, scope, offset in sites:
            arg = None
            if index is not None and 0 <= index - offset < len(call.args):
                arg = call.args[index - offset]
                if isinstance(arg, ast.Starred):
                    arg = None
            for kw in call.keywords:
                if kw.arg == name:
                    arg = kw.value
            if arg is not None:
                out |= self.kinds(arg, scope)
        return frozenset(out or {UNKNOWN})

    def _index_calls(self) -> None:
        """Every call of the candidate's own functions and classes, by the function it reaches (`offset`: the
        arguments start at its second parameter, after self)."""
        b = self.bindings
        for qual in b.functions:
            self.call_args.setdefault(qual, [])
        for node in b.nodes:
            if isinstance(node, ast.Call):
                scope = b.scope_of.get(node)
                if scope is None:
                    continue
                for k in self.kinds(node.func, scope):
                    if k.tag is Tag.OWNFUNC and k.name in b.functions:
                        offset = 1 if isinstance(node.func, ast.Attribute) and "." in k.name and \
                            k.name.split(".")[0] in b.classes else 0
                        self.call_args[k.name].append((node, scope, offset))
                    elif k.tag is Tag.OWNCLASS and f"{k.name}.__init__" in b.functions:
                        self.call_args[f"{k.name}.__init__"].append((node, scope, 1))

    def kinds(self, node: ast.AST, scope: Scope) -> frozenset:
        """The kinds of what `node` holds, its names looked up from `scope`."""
        if node in self._node_kinds:
            return self._node_kinds[node]
        if node in self._busy:
            return frozenset({UNKNOWN})
        self._busy.add(node)
        try:
            out = self._work_out(node, scope)
        finally:
            self._busy.discard(node)
        self._node_kinds[node] = out
        return out

    def _work_out(self, node: ast.AST, scope: Scope) -> frozenset:
        if isinstance(node, ast.Name):
            return self.lookup(node.id, scope)
        if isinstance(node, ast.Attribute):
            return self.attr_kinds(self.kinds(node.value, scope), node.attr)
        if isinstance(node, ast.Call):
            return self._call_kinds(node, scope)
        if isinstance(node, (ast.Constant, ast.JoinedStr)):
            return frozenset({PLAIN})
        if isinstance(node, ast.Dict):
            inner = frozenset().union(*(self.kinds(v, scope) for v in node.values)) if node.values else frozenset()
            return frozenset({Kind(Tag.SEQ, elems=inner or frozenset({PLAIN}))})
        if isinstance(node, ast.DictComp):
            return frozenset({Kind(Tag.SEQ, elems=self.kinds(node.value, scope))})
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            inner = frozenset().union(*(self.kinds(e.value if isinstance(e, ast.Starred) else e, scope)
                                        for e in node.elts)) if node.elts else frozenset({PLAIN})
            return frozenset({Kind(Tag.SEQ, elems=inner)})
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return frozenset({Kind(Tag.SEQ, elems=self.kinds(node.elt, scope))})
        if isinstance(node, ast.Lambda):
            return frozenset({Kind(Tag.OWNFUNC, "<lambda>")})
        if isinstance(node, ast.IfExp):
            return self.kinds(node.body, scope) | self.kinds(node.orelse, scope)
        if isinstance(node, ast.BoolOp):
            return frozenset().union(*(self.kinds(v, scope) for v in node.values))
        if isinstance(node, ast.NamedExpr):
            return self.kinds(node.value, scope)
        if isinstance(node, ast.Subscript):
            return self._subscript_kinds(self.kinds(node.value, scope))
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                return frozenset({TENSOR})   # only tensors multiply so (an allowed matmul's result is a tensor)
            return self._binop_kinds(self.kinds(node.left, scope), self.kinds(node.right, scope))
        if isinstance(node, ast.UnaryOp):
            return frozenset({PLAIN}) if isinstance(node.op, ast.Not) else self.kinds(node.operand, scope)
        if isinstance(node, ast.Compare):
            return self._binop_kinds(self.kinds(node.left, scope),
                                     frozenset().union(*(self.kinds(c, scope) for c in node.comparators)))
        if isinstance(node, ast.Starred):
            return self.kinds(node.value, scope)
        return frozenset({UNKNOWN})

    @staticmethod
    def _subscript_kinds(base: frozenset) -> frozenset:
        out = set()
        for k in base:
            if k.tag in (Tag.TENSOR, Tag.TATTR, Tag.UNKNOWN):
                out.add(TENSOR if k == TENSOR else UNKNOWN)
            elif k.tag is Tag.SEQ:
                out |= k.elems
            elif k.tag is Tag.TOBJ and classify(k.name) == "nn-holder":
                out.add(Kind(Tag.TOBJ, "torch.nn.Module"))
            elif k.tag is Tag.PLAIN:
                out.add(PLAIN)
            elif k.tag is Tag.KERNEL:
                out.add(KERNEL)
            else:
                out.add(UNKNOWN)
        return frozenset(out or {UNKNOWN})

    @staticmethod
    def _binop_kinds(a: frozenset, b: frozenset) -> frozenset:
        both = a | b
        if any(k.tensorish for k in both):
            return frozenset({TENSOR})
        if all(k.tag in (Tag.PLAIN, Tag.MOD, Tag.BUILTIN) for k in both):
            return frozenset({PLAIN})
        if any(k.tag is Tag.SEQ for k in both) and all(k.tag in (Tag.SEQ, Tag.PLAIN) for k in both):
            return frozenset({Kind(Tag.SEQ, elems=frozenset().union(*(k.elems for k in both if k.tag is Tag.SEQ)))})
        return frozenset({UNKNOWN})

    @staticmethod
    def _element_kinds(kinds: frozenset) -> frozenset:
        """The kinds of an element of a value of these kinds (iterated, unpacked)."""
        out: set = set()
        for k in kinds:
            if k.tag is Tag.SEQ:
                out |= k.elems
            elif k.tag is Tag.TOBJ and classify(k.name) == "nn-holder":
                out.add(Kind(Tag.TOBJ, "torch.nn.Module"))
            elif k.tensorish:
                out.add(TENSOR)
            elif k.tag is Tag.PLAIN:
                out.add(PLAIN)
            else:
                out.add(UNKNOWN)
        return frozenset(out or {UNKNOWN})

    def attr_kinds(self, base: frozenset, attr: str) -> frozenset:
        """The kinds of `x.attr` for x of kinds `base`."""
        out: set = set()
        for k in base:
            tag = k.tag
            if tag is Tag.TORCH:
                out.add(Kind(Tag.TORCH, f"{k.name}.{attr}"))
            elif tag is Tag.MOD:
                out.add(Kind(Tag.MOD, f"{k.name}.{attr}"))
            elif tag is Tag.TOBJ:
                out.add(Kind(Tag.TATTR, k.name, attr))
            elif tag in (Tag.OWN, Tag.OWNCLASS):
                out |= self._own_attr(k.name, attr)
            elif tag in (Tag.EXT, Tag.KERNEL, Tag.OWNFUNC, Tag.BUILTIN):
                out.add(k if tag is Tag.EXT else PLAIN)
            elif tag is Tag.PLAIN:
                out.add(PLAIN)
            elif attr in TENSOR_PLAIN_ATTRS:
                out.add(PLAIN)
            elif attr in ("T", "mT", "H", "mH", "data", "real", "imag", "grad"):
                out.add(TENSOR)
            else:
                out.add(UNKNOWN)
        return frozenset(out or {UNKNOWN})

    def _own_attr(self, cls: str, attr: str, seen: frozenset = frozenset()) -> frozenset:
        """An attribute of the candidate's own class `cls` (or of its instance): a method, what any binding of it
        holds, else what its bases give."""
        b = self.bindings
        if cls in seen or cls not in b.classes:
            return frozenset({UNKNOWN})
        if attr in b.methods.get(cls, ()):
            return frozenset({Kind(Tag.OWNFUNC, f"{cls}.{attr}")})
        if attr in b.class_attrs.get(cls, {}):
            out: set = set()
            for binding in b.class_attrs[cls][attr]:
                out |= self.binding_kinds(binding)
            return frozenset(out)
        out = set()
        scope = b.scope_of.get(b.classes[cls].bases[0]) if b.classes[cls].bases else None
        for base in b.classes[cls].bases:
            for k in self.kinds(base, scope or b.module):
                if k.tag is Tag.OWNCLASS:
                    out |= self._own_attr(k.name, attr, seen | {cls})
                elif k.tag is Tag.TORCH:
                    out.add(Kind(Tag.TATTR, k.name, attr))
        return frozenset(out or {UNKNOWN})

    def _call_kinds(self, call: ast.Call, scope: Scope) -> frozenset:
        """What a call returns."""
        func = call.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(call.args) >= 2 \
                and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str):
            return self.attr_kinds(self.kinds(call.args[0], scope), call.args[1].value)
        out: set = set()
        for k in self.kinds(func, scope):
            tag = k.tag
            if tag is Tag.TORCH:
                cls = classify(k.name)
                if k.name.endswith(("load_inline", "cpp_extension.load")):
                    out.add(EXT)
                elif cls in ("nn-holder", "nn-compute", "class-ok", "class-bad"):
                    out.add(TENSOR if k.name in ("torch.nn.Parameter", "torch.nn.Buffer", "torch.Tensor")
                            else Kind(Tag.TOBJ, k.name))
                elif cls in ("func-ok", "compute"):
                    out.add(PLAIN if k.name.rsplit(".", 1)[-1] in ("is_tensor", "is_floating_point", "numel",
                                                                   "is_complex", "get_default_dtype") else TENSOR)
                else:
                    out.add(UNKNOWN)
            elif tag is Tag.OWNCLASS:
                out.add(Kind(Tag.OWN, k.name) if not self.tensorish(k.name) else TENSOR)
            elif tag is Tag.OWNFUNC:
                out |= self._returns(k.name)
            elif tag is Tag.BUILTIN:
                if k.name in CONTAINER_BUILTINS:   # list(x), zip(a, b), next(it): what the arguments hold
                    elems = frozenset().union(*(self._element_kinds(self.kinds(a.value if isinstance(
                        a, ast.Starred) else a, scope)) for a in call.args)) if call.args else frozenset({PLAIN})
                    out.add(Kind(Tag.SEQ, elems=elems) if k.name != "next" else UNKNOWN)
                    if k.name == "next":
                        out |= elems
                elif k.name in PLAIN_BUILTINS and k.name not in REDUCING_BUILTINS:
                    out.add(PLAIN)
                else:
                    out.add(UNKNOWN)
            elif tag is Tag.TATTR:
                out.add(PLAIN if k.attr in TENSOR_PLAIN_RESULTS else TENSOR)
            elif tag is Tag.MOD:
                out.add(PLAIN if k.name.split(".")[0] in ("math", "os", "triton", "sys", "time") else UNKNOWN)
            elif tag is Tag.TOBJ and classify(k.name) in ("nn-holder", "nn-compute"):
                out.add(TENSOR)   # a module's forward returns tensors: arithmetic on them is host compute
            else:
                out.add(UNKNOWN)
        if isinstance(func, ast.Attribute):
            recv = self.kinds(func.value, scope)
            if any(k == TENSOR for k in recv):
                out.discard(UNKNOWN)
                out.add(PLAIN if func.attr in TENSOR_PLAIN_RESULTS else TENSOR)
        return frozenset(out or {UNKNOWN})

    def tensorish(self, cls: str, seen: frozenset = frozenset()) -> bool:
        """An own class deriving from torch.Tensor: its instances are tensors."""
        b = self.bindings
        node = b.classes.get(cls)
        if node is None or cls in seen:
            return False
        scope = b.scope_of.get(node.bases[0]) if node.bases else None
        for base in node.bases:
            for k in self.kinds(base, scope or b.module):
                if k.tag is Tag.TORCH and k.name in ("torch.Tensor", "torch.nn.Parameter"):
                    return True
                if k.tag is Tag.OWNCLASS and self.tensorish(k.name, seen | {cls}):
                    return True
        return False

    def _returns(self, qual: str) -> frozenset:
        """What the candidate's own function returns (plain when it returns nothing)."""
        b = self.bindings
        if qual not in b.functions:
            return frozenset({UNKNOWN})
        if qual in self.returns:
            return self.returns[qual]
        self.returns[qual] = frozenset({UNKNOWN})   # while it is being worked out (recursion)
        fn, scope = b.functions[qual]
        out: set = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None and b.scope_of.get(node.value) is scope:
                out |= self.kinds(node.value, scope)
        self.returns[qual] = frozenset(out or {PLAIN})
        return self.returns[qual]
