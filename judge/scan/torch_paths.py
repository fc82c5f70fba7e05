"""What a path in torch is (`classify`): a module, a class a candidate may use or not, an nn module that holds
weights or one that only computes, a function that allocates or one that computes; and the names of torch.Tensor's
and torch.nn's methods that compute. Paths are resolved against the real torch module, imported when first needed.
"""
from __future__ import annotations

import functools
import types

# what changes every torch call computes (the torch-override check): the hooks and the namespaces that set them
OVERRIDE_ATTRS = frozenset({"__torch_function__", "__torch_dispatch__"})
OVERRIDE_NAMESPACES = ("torch.overrides", "torch.utils._python_dispatch", "torch.library", "torch._C._set_torch_",
                       "torch._C._push_on_torch", "torch._C.DisableTorchFunction")
# namespaces of torch whose every member is allowed: backend flags (a change of TF32 is caught at run time),
# version, weight init, the CUDA C++ extension loader; and what host code needs of torch.cuda (devices, streams,
# events, memory), not the rest of it (torch.cuda.comm reduces, torch.cuda.nccl too)
TORCH_FREE = ("torch.backends", "torch.version", "torch.nn.init", "torch.utils.cpp_extension", "torch.types")
TORCH_CUDA_OK = frozenset({
    "Stream", "stream", "Event", "synchronize", "current_device", "device_count", "get_device_properties",
    "get_device_name", "get_device_capability", "current_stream", "default_stream", "set_stream", "set_device",
    "device", "is_available", "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "mem_get_info", "reset_peak_memory_stats", "manual_seed", "manual_seed_all", "get_arch_list", "is_bf16_supported",
    "is_initialized", "init", "OutOfMemoryError"})
TORCH_FUNCS_OK = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "tensor",
    "as_tensor", "as_strided", "arange", "is_tensor", "is_floating_point", "is_complex", "numel", "get_default_dtype",
    "promote_types", "result_type", "can_cast", "is_grad_enabled", "manual_seed", "seed", "initial_seed",
    "randn", "rand", "randint", "randn_like", "rand_like", "randint_like", "randperm",   # weights' initial values
    "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "t", "narrow", "select", "split", "chunk",
    "unbind", "movedim", "broadcast_to"})
TORCH_CLASSES_OK = frozenset({
    "torch.Tensor", "torch.Size", "torch.Generator", "torch.device", "torch.dtype", "torch.finfo", "torch.iinfo",
    "torch.layout", "torch.memory_format", "torch.no_grad", "torch.enable_grad", "torch.inference_mode",
    "torch.set_grad_enabled", "torch.autocast", "torch.Stream", "torch.Event", "torch.autograd.Function",
    "torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer"})
# torch.nn classes a candidate may instantiate: containers and the modules that hold weights (their weights may be
# handed to a kernel; calling the module is rejected). Any other nn.Module class computes and holds nothing.
NN_HOLDERS = frozenset({
    "Module", "ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict", "Identity",
    "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "Embedding", "EmbeddingBag", "LayerNorm", "RMSNorm",
    "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "MultiheadAttention", "PReLU", "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell"})
# the torch classes a candidate's own class may subclass
NN_BASES_OK = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "torch.autograd.Function",
                         "torch.autograd.function.Function", "torch.Tensor", "torch.nn.Parameter"})
# the methods of a torch.nn module that compute nothing (moving, listing and loading its weights)
NN_METHODS_OK = frozenset({
    "__init__", "parameters", "named_parameters", "buffers", "named_buffers", "state_dict", "load_state_dict",
    "register_buffer", "register_parameter", "to", "cuda", "cpu", "float", "half", "bfloat16", "double", "type", "eval",
    "train", "requires_grad_", "zero_grad", "get_parameter", "get_buffer", "extra_repr", "reset_parameters"})
# the methods of torch.Tensor that allocate, view, copy or describe; any other callable of it computes
TENSOR_METHODS_OK = frozenset({
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
TENSOR_PLAIN_RESULTS = frozenset({
    "size", "stride", "dim", "ndimension", "numel", "nelement", "element_size", "data_ptr", "storage_offset",
    "is_contiguous", "is_floating_point", "is_complex", "is_signed", "get_device", "is_pinned", "is_shared", "item",
    "tolist", "untyped_storage", "dim_order"})
# the attributes of a tensor that describe it
TENSOR_PLAIN_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout", "requires_grad",
                                "itemsize", "nbytes", "names", "is_leaf", "is_sparse", "is_quantized", "is_meta",
                                "_version"})

MISSING = object()   # what torch_object gives for a path that does not resolve


def torch_object(path: str):
    """The object at `path` in the real torch module, or MISSING when it does not resolve."""
    try:
        import torch

        obj = torch
        for p in path.split(".")[1:]:
            obj = getattr(obj, p)
        return obj
    except Exception:   # noqa: BLE001 - a path that does not resolve is treated as compute
        return MISSING


@functools.lru_cache(maxsize=None)   # what a path is does not change while the process runs
def classify(path: str) -> str:
    """What a path in torch is: module | class-ok | nn-holder | nn-compute | class-bad | value | func-ok | compute |
    override | tensor-method-ok | free."""
    import torch

    if path.startswith(OVERRIDE_NAMESPACES) or path.rsplit(".", 1)[-1] in OVERRIDE_ATTRS:
        return "override"
    if path == "torch" or any(path == ns or path.startswith(ns + ".") for ns in TORCH_FREE):
        return "module" if isinstance(torch_object(path), types.ModuleType) else "free"
    if path == "torch.cuda":
        return "module"
    if path.startswith("torch.cuda."):
        return "free" if path.split(".")[2] in TORCH_CUDA_OK else "compute"
    if path.startswith("torch.Tensor."):
        return "tensor-method-ok" if path[len("torch.Tensor."):] in TENSOR_METHODS_OK else "compute"
    obj = torch_object(path)
    name = path.rsplit(".", 1)[-1]
    if obj is MISSING:
        return "compute"
    if isinstance(obj, types.ModuleType):
        return "module"
    if isinstance(obj, type):
        if issubclass(obj, torch.nn.Module) and not issubclass(obj, torch.Tensor):
            return "nn-holder" if name in NN_HOLDERS and obj.__module__.startswith("torch.nn") else "nn-compute"
        return "class-ok" if path in TORCH_CLASSES_OK else "class-bad"
    if isinstance(obj, (torch.dtype, torch.device, torch.layout, torch.memory_format, bool, int, float, str,
                        type(None))):
        return "value"
    if callable(obj):
        return "func-ok" if name in TORCH_FUNCS_OK and path.count(".") == 1 else "compute"
    return "value"


@functools.lru_cache(maxsize=None)   # read from torch.Tensor once per process
def tensor_compute_names() -> frozenset:
    """The methods of torch.Tensor that compute: every public callable but the allowed ones, and the operators."""
    import torch

    return frozenset(n for n in dir(torch.Tensor) if n not in TENSOR_METHODS_OK
                     and callable(getattr(torch.Tensor, n, None)) and not n.startswith("_")
                     or n in ("__matmul__", "__rmatmul__", "__pow__", "__rpow__", "__add__", "__mul__", "__sub__",
                              "__truediv__", "__abs__", "__neg__", "__lt__", "__gt__", "__le__", "__ge__", "__eq__",
                              "__ne__", "__torch_function__", "__torch_dispatch__"))


@functools.lru_cache(maxsize=None)   # read from torch.nn once per process
def nn_compute_methods() -> frozenset:
    """Method names that compute on some weight-holding torch.nn class (forward, __call__, ...)."""
    import torch

    names = set()
    for holder in NN_HOLDERS:
        cls = getattr(torch.nn, holder, None)
        if isinstance(cls, type):
            names |= {n for n in dir(cls) if callable(getattr(cls, n, None))}
    return frozenset(names - NN_METHODS_OK - TENSOR_METHODS_OK - {
        "__class__", "__init_subclass__", "__subclasshook__", "__new__", "__eq__", "__ne__", "__lt__", "__le__",
        "__gt__", "__ge__", "__hash__", "__repr__", "__str__", "__format__", "__sizeof__", "__reduce__",
        "__reduce_ex__", "__dir__", "__getstate__", "__setstate__", "__delattr__", "__setattr__",
        "__getattribute__", "__getattr__", "reset_parameters"})


# the namespaces whose members torch_alias names an object by: the first path found for it wins
_ALIAS_NAMESPACES = ("torch", "torch.nn.functional", "torch.nn", "torch.linalg", "torch.fft", "torch.special",
                     "torch.Tensor", "torch.cuda", "torch.autograd", "torch.nn.init", "torch.utils.cpp_extension")


@functools.lru_cache(maxsize=None)   # torch's namespaces do not change while the process runs
def _torch_ids() -> dict[int, str]:
    out: dict[int, str] = {}
    for ns in _ALIAS_NAMESPACES:
        obj = torch_object(ns)
        if obj is MISSING:
            continue
        out.setdefault(id(obj), ns)
        for name in dir(obj):
            try:
                member = getattr(obj, name)
            except Exception:   # noqa: BLE001 - a member that cannot be read names nothing
                continue
            if not isinstance(member, (bool, int, float, str, type(None))):
                out.setdefault(id(member), f"{ns}.{name}")
    return out


@functools.lru_cache(maxsize=None)   # what a module path holds does not change while the process runs
def torch_alias(path: str) -> str | None:
    """Torch by identity: the torch path of the object that the path `path` in another module (`triton.x.y`,
    `os.path`) resolves to, where that object is torch's (a torch module, function or class); "?what" where it is
    torch's but has no path of torch's own namespaces; None where it is not torch's or does not resolve. Only
    modules a candidate may import are resolved (torch, triton, the standard library), and only by attribute lookups
    on modules, which run no candidate code."""
    import importlib
    import sys

    parts = path.split(".")
    if parts[0] not in ("triton",) and parts[0] not in sys.stdlib_module_names:
        return None
    try:
        obj = importlib.import_module(parts[0])
        for p in parts[1:]:
            if not isinstance(obj, types.ModuleType):
                break
            obj = getattr(obj, p)
    except Exception:   # noqa: BLE001 - a path that does not resolve is not torch's
        return None
    name = getattr(obj, "__name__", "") if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", "")
    if not isinstance(name, str) or not (name == "torch" or name.startswith("torch.")):
        return None
    return _torch_ids().get(id(obj), f"?{name}.{getattr(obj, '__name__', '')}".rstrip("."))
