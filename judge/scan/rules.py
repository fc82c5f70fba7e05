"""The rules the scan applies to a candidate's host code (`Rules.findings`), each named by its check in the reason.

Host code is every line outside the candidate's Triton kernels (functions whose decorator resolves to triton.jit,
triton.autotune or triton.heuristics; a decorator of the candidate's own that is merely called `jit` does not
count). Host code may allocate, reshape and launch; the work is the kernels'. The rules read what each name and
attribute in host code holds (infer.py):

  torch-compute check  a path in torch is used (called, or held: `f = torch.softmax`, `self.op = F.softmax`, passed
                       as a value, imported by name) unless it allocates, reshapes, describes or is a namespace that
                       computes nothing (torch.backends, torch.nn.init, torch.utils.cpp_extension, the device,
                       stream, event and memory functions of torch.cuda); a torch module (`torch`, `F`) used as a
                       value rather than through an attribute (aliasing it would hide what is called); a method that
                       computes (any callable of torch.Tensor but the allocation, view, copy and description ones) on
                       anything not known to be the candidate's own or plain: `x.sum()` is rejected,
                       `self.stats.sum()` on an instance of the candidate's own class is not (the rule for names: a
                       method name is taken for the tensor op only on a receiver the scan cannot resolve to the
                       candidate's own class, a literal, a container or a non-torch module); arithmetic, comparison
                       or a builtin reduction (sum, max, min, abs, pow) with a tensor operand, and `@` anywhere;
                       instantiating a torch.nn module class that holds no weights (nn.Softmax, nn.ReLU); calling a
                       torch.nn module instance or its forward (holding nn.Linear or nn.Parameter for weights is
                       allowed, using them in torch is not), and, in a file that instantiates torch.nn modules,
                       calling anything the scan cannot resolve (a module hidden in a container or another object);
                       subclassing a torch class other than nn.Module, autograd.Function or Tensor; torch in a Triton
                       kernel's body (under the interpreter a kernel body runs as Python); importing
                       numpy/scipy/cupy/jax/numba (compute on the host).
  getattr check        getattr, setattr, delattr (operator.attrgetter, operator.methodcaller) with a name built at
                       run time on anything not the candidate's own; `getattr(torch, dtype)` as a `dtype=` argument
                       or the argument of `.to(...)`, directly or through a name used only there, is allowed (it can
                       only be a dtype there). A constant name is read as the attribute it names.
  dynamic-code check   eval, exec, compile, __import__, globals/locals/vars, importlib, runpy, pickle, marshal,
                       sys.modules: code or modules reached through strings, which no scan can follow.
  introspection check  sys._getframe and the other frame and trace hooks of sys, inspect, gc, ctypes, traceback, and
                       the attributes that reach frames, code objects, globals and class internals (f_back,
                       f_locals, __code__, __globals__, __subclasses__, __dict__, ...).
  torch-override check __torch_function__ / __torch_dispatch__ defined anywhere, torch.overrides
                       (TorchFunctionMode), torch.utils._python_dispatch (TorchDispatchMode), torch.library: they
                       change what every torch call computes, the reference's and the comparison's included.
  fallback check       an except handler whose body computes with torch or calls the reference Model (judged by
                       scan_source, from the findings here).

An allowance (allowance.py) excuses the torch calls a config allows, by identity.
"""
from __future__ import annotations

import ast
import sys

from kernelsearch.judge.scan.allowance import Allowance
from kernelsearch.judge.scan.bindings import Scope
from kernelsearch.judge.scan.infer import REDUCING_BUILTINS, Inference
from kernelsearch.judge.scan.kinds import Kind, Tag
from kernelsearch.judge.scan.native import check_native
from kernelsearch.judge.scan.torch_paths import (
    MISSING,
    NN_BASES_OK,
    NN_METHODS_OK,
    OVERRIDE_ATTRS,
    classify,
    nn_compute_methods,
    tensor_compute_names,
    torch_alias,
    torch_object,
)

# the builtins that look attributes up by a name given at run time (the getattr check, when passed as a value)
ATTR_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# code or modules reached through strings (the dynamic-code check)
DYNAMIC_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint"})
DYNAMIC_MODULES = frozenset({"importlib", "imp", "runpy", "code", "codeop", "marshal", "pickle", "dill",
                             "cloudpickle", "shelve", "zipimport", "pkgutil"})
# frames, the heap, raw memory (the introspection check)
INTROSPECTION_MODULES = frozenset({"inspect", "gc", "ctypes", "_ctypes", "cffi", "traceback", "dis", "faulthandler",
                                   "tracemalloc", "sysconfig", "_thread"})
# what a candidate may import: torch (whose every path the rules read), triton, and Python's standard library. Any
# other module may hand it torch under another name (a module that imported torch: the judge's own numerics, a
# package's re-export), which no reading of this one file can follow (the import check; fixture round3/
# kernelsearch_reexport)
IMPORTABLE_ROOTS = frozenset({"torch", "triton"}) | frozenset(sys.stdlib_module_names)
# libraries that compute on the host (the torch-compute check)
FOREIGN_COMPUTE = frozenset({"numpy", "scipy", "cupy", "jax", "jaxlib", "numba", "tensorflow", "pandas", "sklearn"})
# what host code may read of sys; the rest of it is frames, trace hooks and the interpreter's internals
SYS_ALLOWED = frozenset({"version", "version_info", "platform", "byteorder", "maxsize", "float_info", "stderr",
                         "stdout", "argv", "path", "getsizeof", "getrecursionlimit", "hexversion", "implementation"})
# the attributes that reach frames, code objects, globals and the internals of other objects
INTROSPECTION_ATTRS = frozenset({
    "__code__", "__globals__", "__closure__", "__builtins__", "__subclasses__", "__dict__", "__getattribute__",
    "__import__", "__loader__", "__spec__", "__mro__", "__bases__", "__base__", "__self__", "__func__", "__wrapped__",
    "__reduce__", "__reduce_ex__", "__setattr__", "__delattr__", "__class_getitem__", "__init_subclass__",
    "f_back", "f_locals", "f_globals", "f_code", "f_builtins", "f_trace", "f_lasti", "tb_frame", "tb_next",
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "co_code", "co_consts", "co_names",
    "_getframe", "_current_frames", "settrace", "setprofile", "_modules", "_parameters", "_buffers"})
# what a call the scan resolves may reach: in a file that holds torch modules, a call of anything else is rejected
RESOLVED = (Tag.KERNEL, Tag.OWN, Tag.OWNCLASS, Tag.OWNFUNC, Tag.BUILTIN, Tag.MOD, Tag.EXT, Tag.TORCH, Tag.TOBJ)


class Finding(Exception):
    """A rule that fired: its check, the node and what it found."""

    def __init__(self, check: str, node: ast.AST, what: str):
        super().__init__(what)
        self.check, self.node, self.what = check, node, what
        self.lineno = getattr(node, "lineno", 0)


class Rules:
    """The rules applied to every node of the host code and to the Triton kernels' bodies."""

    def __init__(self, infer: Inference, allow: Allowance):
        self.infer = infer
        self.b = infer.bindings
        self.allow = allow
        self.host = list(self._host_nodes())
        # a file that instantiates torch.nn modules (to hold weights) may not call what the scan cannot resolve: a
        # module reached through a container or an object the scan does not follow would be called unseen
        self.holds_modules = any(
            isinstance(n, ast.Call) and any(k.tag is Tag.TORCH and classify(k.name) in ("nn-holder", "nn-compute")
                                            for k in infer.kinds(n.func, self.b.scope_of.get(n, self.b.module)))
            for n in self.host)

    def _host_nodes(self):
        """Every node outside the Triton kernels (a kernel's decorators are host code)."""
        stack = [self.b.tree]
        while stack:
            node = stack.pop()
            if node in self.b.kernels:
                for dec in node.decorator_list:
                    stack.append(dec)
                continue
            yield node
            stack.extend(ast.iter_child_nodes(node))

    def except_handlers(self):
        """The except handlers of host code (for the fallback check)."""
        for node in self.host:
            if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                yield from node.handlers

    def findings(self) -> list[Finding]:
        """What fires: at most one finding a host node (the first rule that does), and every torch name in a kernel
        body."""
        out = []
        for node in self.host:
            try:
                self._check(node)
            except Finding as f:
                out.append(f)
        for node in self.b.nodes:
            if node in self.b.kernels:
                out.extend(self._check_kernel_body(node))
        out.extend(Finding("native-code check", node, what) for node, what in check_native(self.b.tree))
        return out

    def _check_kernel_body(self, fn) -> list[Finding]:
        """A Triton kernel's body runs as Python only under the interpreter (TRITON_INTERPRET=1), where it could
        call torch on a tensor held in a global; compiled for a GPU it could not. Any torch name in it is
        rejected."""
        local = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
        for sub in ast.walk(fn):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                local.add(sub.id)
        out = []
        for body in fn.body:
            for sub in ast.walk(body):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in local:
                    kinds = self.infer.lookup(sub.id, self.b.module)
                    bad = sorted(k.name for k in kinds if k.tag is Tag.TORCH or (
                        k.tag is Tag.MOD and k.name.split(".")[0] in
                        INTROSPECTION_MODULES | DYNAMIC_MODULES | {"sys", "builtins"}))
                    if bad or sub.id in DYNAMIC_BUILTINS:
                        out.append(Finding("torch-compute check", sub, f"the Triton kernel {fn.name} uses "
                                           f"{sub.id} ({(bad or [sub.id])[0]}): a kernel body may use triton and "
                                           "tl only (under the interpreter it would run as Python)"))
        return out

    def _check(self, node: ast.AST) -> None:
        scope = self.b.scope_of.get(node, self.b.module)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._check_import(node)
        elif isinstance(node, ast.ClassDef):
            self._check_class(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in OVERRIDE_ATTRS:
            raise Finding("torch-override check", node, f"defines {node.name}, which changes what every torch call "
                          "computes (the reference's and the comparison's included)")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in OVERRIDE_ATTRS:
                raise Finding("torch-override check", node, f"uses {node.id}")
            if node.id == "__builtins__":
                raise Finding("introspection check", node, "uses __builtins__")
            self._check_value(node, self.infer.kinds(node, scope), node.id)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in OVERRIDE_ATTRS:
            raise Finding("torch-override check", node, f"binds {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr in OVERRIDE_ATTRS:
                raise Finding("torch-override check", node, f"uses {ast.unparse(node)[:60]}")
            if node.attr in INTROSPECTION_ATTRS:
                raise Finding("introspection check", node, f"reaches {ast.unparse(node)[:60]} (frames, code objects, "
                              "globals or internals of other objects)")
            if isinstance(node.ctx, ast.Load):
                base = self.infer.kinds(node.value, scope)
                self._check_attr(node, base, node.attr)
                self._check_value(node, self.infer.kinds(node, scope), ast.unparse(node)[:60])
        elif isinstance(node, ast.Call):
            self._check_call(node, scope)
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                if self.allow.matmul_operator():
                    return
                raise Finding("torch-compute check", node, "computes with a torch op (@ (matmul operator))")
            self._check_arith(node, [node.left, node.right], scope)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.op, ast.MatMult):
                if self.allow.matmul_operator():
                    return
                raise Finding("torch-compute check", node, "computes with a torch op (@= (matmul operator))")
            self._check_arith(node, [node.target, node.value], scope)
        elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
            self._check_arith(node, [node.operand], scope)
        elif isinstance(node, ast.Compare):
            if not all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                self._check_arith(node, [node.left, *node.comparators], scope)

    def _check_import(self, node) -> None:
        if isinstance(node, ast.ImportFrom) and node.level:
            return
        for alias in node.names:
            path = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
            root = path.split(".")[0]
            if root in INTROSPECTION_MODULES or path in ("sys._getframe", "sys.modules", "sys._current_frames"):
                raise Finding("introspection check", node, f"imports {path} (frames, the heap or raw memory of the "
                              "process)")
            if root in DYNAMIC_MODULES or path in ("builtins.eval", "builtins.exec", "builtins.__import__"):
                raise Finding("dynamic-code check", node, f"imports {path}: code or modules reached through "
                              "strings")
            if root in FOREIGN_COMPUTE:
                raise Finding("torch-compute check", node, f"imports {root}: host code computes nothing")
            if root not in IMPORTABLE_ROOTS:
                raise Finding("import check", node, f"imports {path}: a candidate may import torch, triton and "
                              "Python's standard library only (another module may hand it torch under another name)")
            if root == "operator" and alias.name in ("attrgetter", "methodcaller"):
                raise Finding("getattr check", node, f"imports operator.{alias.name}")
            if root == "torch" and isinstance(node, ast.ImportFrom):
                if alias.name == "*":
                    raise Finding("torch-compute check", node, f"imports * from {node.module}: names the scan "
                                  "cannot follow")
                self._check_torch_path(node, path, called=False)
            elif root == "torch":
                if classify(path) == "override":
                    raise Finding("torch-override check", node, f"imports {path}")

    def _check_class(self, node: ast.ClassDef) -> None:
        scope = self.b.scope_of.get(node.bases[0]) if node.bases else self.b.module
        for base in node.bases:
            for k in self.infer.kinds(base, scope or self.b.module):
                if k.tag is Tag.TORCH and k.name not in NN_BASES_OK:
                    check = "torch-override check" if classify(k.name) == "override" else "torch-compute check"
                    raise Finding(check, node, f"class {node.name} subclasses {k.name} (its methods compute with "
                                  "torch)")
        for kw in node.keywords:
            if kw.arg == "metaclass":
                raise Finding("introspection check", node, f"class {node.name} sets a metaclass")

    def _check_torch_path(self, node: ast.AST, path: str, *, called: bool) -> None:
        cls = classify(path)
        verb = "calls" if called else "refers to"
        if cls == "override":
            raise Finding("torch-override check", node, f"{verb} {path}, which changes what torch calls compute")
        if cls == "compute" and not self.allow.path(path):
            raise Finding("torch-compute check", node, f"{verb} a torch op ({path}) outside the candidate's own "
                          "kernels; host code may only allocate and reshape")
        if cls == "nn-compute":
            what = "instantiates" if called else "refers to"
            raise Finding("torch-compute check", node, f"{what} {path}, a torch module that computes and holds no "
                          "weights")
        if cls == "class-bad":
            raise Finding("torch-compute check", node, f"{verb} {path}, a torch class host code has no use for")

    def _check_value(self, node: ast.AST, kinds: frozenset, text: str) -> None:
        """A Name or Attribute in host code: what it resolves to may be used, held or called?"""
        parent = self.b.parent.get(node)
        called = isinstance(parent, ast.Call) and parent.func is node
        through = isinstance(parent, ast.Attribute) and parent.value is node
        for k in kinds:
            if k.tag is Tag.TORCH:
                if isinstance(node, ast.Name) and k.name in ("torch", "torch.nn", "torch.nn.functional") and through:
                    continue
                if classify(k.name) == "module":
                    if not through and not self._dtype_lookup(parent, node):
                        raise Finding("torch-compute check", node, f"uses the module {k.name} as a value "
                                      f"({text}); only its attributes may be used")
                    continue
                self._check_torch_path(node, k.name, called=called)
            elif k.tag is Tag.TOBJ and called:
                if classify(k.name) in ("nn-holder", "nn-compute") and not self.allow.module(k.name):
                    raise Finding("torch-compute check", node, f"calls {text}, a {k.name} module: its forward is "
                                  "torch compute (its weights may be given to a kernel)")
            elif k.tag is Tag.MOD:
                self._check_mod_path(node, k.name, called=called)
            elif k.tag is Tag.BUILTIN and k.name in DYNAMIC_BUILTINS:
                raise Finding("dynamic-code check", node, f"uses {k.name}: code reached through strings")
            elif k.tag is Tag.BUILTIN and k.name in ATTR_BUILTINS and not called:
                # called by name, the getattr check reads its arguments; passed as a value (to functools.reduce,
                # map, a dict of helpers) it looks up whatever names it is later given (fixture round3/getattr_reduce)
                raise Finding("getattr check", node, f"passes {k.name} as a value ({text}): it would look up "
                              "attributes named at run time")

    def _check_mod_path(self, node: ast.AST, path: str, *, called: bool) -> None:
        torch_path = torch_alias(path)
        if torch_path is not None:   # torch by identity: the object a module's path holds, whatever it is named
            if torch_path.startswith("?"):
                raise Finding("torch-compute check", node, f"reaches torch through {path} ({torch_path[1:]}): "
                              "torch is used by its own name or not at all")
            if classify(torch_path) != "module" or not isinstance(self.b.parent.get(node), ast.Attribute):
                self._check_torch_path(node, torch_path, called=called)
            return
        parts = path.split(".")
        if parts[0] == "sys" and len(parts) > 1:
            if parts[1] == "modules":
                raise Finding("dynamic-code check", node, "uses sys.modules: modules reached through strings")
            if parts[1] not in SYS_ALLOWED:
                raise Finding("introspection check", node, f"uses {path} (frames, trace hooks or the interpreter's "
                              "internals)")
        if parts[0] == "builtins" and len(parts) > 1 and parts[1] in DYNAMIC_BUILTINS | {"getattr"}:
            raise Finding("dynamic-code check", node, f"uses {path}")
        if parts[0] == "operator" and len(parts) > 1 and parts[1] in ("attrgetter", "methodcaller"):
            raise Finding("getattr check", node, f"uses {path}: an attribute named by a string")

    def _check_attr(self, node: ast.Attribute, base: frozenset, attr: str) -> None:
        """`base.attr` with base of these kinds: a tensor op on something that may be a tensor, or a torch object's
        method that computes."""
        for k in base:
            if k.tag in (Tag.TENSOR, Tag.UNKNOWN):
                if attr in tensor_compute_names() and not self.allow.method(attr):
                    raise Finding("torch-compute check", node, f"computes with a torch op ({ast.unparse(node)[:60]}) "
                                  "outside the candidate's own kernels; host code may only allocate and reshape")
            elif k.tag is Tag.TATTR:
                self._check_tobj_attr(node, k.name, k.attr, attr)
            elif k.tag is Tag.TOBJ:
                self._check_tobj_attr(node, k.name, None, attr)
            elif k.tag is Tag.OWN and self.infer.tensorish(k.name) and attr in tensor_compute_names() \
                    and not self.allow.method(attr):
                raise Finding("torch-compute check", node, f"computes with a torch op ({ast.unparse(node)[:60]}) "
                              "on a tensor subclass")

    def _check_tobj_attr(self, node, cls_path: str, first: str | None, attr: str) -> None:
        """An attribute of an instance of a torch class (`first` is set when the instance is itself an attribute
        of one: self.lin.weight.sum -> Kind(TATTR, Linear, weight) then .sum)."""
        if first is not None:   # an attribute of an attribute: a weight, a buffer, a config value
            if attr in tensor_compute_names() and not self.allow.method(attr):
                raise Finding("torch-compute check", node, f"computes with a torch op ({ast.unparse(node)[:60]})")
            return
        kind = classify(cls_path)
        obj = torch_object(cls_path)
        member = getattr(obj, attr, None) if obj is not MISSING else None
        if kind in ("nn-holder", "nn-compute"):
            if attr.startswith("_") and not attr.startswith("__"):
                raise Finding("torch-compute check", node, f"reaches {ast.unparse(node)[:60]}, an internal of a "
                              "torch module")
            if callable(member) and attr not in NN_METHODS_OK and not (
                    attr in ("forward", "__call__") and self.allow.module(cls_path)):
                raise Finding("torch-compute check", node, f"uses {ast.unparse(node)[:60]}, a method of a torch "
                              "module that computes")
        elif kind == "class-ok" and any(cls_path.startswith(p) for p in ("torch.Tensor", "torch.nn.Parameter")):
            if attr in tensor_compute_names() and not self.allow.method(attr):
                raise Finding("torch-compute check", node, f"computes with a torch op ({ast.unparse(node)[:60]})")

    def _check_call(self, node: ast.Call, scope: Scope) -> None:
        func = node.func
        fk = self.infer.kinds(func, scope)
        if any(k in (Kind(Tag.BUILTIN, "setattr"), Kind(Tag.BUILTIN, "delattr")) for k in fk) and len(node.args) >= 2:
            name = node.args[1]
            base = self.infer.kinds(node.args[0], scope)
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)) and \
                    not all(k.tag in (Tag.PLAIN, Tag.OWN, Tag.OWNCLASS) for k in base):
                raise Finding("getattr check", node, f"{ast.unparse(node)[:60]}: an attribute named at run time "
                              "on an object that is not the candidate's own")
        recv = self.infer.kinds(func.value, scope) if isinstance(func, ast.Attribute) else frozenset()
        if self.holds_modules and not all(k.tag in RESOLVED for k in fk) and not self._allowed_forward(func, recv) \
                and (not isinstance(func, ast.Attribute)
                     or (func.attr in nn_compute_methods()
                         and not all(k.tag in (Tag.MOD, Tag.EXT, Tag.TORCH) for k in recv))
                     or (recv and all(k.tag in (Tag.OWN, Tag.OWNCLASS) for k in recv))):
            raise Finding("torch-compute check", node, f"calls {ast.unparse(func)[:60]}, which the scan cannot "
                          "resolve, in a file that holds torch modules (a module's forward is torch compute)")
        if Kind(Tag.BUILTIN, "getattr") in fk and len(node.args) >= 2 and self._check_getattr(node, scope):
            return   # getattr(torch, name) used as a dtype
        for k in fk:
            if k.tag is Tag.TOBJ and classify(k.name) in ("nn-holder", "nn-compute") and not self.allow.module(k.name):
                raise Finding("torch-compute check", node, f"calls {ast.unparse(func)[:60]}, a {k.name} module: "
                              "its forward is torch compute (its weights may be given to a kernel)")
            if k.tag is Tag.BUILTIN and k.name in REDUCING_BUILTINS:
                for arg in node.args:
                    ak = self.infer.kinds(arg, scope)
                    if any(a.tensorish or (a.tag is Tag.SEQ and any(b.tensorish for b in a.elems)) for a in ak):
                        raise Finding("torch-compute check", node, f"computes with a torch op ({k.name}() of "
                                      "tensors) outside the candidate's own kernels")

    def _check_getattr(self, node: ast.Call, scope: Scope) -> bool:
        """getattr(obj, name, ...): a constant name is read as the attribute it names; a name built at run time is
        allowed on the candidate's own objects, and on torch where the result can only be a dtype (then True)."""
        name = node.args[1]
        base = self.infer.kinds(node.args[0], scope)
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            synthetic = ast.copy_location(ast.Attribute(value=node.args[0], attr=name.value, ctx=ast.Load()), node)
            if name.value in INTROSPECTION_ATTRS:
                raise Finding("introspection check", node, f"reaches {name.value} through getattr")
            self._check_attr(synthetic, base, name.value)
            self._check_value(node, self.infer.attr_kinds(base, name.value), ast.unparse(node)[:60])
            return False
        if base == frozenset({Kind(Tag.TORCH, "torch")}) and self._dtype_only(node, scope):
            return True
        if not all(k.tag in (Tag.PLAIN, Tag.OWN, Tag.OWNCLASS, Tag.EXT) for k in base):
            raise Finding("getattr check", node, f"{ast.unparse(node)[:60]}: an attribute named at run time "
                          "on an object that is not the candidate's own")
        return False

    def _allowed_forward(self, func: ast.AST, recv: frozenset) -> bool:
        """`self.lin.forward(x)` on instances of an allowed nn class only."""
        return isinstance(func, ast.Attribute) and func.attr in ("forward", "__call__") and bool(recv) and all(
            k.tag is Tag.TOBJ and self.allow.module(k.name) for k in recv)

    def _check_arith(self, node: ast.AST, operands: list, scope: Scope) -> None:
        for op in operands:
            if any(k.tensorish for k in self.infer.kinds(op, scope)):
                raise Finding("torch-compute check", node, f"computes with a torch op (tensor arithmetic: "
                              f"{ast.unparse(node)[:60]}) outside the candidate's own kernels")

    @staticmethod
    def _dtype_lookup(parent, node) -> bool:
        """`node` is the value of a dtype= keyword, or the first argument of .to(...): there it can only be a
        dtype (a function in its place raises)."""
        if isinstance(parent, ast.keyword) and parent.arg == "dtype" and parent.value is node:
            return True
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and parent.func.attr == "to" \
                and parent.args and parent.args[0] is node:
            return True
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "getattr" \
                and parent.args and parent.args[0] is node:
            return True   # judged at the getattr call
        return False

    def _dtype_only(self, node: ast.Call, scope: Scope) -> bool:
        """getattr(torch, name) used only as a dtype: directly (`dtype=getattr(torch, name)`), or bound to a name
        (`dt = getattr(torch, name)`) every use of which in its scope is a dtype position."""
        parent = self.b.parent.get(node)
        if self._dtype_lookup(parent, node):
            return True
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0], ast.Name)):
            return False
        name = parent.targets[0].id
        uses = [n for n in ast.walk(scope.node) if isinstance(n, ast.Name) and n.id == name
                and isinstance(n.ctx, ast.Load) and self.b.scope_of.get(n) is scope]
        return all(self._dtype_lookup(self.b.parent.get(n), n) for n in uses)
