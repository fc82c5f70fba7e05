"""The scan of what a candidate's host code reaches (issue 18), run by the judge on the source as text.

Long because it is one walk over the file (`_Scan`) with the tables it resolves names against beside it: the
bindings, the torch paths that compute and those that do not, and the rules below, which read best in one place.
"""
from __future__ import annotations

import ast

from kernelsearch.judge.status import CandidateFailure, Status

# -- the scan of what host code reaches (issue 18) -----------------------------------------------------------------
#
# Host code is every line outside the candidate's Triton kernels (functions whose decorator resolves to triton.jit,
# triton.autotune or triton.heuristics; a decorator of the candidate's own that is merely called `jit` does not
# count). Host code may allocate, reshape and launch; the work is the kernels'. The scan resolves what each name
# and attribute in host code is bound to, from every binding of it in the file (imports, assignments, parameters,
# loop targets, `self.x = ...` in any method of a class), into one of these kinds:
#
#   ("torch", path)      a path in torch, resolved against the real torch module: torch.softmax, F.softmax (from
#                        `import torch.nn.functional as F`), `_f` after `from torch import softmax as _f`
#   ("tobj", path)       an instance of a torch class: nn.Linear(...) -> ("tobj", "torch.nn.Linear")
#   ("tattr", path, a)   an attribute of such an instance (self.lin.weight, self.lin.forward)
#   ("tensor",)          a tensor: forward's parameters, what a torch allocation or a tensor method returns, a
#                        subscript of a tensor, the arguments the candidate's own functions are called with
#   ("own", C) / ("ownclass", C) / ("ownfunc", q) / ("kernel",)   the candidate's own classes, instances, functions
#   ("mod", path)        a path in a module that is not torch (math, triton, tl, os)
#   ("plain",)           literals, containers, numbers, shapes (x.shape, x.size(), x.dtype, x.numel())
#   ("seq", kinds)       a container whose elements are of these kinds (a list of modules, a tuple of tensors)
#   ("unknown",)         anything else (a parameter of a helper never called here, what an unknown call returns)
#
# A name bound several times has the union of the kinds. The rules, each named by its check in the reason:
#
#   torch-compute check  a path in torch is used (called, or held: `f = torch.softmax`, `self.op = F.softmax`,
#                        passed as a value, imported by name) unless it allocates, reshapes, describes or is a
#                        namespace that computes nothing (torch.backends, torch.nn.init, torch.utils.cpp_extension,
#                        the device, stream, event and memory functions of torch.cuda); a torch module (`torch`, `F`)
#                        used as a value rather than through an attribute (aliasing it would hide what is called);
#                        a method that computes (any callable of torch.Tensor but the allocation, view, copy and
#                        description ones) on anything not known to be the candidate's own or plain: `x.sum()` is
#                        rejected, `self.stats.sum()` on an instance of the candidate's own class is not (the rule
#                        for names: a method name is taken for the tensor op only on a receiver the scan cannot
#                        resolve to the candidate's own class, a literal, a container or a non-torch module);
#                        arithmetic, comparison or a builtin reduction (sum, max, min, abs, pow) with a tensor
#                        operand, and `@` anywhere; instantiating a torch.nn module class that holds no weights
#                        (nn.Softmax, nn.ReLU); calling a torch.nn module instance or its forward (holding nn.Linear
#                        or nn.Parameter for weights is allowed, using them in torch is not), and, in a file that
#                        instantiates torch.nn modules, calling anything the scan cannot resolve (a module hidden in
#                        a container or another object); subclassing a torch class other than nn.Module,
#                        autograd.Function or Tensor; torch in a Triton kernel's body (under the interpreter a kernel
#                        body runs as Python); importing numpy/scipy/cupy/jax/numba (compute on the host).
#   getattr check        getattr, setattr, delattr (operator.attrgetter, operator.methodcaller) with a name built
#                        at run time on anything not the candidate's own; `getattr(torch, dtype)` as a `dtype=`
#                        argument or the argument of `.to(...)`, directly or through a name used only there, is
#                        allowed (it can only be a dtype there). A constant name is read as the attribute it names.
#   dynamic-code check   eval, exec, compile, __import__, globals/locals/vars, importlib, runpy, pickle, marshal,
#                        sys.modules: code or modules reached through strings, which no scan can follow.
#   introspection check  sys._getframe and the other frame and trace hooks of sys, inspect, gc, ctypes, traceback,
#                        and the attributes that reach frames, code objects, globals and class internals
#                        (f_back, f_locals, __code__, __globals__, __subclasses__, __dict__, ...).
#   torch-override check __torch_function__ / __torch_dispatch__ defined anywhere, torch.overrides (TorchFunctionMode),
#                        torch.utils._python_dispatch (TorchDispatchMode), torch.library: they change what every torch
#                        call computes, the reference's and the comparison's included.
#   fallback check       an except handler whose body computes with torch or calls the reference Model.
#
# When several rules fire, the reason names the most specific check (override, introspection, dynamic code,
# getattr, then torch compute), at its first line.
#
# What the scan does not claim: it reads one file; anything reached by a route it cannot resolve is either one of
# the routes rejected above or an unknown value, whose tensor-op methods are rejected by name. Not caught: operators
# on values it cannot tell are tensors (the parameter of a lambda or of a helper that no call in the file feeds a
# tensor, as in map or functools.reduce); plain-Python compute on the values of x.tolist(); and what the process
# does outside torch (its files, descriptors, other processes: the judge's process boundary and the sandbox stand
# there). The kernel-launch check and the judge's comparison stand behind it.

# -- what a config may allow (evaluation.allow_torch) ------------------------------------------------------------
#
# KernelBench lets a candidate keep part of the work in PyTorch (a level-2 solution keeps its GEMM in cuBLAS and
# fuses the epilogue into its own kernel). A config may allow, per problem, the named operations below and nothing
# else; the strict default allows none. An allowance is matched by identity, never by name: a torch path is allowed
# only if it resolves (in the real torch module) to one of the allowance's functions, so an alias of the same
# function passes and anything else (softmax under an allowance of matmul, however it is reached) is rejected by the
# same rules as without one. A tensor method is allowed by its name on torch.Tensor (`x.matmul(w)`), `@` by the
# matmul allowance, and calling an nn module (or its forward) only for the exact classes listed (not a subclass: a
# subclass of a torch class is rejected anyway, not a container such as nn.Sequential). What a call returns is a
# tensor, so arithmetic or a tensor method on it is still host compute. The kernel-launch check (a forward that
# launched none of the candidate's own Triton kernels is rejected) and `no kernel of its own` stand as they are:
# an allowance lets a candidate call a library for part of the work, never for all of it.
ALLOWABLE_TORCH: dict[str, dict[str, tuple[str, ...]]] = {
    "matmul": {"funcs": ("torch.matmul",), "methods": ("matmul", "__matmul__", "__rmatmul__"), "operator": ("@",)},
    "mm": {"funcs": ("torch.mm",), "methods": ("mm",)},
    "bmm": {"funcs": ("torch.bmm",), "methods": ("bmm",)},
    "addmm": {"funcs": ("torch.addmm",), "methods": ("addmm",)},
    "baddbmm": {"funcs": ("torch.baddbmm",), "methods": ("baddbmm",)},
    "linear": {"funcs": ("torch.nn.functional.linear",), "modules": ("torch.nn.Linear",)},
    "conv1d": {"funcs": ("torch.nn.functional.conv1d",), "modules": ("torch.nn.Conv1d",)},
    "conv2d": {"funcs": ("torch.nn.functional.conv2d",), "modules": ("torch.nn.Conv2d",)},
    "conv3d": {"funcs": ("torch.nn.functional.conv3d",), "modules": ("torch.nn.Conv3d",)},
    "conv_transpose1d": {"funcs": ("torch.nn.functional.conv_transpose1d",), "modules": ("torch.nn.ConvTranspose1d",)},
    "conv_transpose2d": {"funcs": ("torch.nn.functional.conv_transpose2d",), "modules": ("torch.nn.ConvTranspose2d",)},
    "conv_transpose3d": {"funcs": ("torch.nn.functional.conv_transpose3d",), "modules": ("torch.nn.ConvTranspose3d",)},
}


class _Allowance:
    """The operations a config allows, resolved to the objects they name; `used` collects the names a scan
    excused (recorded with the evaluation, so a result with library calls is never taken for one without)."""

    def __init__(self, names) -> None:
        unknown = [n for n in names if n not in ALLOWABLE_TORCH]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not an operation that can be allowed")
        self.names = tuple(names)
        self.funcs: dict[int, str] = {}
        self.methods: dict[str, str] = {}
        self.modules: dict[int, str] = {}
        self.operator = False
        for name in self.names:
            spec = ALLOWABLE_TORCH[name]
            for path in spec.get("funcs", ()):
                obj = _torch_object(path)
                if obj is not _MISSING:
                    self.funcs[id(obj)] = name
            for m in spec.get("methods", ()):
                self.methods[m] = name
            for path in spec.get("modules", ()):
                obj = _torch_object(path)
                if obj is not _MISSING:
                    self.modules[id(obj)] = name
            self.operator = self.operator or "@" in spec.get("operator", ())
        self.used: set[str] = set()

    def _take(self, name: str | None) -> bool:
        if name is None:
            return False
        self.used.add(name)
        return True

    def path(self, path: str) -> bool:
        """A torch path that computes: allowed if it is one of the allowed functions (by identity), or an allowed
        method of torch.Tensor."""
        if not self.names:
            return False
        if path.startswith("torch.Tensor.") and path.count(".") == 2:
            return self._take(self.methods.get(path.rsplit(".", 1)[1]))
        obj = _torch_object(path)
        return obj is not _MISSING and self._take(self.funcs.get(id(obj)))

    def method(self, attr: str) -> bool:
        """A tensor method on a tensor (or a value that may be one)."""
        return bool(self.names) and self._take(self.methods.get(attr))

    def module(self, cls_path: str) -> bool:
        """Calling an instance of this torch.nn class (or its forward)."""
        if not self.names:
            return False
        obj = _torch_object(cls_path)
        return obj is not _MISSING and self._take(self.modules.get(id(obj)))

    def matmul_operator(self) -> bool:
        return self.operator and self._take("matmul")


_KERNEL_DECORATORS = ("jit", "autotune", "heuristics")
_DYNAMIC_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint"})
_DYNAMIC_MODULES = frozenset({"importlib", "imp", "runpy", "code", "codeop", "marshal", "pickle", "dill",
                              "cloudpickle", "shelve", "zipimport", "pkgutil"})
_INTROSPECTION_MODULES = frozenset({"inspect", "gc", "ctypes", "_ctypes", "cffi", "traceback", "dis", "faulthandler",
                                    "tracemalloc", "sysconfig", "_thread"})
_FOREIGN_COMPUTE = frozenset({"numpy", "scipy", "cupy", "jax", "jaxlib", "numba", "tensorflow", "pandas", "sklearn"})
_SYS_ALLOWED = frozenset({"version", "version_info", "platform", "byteorder", "maxsize", "float_info", "stderr",
                          "stdout", "argv", "path", "getsizeof", "getrecursionlimit", "hexversion", "implementation"})
_INTROSPECTION_ATTRS = frozenset({
    "__code__", "__globals__", "__closure__", "__builtins__", "__subclasses__", "__dict__", "__getattribute__",
    "__import__", "__loader__", "__spec__", "__mro__", "__bases__", "__base__", "__self__", "__func__", "__wrapped__",
    "__reduce__", "__reduce_ex__", "__setattr__", "__delattr__", "__class_getitem__", "__init_subclass__",
    "f_back", "f_locals", "f_globals", "f_code", "f_builtins", "f_trace", "f_lasti", "tb_frame", "tb_next",
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "co_code", "co_consts", "co_names",
    "_getframe", "_current_frames", "settrace", "setprofile", "_modules", "_parameters", "_buffers"})
_OVERRIDE_ATTRS = frozenset({"__torch_function__", "__torch_dispatch__"})
_OVERRIDE_NAMESPACES = ("torch.overrides", "torch.utils._python_dispatch", "torch.library", "torch._C._set_torch_",
                        "torch._C._push_on_torch", "torch._C.DisableTorchFunction")
# namespaces of torch whose every member is allowed: backend flags (a change of TF32 is caught at run time),
# version, weight init, the CUDA C++ extension loader; and what host code needs of torch.cuda (devices, streams,
# events, memory), not the rest of it (torch.cuda.comm reduces, torch.cuda.nccl too)
_TORCH_FREE = ("torch.backends", "torch.version", "torch.nn.init", "torch.utils.cpp_extension", "torch.types")
_TORCH_CUDA_OK = frozenset({
    "Stream", "stream", "Event", "synchronize", "current_device", "device_count", "get_device_properties",
    "get_device_name", "get_device_capability", "current_stream", "default_stream", "set_stream", "set_device",
    "device", "is_available", "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "mem_get_info", "reset_peak_memory_stats", "manual_seed", "manual_seed_all", "get_arch_list", "is_bf16_supported",
    "is_initialized", "init", "OutOfMemoryError"})
_TORCH_FUNCS_OK = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "tensor",
    "as_tensor", "as_strided", "arange", "is_tensor", "is_floating_point", "is_complex", "numel", "get_default_dtype",
    "promote_types", "result_type", "can_cast", "is_grad_enabled", "manual_seed", "seed", "initial_seed",
    "randn", "rand", "randint", "randn_like", "rand_like", "randint_like", "randperm",   # weights' initial values
    "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "t", "narrow", "select", "split", "chunk",
    "unbind", "movedim", "broadcast_to"})
_TORCH_CLASSES_OK = frozenset({
    "torch.Tensor", "torch.Size", "torch.Generator", "torch.device", "torch.dtype", "torch.finfo", "torch.iinfo",
    "torch.layout", "torch.memory_format", "torch.no_grad", "torch.enable_grad", "torch.inference_mode",
    "torch.set_grad_enabled", "torch.autocast", "torch.Stream", "torch.Event", "torch.autograd.Function",
    "torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer"})
# torch.nn classes a candidate may instantiate: containers and the modules that hold weights (their weights may be
# handed to a kernel; calling the module is rejected). Any other nn.Module class computes and holds nothing.
_NN_HOLDERS = frozenset({
    "Module", "ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict", "Identity",
    "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "Embedding", "EmbeddingBag", "LayerNorm", "RMSNorm",
    "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "MultiheadAttention", "PReLU", "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell"})
_NN_BASES_OK = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.autograd.Function",
                          "torch.autograd.function.Function", "torch.Tensor", "torch.nn.Parameter"})
_NN_METHODS_OK = frozenset({
    "__init__", "parameters", "named_parameters", "buffers", "named_buffers", "state_dict", "load_state_dict",
    "register_buffer", "register_parameter", "to", "cuda", "cpu", "float", "half", "bfloat16", "double", "type", "eval",
    "train", "requires_grad_", "zero_grad", "get_parameter", "get_buffer", "extra_repr", "reset_parameters"})
_TENSOR_METHODS_OK = frozenset({
    "size", "stride", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr", "storage_offset",
    "untyped_storage", "is_contiguous", "is_floating_point", "is_complex", "is_signed", "get_device", "is_pinned",
    "is_shared", "type", "to", "cuda", "cpu", "float", "half", "bfloat16", "double", "int", "long", "short", "bool",
    "byte", "char", "contiguous", "clone", "detach", "detach_", "copy_", "fill_", "zero_", "new_empty",
    "new_empty_strided", "new_zeros", "new_ones", "new_full", "new_tensor", "view", "view_as", "reshape", "reshape_as",
    "expand", "expand_as", "permute", "transpose", "t", "flatten", "unflatten", "unsqueeze", "squeeze", "narrow",
    "select", "split", "chunk", "unbind", "movedim", "as_strided", "as_subclass", "item", "tolist", "numpy",
    "requires_grad_", "record_stream", "pin_memory", "share_memory_", "retain_grad", "dim_order",
    "uniform_", "normal_", "random_",   # weights' initial values
    "__init__", "__len__", "__repr__", "__str__", "__format__", "__hash__", "__bool__", "__index__", "__int__",
    "__float__", "__getitem__", "__setitem__", "__iter__", "__contains__", "__class__", "__new__", "__sizeof__",
    "__deepcopy__", "__dir__", "__getstate__", "__setstate__", "__array__", "__dlpack__", "__dlpack_device__",
    "__long__", "__nonzero__", "__complex__", "__subclasshook__"})
# what a tensor method gives back: the description methods give plain values, the rest tensors
_TENSOR_PLAIN_RESULTS = frozenset({
    "size", "stride", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr", "storage_offset",
    "is_contiguous", "is_floating_point", "is_complex", "is_signed", "get_device", "is_pinned", "is_shared", "item",
    "tolist", "untyped_storage", "dim_order"})
_TENSOR_PLAIN_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout", "requires_grad",
                                 "itemsize", "nbytes", "names", "is_leaf", "is_sparse", "is_quantized", "is_meta",
                                 "_version"})
# builtins whose result is a plain value whatever they are given (type(x) is not: type(x).softmax is torch's)
_PLAIN_BUILTINS = frozenset({
    "len", "int", "float", "bool", "str", "dict", "range", "isinstance", "issubclass", "hasattr", "repr", "format",
    "print", "id", "hash", "callable", "divmod", "round", "min", "max", "sum", "abs", "all", "any", "ord", "chr", "hex",
    "bin", "object", "super", "slice", "property", "staticmethod", "classmethod", "open"})
_CONTAINER_BUILTINS = frozenset({"list", "tuple", "set", "frozenset", "sorted", "reversed", "iter", "enumerate", "zip",
                                 "filter", "next"})
_REDUCING_BUILTINS = frozenset({"sum", "max", "min", "abs", "pow", "round", "divmod", "sorted", "map", "filter"})
_DEFAULT_BINDINGS = {"torch": ("torch", "torch"), "F": ("torch", "torch.nn.functional"), "nn": ("torch", "torch.nn"),
                     "tl": ("mod", "triton.language"), "triton": ("mod", "triton")}

PLAIN, UNKNOWN, TENSOR = ("plain",), ("unknown",), ("tensor",)
_SAFE_TAGS = frozenset({"plain", "own", "ownclass", "ownfunc", "kernel", "mod", "ext", "builtin"})


class _Finding(Exception):
    def __init__(self, check: str, node: ast.AST, what: str):
        super().__init__(what)
        self.check, self.node, self.what = check, node, what
        self.lineno = getattr(node, "lineno", 0)


def _torch_object(path: str):
    """The object at `path` in the real torch module, or a sentinel when it does not resolve."""
    import importlib

    parts = path.split(".")
    try:
        obj = importlib.import_module("torch")
        for p in parts[1:]:
            obj = getattr(obj, p)
        return obj
    except Exception:   # noqa: BLE001 - a path that does not resolve is treated as compute
        return _MISSING


_MISSING = object()
_CLASSIFIED: dict[str, str] = {}


def _classify(path: str) -> str:
    """What a path in torch is: module | class-ok | nn-holder | nn-compute | class-bad | value | func-ok | compute |
    override | tensor-method-ok | free."""
    if path in _CLASSIFIED:
        return _CLASSIFIED[path]
    import types

    import torch

    if path.startswith(_OVERRIDE_NAMESPACES) or path.rsplit(".", 1)[-1] in _OVERRIDE_ATTRS:
        out = "override"
    elif path == "torch" or any(path == ns or path.startswith(ns + ".") for ns in _TORCH_FREE):
        out = "module" if isinstance(_torch_object(path), types.ModuleType) else "free"
    elif path == "torch.cuda":
        out = "module"
    elif path.startswith("torch.cuda."):
        first = path.split(".")[2]
        out = "free" if first in _TORCH_CUDA_OK else "compute"
    elif path.startswith("torch.Tensor."):
        out = "tensor-method-ok" if path[len("torch.Tensor."):] in _TENSOR_METHODS_OK else "compute"
    else:
        obj = _torch_object(path)
        name = path.rsplit(".", 1)[-1]
        if obj is _MISSING:
            out = "compute"
        elif isinstance(obj, types.ModuleType):
            out = "module"
        elif isinstance(obj, type):
            if issubclass(obj, torch.nn.Module) and not issubclass(obj, torch.Tensor):
                out = "nn-holder" if name in _NN_HOLDERS and obj.__module__.startswith("torch.nn") else "nn-compute"
            elif path in _TORCH_CLASSES_OK:
                out = "class-ok"
            else:
                out = "class-bad"
        elif isinstance(obj, (torch.dtype, torch.device, torch.layout, torch.memory_format, bool, int, float, str,
                              type(None))):
            out = "value"
        elif callable(obj):
            out = "func-ok" if name in _TORCH_FUNCS_OK and path.count(".") == 1 else "compute"
        else:
            out = "value"
    _CLASSIFIED[path] = out
    return out


def _tensor_compute_names() -> frozenset:
    import torch

    return frozenset(n for n in dir(torch.Tensor) if n not in _TENSOR_METHODS_OK
                     and callable(getattr(torch.Tensor, n, None)) and not n.startswith("_")
                     or n in ("__matmul__", "__rmatmul__", "__pow__", "__rpow__", "__add__", "__mul__", "__sub__",
                              "__truediv__", "__abs__", "__neg__", "__lt__", "__gt__", "__le__", "__ge__", "__eq__",
                              "__ne__", "__torch_function__", "__torch_dispatch__"))


_TENSOR_COMPUTE: frozenset | None = None
_NN_COMPUTE: frozenset | None = None


def _nn_compute_methods() -> frozenset:
    """Method names that compute on some weight-holding torch.nn class (forward, __call__, ...)."""
    global _NN_COMPUTE
    if _NN_COMPUTE is None:
        import torch

        names = set()
        for holder in _NN_HOLDERS:
            cls = getattr(torch.nn, holder, None)
            if isinstance(cls, type):
                names |= {n for n in dir(cls) if callable(getattr(cls, n, None))}
        _NN_COMPUTE = frozenset(names - _NN_METHODS_OK - _TENSOR_METHODS_OK - {
            "__class__", "__init_subclass__", "__subclasshook__", "__new__", "__eq__", "__ne__", "__lt__", "__le__",
            "__gt__", "__ge__", "__hash__", "__repr__", "__str__", "__format__", "__sizeof__", "__reduce__",
            "__reduce_ex__", "__dir__", "__getstate__", "__setstate__", "__delattr__", "__setattr__",
            "__getattribute__", "__getattr__", "reset_parameters"})
    return _NN_COMPUTE


class _Scope:
    """The names bound in a module, a class body or a function: name -> the bindings of it (how each is worked
    out: an expression, an import, a parameter, a loop over something)."""

    def __init__(self, node: ast.AST, parent: "_Scope | None", cls: str | None = None, qual: str = ""):
        self.node, self.parent, self.cls, self.qual = node, parent, cls, qual
        self.bindings: dict[str, list] = {}
        self.global_names: set[str] = set()
        self.class_scope = False              # a class body: its names are not seen from its methods
        self.self_name: str | None = None     # a method's first parameter (self), bound to its class's instance
        self.owner_cls: str | None = None     # the class a method belongs to

    def bind(self, name: str, binding: tuple) -> None:
        target = self
        if name in self.global_names:
            while target.parent is not None:
                target = target.parent
        target.bindings.setdefault(name, []).append(binding)


class _Scan:
    """One pass to collect bindings, one to check the host code's nodes."""

    def __init__(self, tree: ast.Module, allow: "_Allowance | None" = None):
        global _TENSOR_COMPUTE
        if _TENSOR_COMPUTE is None:
            _TENSOR_COMPUTE = _tensor_compute_names()
        self.tree = tree
        self.allow = allow or _Allowance(())
        self.parent: dict[int, ast.AST] = {}
        self.scope_of: dict[int, _Scope] = {}      # id(node) -> the scope its names are looked up in
        self.classes: dict[str, ast.ClassDef] = {}
        self.class_attrs: dict[str, dict[str, list]] = {}
        self.methods: dict[str, set[str]] = {}
        self.functions: dict[str, tuple[ast.AST, _Scope]] = {}   # qualname -> (def, its scope)
        self.kernels: set[int] = set()
        self.call_args: dict[str, list] = {}     # qualname -> [(call, scope, offset)]
        self.memo: dict[tuple, frozenset] = {}
        self.busy: set = set()
        self.module = _Scope(tree, None)
        self.nodes = list(ast.walk(tree))
        for node in self.nodes:
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
        self.returns: dict[str, frozenset] = {}
        self._collect(tree.body, self.module)

    # -- binding collection -----------------------------------------------------------------------------------
    def _collect(self, stmts, scope: _Scope) -> None:
        for st in stmts:
            self._collect_stmt(st, scope)

    def _mark(self, node: ast.AST, scope: _Scope) -> None:
        for sub in _shallow(node):
            self.scope_of.setdefault(id(sub), scope)

    def _collect_stmt(self, st: ast.stmt, scope: _Scope) -> None:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in st.decorator_list:
                self._mark(dec, scope)
            for d in st.args.defaults + st.args.kw_defaults:
                if d is not None:
                    self._mark(d, scope)
            self._mark_annotations(st, scope)
            qual = f"{scope.cls}.{st.name}" if scope.cls else (f"{scope.qual}.{st.name}" if scope.qual else st.name)
            if self._is_kernel(st, scope):
                self.kernels.add(id(st))
                scope.bind(st.name, ("kind", ("kernel",)))
                return
            if scope.cls is not None:
                self.methods.setdefault(scope.cls, set()).add(st.name)
                self.class_attrs.setdefault(scope.cls, {})
            else:
                scope.bind(st.name, ("kind", ("ownfunc", qual)))
            inner = _Scope(st, scope if scope.cls is None else self._enclosing(scope), None, qual)
            self.functions[qual] = (st, inner)
            args = st.args.posonlyargs + st.args.args
            decos = {ast.unparse(d) for d in st.decorator_list}
            for i, a in enumerate(args):
                if i == 0 and scope.cls is not None and "staticmethod" not in decos:
                    kind = ("ownclass", scope.cls) if "classmethod" in decos else ("own", scope.cls)
                    inner.bind(a.arg, ("kind", kind))
                    inner.self_name = a.arg
                else:
                    inner.bind(a.arg, ("param", qual, i, a.arg))
            for a in st.args.kwonlyargs:
                inner.bind(a.arg, ("param", qual, None, a.arg))
            for a in (st.args.vararg, st.args.kwarg):
                if a is not None:
                    inner.bind(a.arg, ("kind", UNKNOWN))
            inner.owner_cls = scope.cls
            self._collect(st.body, inner)
            return
        if isinstance(st, ast.ClassDef):
            for sub in st.bases + st.keywords + st.decorator_list:
                self._mark(sub, scope)
            self.classes[st.name] = st
            self.class_attrs.setdefault(st.name, {})
            self.methods.setdefault(st.name, set())
            scope.bind(st.name, ("kind", ("ownclass", st.name)))
            body = _Scope(st, scope, st.name, st.name)
            body.class_scope = True
            self._collect(st.body, body)
            for name, bs in body.bindings.items():
                self.class_attrs[st.name].setdefault(name, []).extend(bs)
            return
        self._mark(st, scope)
        if isinstance(st, ast.Global):
            scope.global_names.update(st.names)
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            for alias in st.names:
                scope.bind((alias.asname or alias.name).split(".")[0], ("import", st, alias))
        elif isinstance(st, ast.Assign):
            for t in st.targets:
                self._bind_target(t, ("expr", st.value, scope), scope)
        elif isinstance(st, ast.AnnAssign) and st.value is not None:
            self._bind_target(st.target, ("expr", st.value, scope), scope)
        elif isinstance(st, ast.AugAssign):
            self._bind_target(st.target, ("augexpr", st, scope), scope)
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            self._bind_target(st.target, ("iter", st.iter, scope), scope)
        elif isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, ("kind", UNKNOWN), scope)
        elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
            for h in st.handlers:
                if h.name:
                    scope.bind(h.name, ("kind", PLAIN))
        for sub in _shallow(st):
            if isinstance(sub, ast.NamedExpr):
                self._bind_target(sub.target, ("expr", sub.value, scope), scope)
            elif isinstance(sub, ast.comprehension):
                self._bind_target(sub.target, ("iter", sub.iter, scope), scope)
            elif isinstance(sub, ast.Lambda):
                for a in sub.args.args:
                    scope.bind(a.arg, ("kind", UNKNOWN))
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                self._collect(inner, scope)
        for h in getattr(st, "handlers", []) or []:
            self._collect(h.body, scope)
        if isinstance(st, ast.Match):
            for case in st.cases:
                self._collect(case.body, scope)

    def _mark_annotations(self, fn, scope):
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
            if a.annotation is not None:
                self._mark(a.annotation, scope)
        if fn.returns is not None:
            self._mark(fn.returns, scope)

    def _enclosing(self, scope: _Scope) -> _Scope:
        while scope.class_scope:
            scope = scope.parent
        return scope

    def _bind_target(self, t: ast.AST, binding: tuple, scope: _Scope) -> None:
        if isinstance(t, ast.Name):
            scope.bind(t.id, binding)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for i, elt in enumerate(t.elts):
                self._bind_target(elt, ("unpack", binding, i), scope)
        elif isinstance(t, ast.Starred):
            self._bind_target(t.value, ("unpack", binding, None), scope)
        elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
            cls = self._self_class(t.value.id, scope)
            if cls is not None:
                self.class_attrs.setdefault(cls, {}).setdefault(t.attr, []).append(binding)

    def _self_class(self, name: str, scope: _Scope) -> str | None:
        s = scope
        while s is not None:
            if s.self_name == name:
                return s.owner_cls
            if name in s.bindings:
                return None
            s = s.parent
        return None

    def _is_kernel(self, fn, scope: _Scope) -> bool:
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            for k in self.kinds(target, scope):
                if k[0] == "mod" and k[1].startswith("triton") and k[1].rsplit(".", 1)[-1] in _KERNEL_DECORATORS:
                    return True
        return False

    # -- kinds ------------------------------------------------------------------------------------------------
    def lookup(self, name: str, scope: _Scope) -> frozenset:
        s = scope
        while s is not None:
            if name in s.bindings and not s.class_scope:
                out: set = set()
                for b in s.bindings[name]:
                    out |= self._binding_kinds(b)
                return frozenset(out)
            s = s.parent
        if name in _DEFAULT_BINDINGS:
            return frozenset({_DEFAULT_BINDINGS[name]})
        import builtins

        if hasattr(builtins, name):
            return frozenset({("builtin", name)})
        return frozenset({UNKNOWN})

    def _binding_kinds(self, b: tuple) -> frozenset:
        key = ("b", id(b))
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:
            return frozenset({UNKNOWN})
        self.busy.add(key)
        try:
            out = self._binding_kinds_uncached(b)
        finally:
            self.busy.discard(key)
        self.memo[key] = out
        return out

    def _binding_kinds_uncached(self, b: tuple) -> frozenset:
        tag = b[0]
        if tag == "kind":
            return frozenset({b[1]})
        if tag == "expr":
            return self.kinds(b[1], b[2])
        if tag == "augexpr":
            st, scope = b[1], b[2]
            return self._binop_kinds(self.kinds(st.target, scope), self.kinds(st.value, scope))
        if tag == "iter":
            return self._element_kinds(self.kinds(b[1], b[2]))
        if tag == "unpack":
            inner, idx = b[1], b[2]
            if inner[0] == "expr" and isinstance(inner[1], (ast.Tuple, ast.List)) and idx is not None \
                    and idx < len(inner[1].elts) and not any(isinstance(e, ast.Starred) for e in inner[1].elts):
                return self.kinds(inner[1].elts[idx], inner[2])
            return self._element_kinds(self._binding_kinds(inner))
        if tag == "import":
            st, alias = b[1], b[2]
            if isinstance(st, ast.Import):
                path = alias.name if alias.asname else alias.name.split(".")[0]
            elif st.level:
                return frozenset({UNKNOWN})
            else:
                path = f"{st.module}.{alias.name}"
            return frozenset({("torch" if path.split(".")[0] == "torch" else "mod", path)})
        if tag == "param":
            return self._param_kinds(b[1], b[2], b[3])
        return frozenset({UNKNOWN})

    def _param_kinds(self, qual: str, index: int | None, name: str) -> frozenset:
        fn, _ = self.functions[qual]
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
        for qual in self.functions:
            self.call_args.setdefault(qual, [])
        for node in self.nodes:
            if isinstance(node, ast.Call):
                scope = self.scope_of.get(id(node))
                if scope is None:
                    continue
                for k in self.kinds(node.func, scope):
                    if k[0] == "ownfunc" and k[1] in self.functions:
                        offset = 1 if isinstance(node.func, ast.Attribute) and "." in k[1] and \
                            k[1].split(".")[0] in self.classes else 0
                        self.call_args[k[1]].append((node, scope, offset))
                    elif k[0] == "ownclass" and f"{k[1]}.__init__" in self.functions:
                        self.call_args[f"{k[1]}.__init__"].append((node, scope, 1))

    def kinds(self, node: ast.AST, scope: _Scope) -> frozenset:
        key = ("n", id(node))
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:
            return frozenset({UNKNOWN})
        self.busy.add(key)
        try:
            out = self._kinds(node, scope)
        finally:
            self.busy.discard(key)
        self.memo[key] = out
        return out

    def _kinds(self, node: ast.AST, scope: _Scope) -> frozenset:
        if isinstance(node, ast.Name):
            return self.lookup(node.id, scope)
        if isinstance(node, ast.Attribute):
            return self._attr_kinds(self.kinds(node.value, scope), node.attr)
        if isinstance(node, ast.Call):
            return self._call_kinds(node, scope)
        if isinstance(node, (ast.Constant, ast.JoinedStr)):
            return frozenset({PLAIN})
        if isinstance(node, ast.Dict):
            inner = frozenset().union(*(self.kinds(v, scope) for v in node.values)) if node.values else frozenset()
            return frozenset({("seq", inner or frozenset({PLAIN}))})
        if isinstance(node, ast.DictComp):
            return frozenset({("seq", self.kinds(node.value, scope))})
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            inner = frozenset().union(*(self.kinds(e.value if isinstance(e, ast.Starred) else e, scope)
                                        for e in node.elts)) if node.elts else frozenset({PLAIN})
            return frozenset({("seq", inner)})
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return frozenset({("seq", self.kinds(node.elt, scope))})
        if isinstance(node, ast.Lambda):
            return frozenset({("ownfunc", "<lambda>")})
        if isinstance(node, ast.IfExp):
            return self.kinds(node.body, scope) | self.kinds(node.orelse, scope)
        if isinstance(node, ast.BoolOp):
            return frozenset().union(*(self.kinds(v, scope) for v in node.values))
        if isinstance(node, ast.NamedExpr):
            return self.kinds(node.value, scope)
        if isinstance(node, ast.Subscript):
            base = self.kinds(node.value, scope)
            out = set()
            for k in base:
                if k == TENSOR or k[0] in ("tattr", "unknown"):
                    out.add(TENSOR if k == TENSOR else UNKNOWN)
                elif k[0] == "seq":
                    out |= k[1]
                elif k[0] == "tobj" and _classify(k[1]) == "nn-holder":
                    out.add(("tobj", "torch.nn.Module"))
                elif k[0] == "plain":
                    out.add(PLAIN)
                elif k[0] == "kernel":
                    out.add(("kernel",))
                else:
                    out.add(UNKNOWN)
            return frozenset(out or {UNKNOWN})
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
    def _binop_kinds(a: frozenset, b: frozenset) -> frozenset:
        both = a | b
        if any(k == TENSOR or k[0] == "tattr" for k in both):
            return frozenset({TENSOR})
        if all(k[0] in ("plain", "mod", "builtin") for k in both):
            return frozenset({PLAIN})
        if any(k[0] == "seq" for k in both) and all(k[0] in ("seq", "plain") for k in both):
            return frozenset({("seq", frozenset().union(*(k[1] for k in both if k[0] == "seq")))})
        return frozenset({UNKNOWN})

    def _element_kinds(self, kinds: frozenset) -> frozenset:
        out: set = set()
        for k in kinds:
            if k[0] == "seq":
                out |= k[1]
            elif k[0] == "tobj" and _classify(k[1]) == "nn-holder":
                out.add(("tobj", "torch.nn.Module"))
            elif k == TENSOR or k[0] == "tattr":
                out.add(TENSOR)
            elif k[0] == "plain":
                out.add(PLAIN)
            else:
                out.add(UNKNOWN)
        return frozenset(out or {UNKNOWN})

    def _attr_kinds(self, base: frozenset, attr: str) -> frozenset:
        out: set = set()
        for k in base:
            tag = k[0]
            if tag == "torch":
                out.add(("torch", f"{k[1]}.{attr}"))
            elif tag == "mod":
                out.add(("mod", f"{k[1]}.{attr}"))
            elif tag == "tobj":
                out.add(("tattr", k[1], attr))
            elif tag in ("own", "ownclass"):
                out |= self._own_attr(k[1], attr)
            elif tag in ("ext", "kernel", "ownfunc", "builtin"):
                out.add(k if tag == "ext" else PLAIN)
            elif tag == "plain":
                out.add(PLAIN)
            elif attr in _TENSOR_PLAIN_ATTRS:
                out.add(PLAIN)
            elif attr in ("T", "mT", "H", "mH", "data", "real", "imag", "grad"):
                out.add(TENSOR)
            else:
                out.add(UNKNOWN)
        return frozenset(out or {UNKNOWN})

    def _own_attr(self, cls: str, attr: str, seen: frozenset = frozenset()) -> frozenset:
        if cls in seen or cls not in self.classes:
            return frozenset({UNKNOWN})
        if attr in self.methods.get(cls, ()):
            return frozenset({("ownfunc", f"{cls}.{attr}")})
        if attr in self.class_attrs.get(cls, {}):
            out: set = set()
            for b in self.class_attrs[cls][attr]:
                out |= self._binding_kinds(b)
            return frozenset(out)
        out = set()
        scope = self.scope_of.get(id(self.classes[cls].bases[0])) if self.classes[cls].bases else None
        for base in self.classes[cls].bases:
            for k in self.kinds(base, scope or self.module):
                if k[0] == "ownclass":
                    out |= self._own_attr(k[1], attr, seen | {cls})
                elif k[0] == "torch":
                    out.add(("tattr", k[1], attr))
        return frozenset(out or {UNKNOWN})

    def _call_kinds(self, call: ast.Call, scope: _Scope) -> frozenset:
        func = call.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(call.args) >= 2 \
                and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str):
            return self._attr_kinds(self.kinds(call.args[0], scope), call.args[1].value)
        out: set = set()
        for k in self.kinds(func, scope):
            tag = k[0]
            if tag == "torch":
                cls = _classify(k[1])
                if k[1].endswith(("load_inline", "cpp_extension.load")):
                    out.add(("ext",))
                elif cls in ("nn-holder", "nn-compute", "class-ok", "class-bad"):
                    out.add(TENSOR if k[1] in ("torch.nn.Parameter", "torch.nn.Buffer", "torch.Tensor")
                            else ("tobj", k[1]))
                elif cls in ("func-ok", "compute"):
                    out.add(PLAIN if k[1].rsplit(".", 1)[-1] in ("is_tensor", "is_floating_point", "numel",
                                                                 "is_complex", "get_default_dtype") else TENSOR)
                else:
                    out.add(UNKNOWN)
            elif tag == "ownclass":
                out.add(("own", k[1]) if not self._tensorish(k[1]) else TENSOR)
            elif tag == "ownfunc":
                out |= self._returns(k[1])
            elif tag == "builtin":
                if k[1] in _CONTAINER_BUILTINS:   # list(x), zip(a, b), next(it): what the arguments hold
                    elems = frozenset().union(*(self._element_kinds(self.kinds(a.value if isinstance(
                        a, ast.Starred) else a, scope)) for a in call.args)) if call.args else frozenset({PLAIN})
                    out.add(("seq", elems) if k[1] != "next" else UNKNOWN)
                    if k[1] == "next":
                        out |= elems
                elif k[1] in _PLAIN_BUILTINS and k[1] not in _REDUCING_BUILTINS:
                    out.add(PLAIN)
                else:
                    out.add(UNKNOWN)
            elif tag == "tattr":
                attr = k[2]
                if attr in _TENSOR_PLAIN_RESULTS:
                    out.add(PLAIN)
                else:
                    out.add(TENSOR)
            elif tag == "mod":
                out.add(PLAIN if k[1].split(".")[0] in ("math", "os", "triton", "sys", "time") else UNKNOWN)
            elif tag == "tobj" and _classify(k[1]) in ("nn-holder", "nn-compute"):
                out.add(TENSOR)   # a module's forward returns tensors: arithmetic on them is host compute
            else:
                out.add(UNKNOWN)
        if isinstance(func, ast.Attribute):
            recv = self.kinds(func.value, scope)
            if any(k == TENSOR for k in recv):
                out.discard(UNKNOWN)
                out.add(PLAIN if func.attr in _TENSOR_PLAIN_RESULTS else TENSOR)
        return frozenset(out or {UNKNOWN})

    def _tensorish(self, cls: str, seen: frozenset = frozenset()) -> bool:
        """An own class deriving from torch.Tensor: its instances are tensors."""
        node = self.classes.get(cls)
        if node is None or cls in seen:
            return False
        scope = self.scope_of.get(id(node.bases[0])) if node.bases else None
        for base in node.bases:
            for k in self.kinds(base, scope or self.module):
                if k[0] == "torch" and k[1] in ("torch.Tensor", "torch.nn.Parameter"):
                    return True
                if k[0] == "ownclass" and self._tensorish(k[1], seen | {cls}):
                    return True
        return False

    def _returns(self, qual: str) -> frozenset:
        if qual not in self.functions:
            return frozenset({UNKNOWN})
        if qual in self.returns:
            return self.returns[qual]
        self.returns[qual] = frozenset({UNKNOWN})   # while it is being worked out (recursion)
        fn, scope = self.functions[qual]
        out: set = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None and self.scope_of.get(id(node.value)) is scope:
                out |= self.kinds(node.value, scope)
        self.returns[qual] = frozenset(out or {PLAIN})
        return self.returns[qual]

    # -- the checks -------------------------------------------------------------------------------------------
    def host_nodes(self):
        stack = [self.tree]
        while stack:
            node = stack.pop()
            if id(node) in self.kernels:
                for dec in node.decorator_list:
                    stack.append(dec)
                continue
            yield node
            stack.extend(ast.iter_child_nodes(node))

    def findings(self) -> list[_Finding]:
        out = []
        self.host = list(self.host_nodes())
        # a file that instantiates torch.nn modules (to hold weights) may not call what the scan cannot resolve: a
        # module reached through a container or an object the scan does not follow would be called unseen
        self.holds_modules = any(
            isinstance(n, ast.Call) and any(k[0] == "torch" and _classify(k[1]) in ("nn-holder", "nn-compute")
                                            for k in self.kinds(n.func, self.scope_of.get(id(n), self.module)))
            for n in self.host)
        for node in self.host:
            try:
                self._check(node)
            except _Finding as f:
                out.append(f)
        for node in self.nodes:
            if id(node) in self.kernels:
                out.extend(self._check_kernel_body(node))
        return out

    def _check_kernel_body(self, fn) -> list[_Finding]:
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
                    kinds = self.lookup(sub.id, self.module)
                    bad = sorted(k[1] for k in kinds if k[0] == "torch" or (k[0] == "mod" and k[1].split(".")[0] in
                                 _INTROSPECTION_MODULES | _DYNAMIC_MODULES | {"sys", "builtins"}))
                    if bad or sub.id in _DYNAMIC_BUILTINS:
                        out.append(_Finding("torch-compute check", sub, f"the Triton kernel {fn.name} uses "
                                            f"{sub.id} ({(bad or [sub.id])[0]}): a kernel body may use triton and "
                                            "tl only (under the interpreter it would run as Python)"))
        return out

    def _check(self, node: ast.AST) -> None:
        scope = self.scope_of.get(id(node), self.module)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._check_import(node)
        elif isinstance(node, ast.ClassDef):
            self._check_class(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _OVERRIDE_ATTRS:
            raise _Finding("torch-override check", node, f"defines {node.name}, which changes what every torch call "
                           "computes (the reference's and the comparison's included)")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in _OVERRIDE_ATTRS:
                raise _Finding("torch-override check", node, f"uses {node.id}")
            if node.id == "__builtins__":
                raise _Finding("introspection check", node, "uses __builtins__")
            self._check_value(node, self.kinds(node, scope), node.id)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in _OVERRIDE_ATTRS:
            raise _Finding("torch-override check", node, f"binds {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr in _OVERRIDE_ATTRS:
                raise _Finding("torch-override check", node, f"uses {ast.unparse(node)[:60]}")
            if node.attr in _INTROSPECTION_ATTRS:
                raise _Finding("introspection check", node, f"reaches {ast.unparse(node)[:60]} (frames, code objects, "
                               "globals or internals of other objects)")
            if isinstance(node.ctx, ast.Load):
                base = self.kinds(node.value, scope)
                self._check_attr(node, base, node.attr)
                self._check_value(node, self.kinds(node, scope), ast.unparse(node)[:60])
        elif isinstance(node, ast.Call):
            self._check_call(node, scope)
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                if self.allow.matmul_operator():
                    return
                raise _Finding("torch-compute check", node, "computes with a torch op (@ (matmul operator))")
            self._check_arith(node, [node.left, node.right], scope)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.op, ast.MatMult):
                if self.allow.matmul_operator():
                    return
                raise _Finding("torch-compute check", node, "computes with a torch op (@= (matmul operator))")
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
            if root in _INTROSPECTION_MODULES or path in ("sys._getframe", "sys.modules", "sys._current_frames"):
                raise _Finding("introspection check", node, f"imports {path} (frames, the heap or raw memory of the "
                               "process)")
            if root in _DYNAMIC_MODULES or path in ("builtins.eval", "builtins.exec", "builtins.__import__"):
                raise _Finding("dynamic-code check", node, f"imports {path}: code or modules reached through "
                               "strings")
            if root in _FOREIGN_COMPUTE:
                raise _Finding("torch-compute check", node, f"imports {root}: host code computes nothing")
            if root == "operator" and alias.name in ("attrgetter", "methodcaller"):
                raise _Finding("getattr check", node, f"imports operator.{alias.name}")
            if root == "torch" and isinstance(node, ast.ImportFrom):
                if alias.name == "*":
                    raise _Finding("torch-compute check", node, f"imports * from {node.module}: names the scan "
                                   "cannot follow")
                self._check_torch_path(node, path, called=False)
            elif root == "torch":
                cls = _classify(path)
                if cls == "override":
                    raise _Finding("torch-override check", node, f"imports {path}")

    def _check_class(self, node: ast.ClassDef) -> None:
        scope = self.scope_of.get(id(node.bases[0])) if node.bases else self.module
        for base in node.bases:
            for k in self.kinds(base, scope or self.module):
                if k[0] == "torch" and k[1] not in _NN_BASES_OK:
                    check = "torch-override check" if _classify(k[1]) == "override" else "torch-compute check"
                    raise _Finding(check, node, f"class {node.name} subclasses {k[1]} (its methods compute with "
                                   "torch)")
        for kw in node.keywords:
            if kw.arg == "metaclass":
                raise _Finding("introspection check", node, f"class {node.name} sets a metaclass")

    def _check_torch_path(self, node: ast.AST, path: str, *, called: bool) -> None:
        cls = _classify(path)
        verb = "calls" if called else "refers to"
        if cls == "override":
            raise _Finding("torch-override check", node, f"{verb} {path}, which changes what torch calls compute")
        if cls == "compute" and not self.allow.path(path):
            raise _Finding("torch-compute check", node, f"{verb} a torch op ({path}) outside the candidate's own "
                           "kernels; host code may only allocate and reshape")
        if cls == "nn-compute":
            what = "instantiates" if called else "refers to"
            raise _Finding("torch-compute check", node, f"{what} {path}, a torch module that computes and holds no "
                           "weights")
        if cls == "class-bad":
            raise _Finding("torch-compute check", node, f"{verb} {path}, a torch class host code has no use for")

    def _check_value(self, node: ast.AST, kinds: frozenset, text: str) -> None:
        """A Name or Attribute in host code: what it resolves to may be used, held or called?"""
        parent = self.parent.get(id(node))
        called = isinstance(parent, ast.Call) and parent.func is node
        through = isinstance(parent, ast.Attribute) and parent.value is node
        for k in kinds:
            if k[0] == "torch":
                if isinstance(node, ast.Name) and k[1] in ("torch", "torch.nn", "torch.nn.functional") and through:
                    continue
                cls = _classify(k[1])
                if cls == "module":
                    if not through and not self._dtype_lookup(parent, node):
                        raise _Finding("torch-compute check", node, f"uses the module {k[1]} as a value "
                                       f"({text}); only its attributes may be used")
                    continue
                self._check_torch_path(node, k[1], called=called)
            elif k[0] == "tobj" and called:
                if _classify(k[1]) in ("nn-holder", "nn-compute") and not self.allow.module(k[1]):
                    raise _Finding("torch-compute check", node, f"calls {text}, a {k[1]} module: its forward is torch "
                                   "compute (its weights may be given to a kernel)")
            elif k[0] == "mod":
                self._check_mod_path(node, k[1])
            elif k[0] == "builtin" and k[1] in _DYNAMIC_BUILTINS:
                raise _Finding("dynamic-code check", node, f"uses {k[1]}: code reached through strings")

    def _check_mod_path(self, node: ast.AST, path: str) -> None:
        parts = path.split(".")
        if parts[0] == "sys" and len(parts) > 1:
            if parts[1] == "modules":
                raise _Finding("dynamic-code check", node, "uses sys.modules: modules reached through strings")
            if parts[1] not in _SYS_ALLOWED:
                raise _Finding("introspection check", node, f"uses {path} (frames, trace hooks or the interpreter's "
                               "internals)")
        if parts[0] == "builtins" and len(parts) > 1 and parts[1] in _DYNAMIC_BUILTINS | {"getattr"}:
            raise _Finding("dynamic-code check", node, f"uses {path}")
        if parts[0] == "operator" and len(parts) > 1 and parts[1] in ("attrgetter", "methodcaller"):
            raise _Finding("getattr check", node, f"uses {path}: an attribute named by a string")

    def _check_attr(self, node: ast.Attribute, base: frozenset, attr: str) -> None:
        """`base.attr` with base of these kinds: a tensor op on something that may be a tensor, or a torch object's
        method that computes."""
        for k in base:
            tag = k[0]
            if tag in ("tensor", "unknown"):
                if attr in _TENSOR_COMPUTE and not self.allow.method(attr):
                    raise _Finding("torch-compute check", node, f"computes with a torch op ({ast.unparse(node)[:60]}) "
                                   "outside the candidate's own kernels; host code may only allocate and reshape")
            elif tag == "tattr":
                self._check_tobj_attr(node, k[1], k[2], attr)
            elif tag == "tobj":
                self._check_tobj_attr(node, k[1], None, attr)
            elif tag == "own" and self._tensorish(k[1]) and attr in _TENSOR_COMPUTE and not self.allow.method(attr):
                raise _Finding("torch-compute check", node, f"computes with a torch op ({ast.unparse(node)[:60]}) "
                               "on a tensor subclass")

    def _check_tobj_attr(self, node, cls_path: str, first: str | None, attr: str) -> None:
        """An attribute of an instance of a torch class (`first` is set when the instance is itself an attribute
        of one: self.lin.weight.sum -> tattr(Linear, weight) then .sum)."""
        if first is not None:   # an attribute of an attribute: a weight, a buffer, a config value
            if attr in _TENSOR_COMPUTE and not self.allow.method(attr):
                raise _Finding("torch-compute check", node, f"computes with a torch op ({ast.unparse(node)[:60]})")
            return
        kind = _classify(cls_path)
        obj = _torch_object(cls_path)
        member = getattr(obj, attr, None) if obj is not _MISSING else None
        if kind in ("nn-holder", "nn-compute"):
            if attr.startswith("_") and not attr.startswith("__"):
                raise _Finding("torch-compute check", node, f"reaches {ast.unparse(node)[:60]}, an internal of a "
                               "torch module")
            if callable(member) and attr not in _NN_METHODS_OK and not (
                    attr in ("forward", "__call__") and self.allow.module(cls_path)):
                raise _Finding("torch-compute check", node, f"uses {ast.unparse(node)[:60]}, a method of a torch "
                               "module that computes")
        elif kind == "class-ok" and any(cls_path.startswith(p) for p in ("torch.Tensor", "torch.nn.Parameter")):
            if attr in _TENSOR_COMPUTE and not self.allow.method(attr):
                raise _Finding("torch-compute check", node, f"computes with a torch op ({ast.unparse(node)[:60]})")

    def _check_call(self, node: ast.Call, scope: _Scope) -> None:
        func = node.func
        fk = self.kinds(func, scope)
        if any(k in (("builtin", "setattr"), ("builtin", "delattr")) for k in fk) and len(node.args) >= 2:
            name = node.args[1]
            base = self.kinds(node.args[0], scope)
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)) and \
                    not all(k[0] in ("plain", "own", "ownclass") for k in base):
                raise _Finding("getattr check", node, f"{ast.unparse(node)[:60]}: an attribute named at run time "
                               "on an object that is not the candidate's own")
        resolved = ("kernel", "own", "ownclass", "ownfunc", "builtin", "mod", "ext", "torch", "tobj")
        recv = self.kinds(func.value, scope) if isinstance(func, ast.Attribute) else frozenset()
        if self.holds_modules and not all(k[0] in resolved for k in fk) and not self._allowed_forward(func, recv) and (
                not isinstance(func, ast.Attribute)
                or (func.attr in _nn_compute_methods() and not all(k[0] in ("mod", "ext", "torch") for k in recv))
                or (recv and all(k[0] in ("own", "ownclass") for k in recv))):
            raise _Finding("torch-compute check", node, f"calls {ast.unparse(func)[:60]}, which the scan cannot "
                           "resolve, in a file that holds torch modules (a module's forward is torch compute)")
        if any(k == ("builtin", "getattr") for k in fk) and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                base = self.kinds(node.args[0], scope)
                synthetic = ast.Attribute(value=node.args[0], attr=name.value, ctx=ast.Load())
                ast.copy_location(synthetic, node)
                self.parent[id(synthetic)] = self.parent.get(id(node))
                if name.value in _INTROSPECTION_ATTRS:
                    raise _Finding("introspection check", node, f"reaches {name.value} through getattr")
                self._check_attr(synthetic, base, name.value)
                self._check_value(node, self._attr_kinds(base, name.value), ast.unparse(node)[:60])
            else:
                base = self.kinds(node.args[0], scope)
                if base == frozenset({("torch", "torch")}) and self._dtype_only(node, scope):
                    return
                if not all(k[0] in ("plain", "own", "ownclass", "ext") for k in base):
                    raise _Finding("getattr check", node, f"{ast.unparse(node)[:60]}: an attribute named at run time "
                                   "on an object that is not the candidate's own")
        for k in fk:
            if k[0] == "tobj" and _classify(k[1]) in ("nn-holder", "nn-compute") and not self.allow.module(k[1]):
                raise _Finding("torch-compute check", node, f"calls {ast.unparse(func)[:60]}, a {k[1]} module: its "
                               "forward is torch compute (its weights may be given to a kernel)")
            if k[0] == "builtin" and k[1] in _REDUCING_BUILTINS:
                for arg in node.args:
                    ak = self.kinds(arg, scope)
                    if any(a == TENSOR or a[0] == "tattr" or (a[0] == "seq" and any(
                            b == TENSOR or b[0] == "tattr" for b in a[1])) for a in ak):
                        raise _Finding("torch-compute check", node, f"computes with a torch op ({k[1]}() of "
                                       "tensors) outside the candidate's own kernels")

    def _allowed_forward(self, func: ast.AST, recv: frozenset) -> bool:
        """`self.lin.forward(x)` on instances of an allowed nn class only."""
        return isinstance(func, ast.Attribute) and func.attr in ("forward", "__call__") and bool(recv) and all(
            k[0] == "tobj" and self.allow.module(k[1]) for k in recv)

    def _check_arith(self, node: ast.AST, operands: list, scope: _Scope) -> None:
        for op in operands:
            if any(k == TENSOR or k[0] == "tattr" for k in self.kinds(op, scope)):
                raise _Finding("torch-compute check", node, f"computes with a torch op (tensor arithmetic: "
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

    def _dtype_only(self, node: ast.Call, scope: _Scope) -> bool:
        """getattr(torch, name) used only as a dtype: directly (`dtype=getattr(torch, name)`), or bound to a name
        (`dt = getattr(torch, name)`) every use of which in its scope is a dtype position."""
        parent = self.parent.get(id(node))
        if self._dtype_lookup(parent, node):
            return True
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0], ast.Name)):
            return False
        name = parent.targets[0].id
        uses = [n for n in ast.walk(scope.node) if isinstance(n, ast.Name) and n.id == name
                and isinstance(n.ctx, ast.Load) and self.scope_of.get(id(n)) is scope]
        return all(self._dtype_lookup(self.parent.get(id(n)), n) for n in uses)

    def except_handlers(self):
        for node in self.host:
            if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                yield from node.handlers


def _shallow(node: ast.AST):
    """The nodes of one statement's own expressions: ast.walk that does not enter nested statements (each is
    collected on its own, in its own scope when it is a function or a class)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(child, ast.stmt):
                stack.append(child)


def _inside(node: ast.AST, outer: ast.AST) -> bool:
    end = getattr(outer, "end_lineno", outer.lineno)
    return outer.lineno <= getattr(node, "lineno", -1) <= end


def scan_source(source: str, language: str | None = "triton", allow=()) -> dict:
    """Static anti-cheat scan of the host code (the rules above), for Triton and CUDA C++ candidates alike (a
    load_inline extension's functions are the candidate's own; `language` is kept for callers). `allow` names the
    torch operations the config allows (ALLOWABLE_TORCH; none by default). Raises CandidateFailure(rejected) naming
    the check and the line; returns notes for the result's detail: `torch_ops`, the allowed operations the host code
    calls (sorted; empty when none), and low-precision casts, for the precision check."""
    tree = ast.parse(source)
    allowance = _Allowance(allow)
    scan = _Scan(tree, allowance)
    found = sorted(scan.findings(), key=lambda f: f.lineno)
    for handler in scan.except_handlers():
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
        f = min(found, key=lambda f: (_PRIORITY.index(f.check), f.lineno))
        why = f"{f.check}: line {f.lineno} {f.what}"
        if f.check == "torch-compute check" and allowance.names:
            why += f" (this problem allows only: {', '.join(allowance.names)})"
        raise CandidateFailure(Status.rejected, why, stage="static")
    notes: dict = {"torch_ops": sorted(allowance.used, key=list(ALLOWABLE_TORCH).index)}
    casts = set()
    for node in scan.nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("half", "bfloat16"):
                casts.add(ast.unparse(node)[:60])
            elif node.func.attr in ("to", "cast", "astype") and any(
                    w in ast.unparse(a) for a in node.args for w in LOW_PRECISION):
                casts.add(ast.unparse(node)[:60])
    if casts:
        notes["low_precision_casts"] = sorted(casts)
    return notes


# the most specific reason first: what makes the rest of the file unreadable to a scan, then torch compute
_PRIORITY = ["torch-override check", "introspection check", "dynamic-code check", "getattr check",
             "torch-compute check"]
LOW_PRECISION = ("float16", "half", "bfloat16", "float8", "tf32", "allow_tf32")
