"""What a candidate's file binds each name to, collected in one pass over its statements (`Bindings.collect`): the
scopes (module, class bodies, functions) and the bindings of each name in them (imports, assignments, parameters,
loop targets, `self.x = ...` in any method of a class), the classes with their attributes and methods, the functions
and the Triton kernels, and for each node its parent and the scope its names are looked up in.

A binding says how to work out what the name holds (an expression, an import, a parameter, a loop over something);
the inference (infer.py) works it out when asked.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Union

from kernelsearch.judge.scan.kinds import KERNEL, PLAIN, UNKNOWN, Kind, Tag

# A binding is kept by identity (eq=False): the inference remembers what each one holds.


@dataclass(frozen=True, eq=False)
class Fixed:
    """A name whose kind is known when it is bound (a def, a class, `self`, `*args`)."""
    kind: Kind


@dataclass(frozen=True, eq=False)
class Expr:
    """`name = node` (an assignment, an annotated one, `:=`), in `scope`."""
    node: ast.expr
    scope: Scope


@dataclass(frozen=True, eq=False)
class AugExpr:
    """`name op= value`."""
    stmt: ast.AugAssign
    scope: Scope


@dataclass(frozen=True, eq=False)
class Iter:
    """`for name in node` (a loop or a comprehension): an element of what `node` holds."""
    node: ast.expr
    scope: Scope


@dataclass(frozen=True, eq=False)
class Unpack:
    """Element `index` of what `inner` binds (None for a starred target): `a, b = ...`."""
    inner: Binding
    index: int | None


@dataclass(frozen=True, eq=False)
class Imported:
    """`import alias` or `from stmt.module import alias`."""
    stmt: Union[ast.Import, ast.ImportFrom]
    alias: ast.alias


@dataclass(frozen=True, eq=False)
class Param:
    """Parameter `name` (positional `index`, None for keyword-only) of the function with qualified name `qual`."""
    qual: str
    index: int | None
    name: str


Binding = Union[Fixed, Expr, AugExpr, Iter, Unpack, Imported, Param]


class Scope:
    """The names bound in a module, a class body or a function: name -> the bindings of it."""

    def __init__(self, node: ast.AST, parent: Scope | None, cls: str | None = None, qual: str = ""):
        self.node, self.parent, self.cls, self.qual = node, parent, cls, qual
        self.bindings: dict[str, list[Binding]] = {}
        self.global_names: set[str] = set()
        self.class_scope = False              # a class body: its names are not seen from its methods
        self.self_name: str | None = None     # a method's first parameter (self), bound to its class's instance
        self.owner_cls: str | None = None     # the class a method belongs to

    def bind(self, name: str, binding: Binding) -> None:
        target = self
        if name in self.global_names:
            while target.parent is not None:
                target = target.parent
        target.bindings.setdefault(name, []).append(binding)


def shallow(node: ast.AST):
    """The nodes of one statement's own expressions: ast.walk that does not enter nested statements (each is
    collected on its own, in its own scope when it is a function or a class)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, ast.stmt):
                stack.append(child)


class Bindings:
    """The bindings of one file and what the rules need to know of its structure."""

    def __init__(self, tree: ast.Module, is_kernel: Callable[[ast.AST, Scope], bool]):
        """`is_kernel` tells a Triton kernel by its decorators; `collect` asks it as each function is reached (the
        decorator's names resolve against what is bound so far)."""
        self.tree = tree
        self.is_kernel = is_kernel
        self.parent: dict[ast.AST, ast.AST] = {}
        self.scope_of: dict[ast.AST, Scope] = {}      # node -> the scope its names are looked up in
        self.classes: dict[str, ast.ClassDef] = {}
        self.class_attrs: dict[str, dict[str, list[Binding]]] = {}
        self.methods: dict[str, set[str]] = {}
        self.functions: dict[str, tuple[ast.AST, Scope]] = {}   # qualname -> (def, its scope)
        self.kernels: set[ast.AST] = set()
        self.module = Scope(tree, None)
        self.nodes = list(ast.walk(tree))
        for node in self.nodes:
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node

    def collect(self) -> None:
        """Collect the file's bindings, in the order of its statements."""
        self._collect(self.tree.body, self.module)

    def _collect(self, stmts, scope: Scope) -> None:
        for st in stmts:
            self._collect_stmt(st, scope)

    def _mark(self, node: ast.AST, scope: Scope) -> None:
        for sub in shallow(node):
            self.scope_of.setdefault(sub, scope)

    def _collect_stmt(self, st: ast.stmt, scope: Scope) -> None:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._collect_def(st, scope)
            return
        if isinstance(st, ast.ClassDef):
            self._collect_class(st, scope)
            return
        self._mark(st, scope)
        if isinstance(st, ast.Global):
            scope.global_names.update(st.names)
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            for alias in st.names:
                scope.bind((alias.asname or alias.name).split(".")[0], Imported(st, alias))
        elif isinstance(st, ast.Assign):
            for t in st.targets:
                self._bind_target(t, Expr(st.value, scope), scope)
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            self._bind_target(st.target, Expr(st.value, scope), scope)
        elif isinstance(st, ast.AugAssign):
            self._bind_target(st.target, AugExpr(st, scope), scope)
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            self._bind_target(st.target, Iter(st.iter, scope), scope)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, Fixed(UNKNOWN), scope)
        elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
            for h in st.handlers:
                if h.name:
                    scope.bind(h.name, Fixed(PLAIN))
        for sub in shallow(st):
            if isinstance(sub, ast.NamedExpr):
                self._bind_target(sub.target, Expr(sub.value, scope), scope)
            elif isinstance(sub, ast.comprehension):
                self._bind_target(sub.target, Iter(sub.iter, scope), scope)
            elif isinstance(sub, ast.Lambda):
                for a in sub.args.args:
                    scope.bind(a.arg, Fixed(UNKNOWN))
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                self._collect(inner, scope)
        for h in getattr(st, "handlers", []) or []:
            self._collect(h.body, scope)
        if isinstance(st, ast.Match):
            for case in st.cases:
                self._collect(case.body, scope)

    def _collect_def(self, st: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> None:
        for dec in st.decorator_list:
            self._mark(dec, scope)
        for d in st.args.defaults + st.args.kw_defaults:
            if d is not None:
                self._mark(d, scope)
        self._mark_annotations(st, scope)
        qual = f"{scope.cls}.{st.name}" if scope.cls else (f"{scope.qual}.{st.name}" if scope.qual else st.name)
        if self.is_kernel(st, scope):
            self.kernels.add(st)
            scope.bind(st.name, Fixed(KERNEL))
            return
        if scope.cls is not None:
            self.methods.setdefault(scope.cls, set()).add(st.name)
            self.class_attrs.setdefault(scope.cls, {})
        else:
            scope.bind(st.name, Fixed(Kind(Tag.OWNFUNC, qual)))
        inner = Scope(st, scope if scope.cls is None else self._enclosing(scope), None, qual)
        self.functions[qual] = (st, inner)
        args = st.args.posonlyargs + st.args.args
        decos = {ast.unparse(d) for d in st.decorator_list}
        for i, a in enumerate(args):
            if i == 0 and scope.cls is not None and "staticmethod" not in decos:
                kind = Kind(Tag.OWNCLASS, scope.cls) if "classmethod" in decos else Kind(Tag.OWN, scope.cls)
                inner.bind(a.arg, Fixed(kind))
                inner.self_name = a.arg
            else:
                inner.bind(a.arg, Param(qual, i, a.arg))
        for a in st.args.kwonlyargs:
            inner.bind(a.arg, Param(qual, None, a.arg))
        for a in (st.args.vararg, st.args.kwarg):
            if a is not None:
                inner.bind(a.arg, Fixed(UNKNOWN))
        inner.owner_cls = scope.cls
        self._collect(st.body, inner)

    def _collect_class(self, st: ast.ClassDef, scope: Scope) -> None:
        for sub in st.bases + st.keywords + st.decorator_list:
            self._mark(sub, scope)
        self.classes[st.name] = st
        self.class_attrs.setdefault(st.name, {})
        self.methods.setdefault(st.name, set())
        scope.bind(st.name, Fixed(Kind(Tag.OWNCLASS, st.name)))
        body = Scope(st, scope, st.name, st.name)
        body.class_scope = True
        self._collect(st.body, body)
        for name, bs in body.bindings.items():
            self.class_attrs[st.name].setdefault(name, []).extend(bs)

    def _mark_annotations(self, fn, scope: Scope) -> None:
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
            if a.annotation is not None:
                self._mark(a.annotation, scope)
        if fn.returns is not None:
            self._mark(fn.returns, scope)

    @staticmethod
    def _enclosing(scope: Scope) -> Scope:
        while scope.class_scope:
            scope = scope.parent
        return scope

    def _bind_target(self, t: ast.AST, binding: Binding, scope: Scope) -> None:
        if isinstance(t, ast.Name):
            scope.bind(t.id, binding)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for i, elt in enumerate(t.elts):
                self._bind_target(elt, Unpack(binding, i), scope)
        elif isinstance(t, ast.Starred):
            self._bind_target(t.value, Unpack(binding, None), scope)
        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
            cls = self._self_class(t.value.id, scope)
            if cls is not None:
                self.class_attrs.setdefault(cls, {}).setdefault(t.attr, []).append(binding)

    @staticmethod
    def _self_class(name: str, scope: Scope) -> str | None:
        """The class whose instance `name` is, where `name` is a method's self (in it or a function inside it)."""
        s = scope
        while s is not None:
            if s.self_name == name:
                return s.owner_cls
            if name in s.bindings:
                return None
            s = s.parent
        return None
