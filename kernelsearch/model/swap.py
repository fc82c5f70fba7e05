"""Kernels put into a model where its operators ran: module replacement, and operators taken over by a
TorchFunctionMode. One piece of code for both users: verify.py (each kernel alone, then all together) and the
repository `kernelsearch export --model` writes, which ships this file byte for byte as `_swap.py` and calls
`patch` from its own `patch(model)`. So it imports torch and the standard library only, never kernelsearch.

A swap is described by an extracted part's dict (extract.py: `key`, `kind`, `swap`), the kernel's ModelNew class,
and the init inputs it is built with (a family's timed case; none for a generated operator):
- a module unit (swap["how"] == "module": RMSNorm, LayerNorm, nn.Linear, Conv1D) is replaced at every path it
  covers by a module that calls the kernel's ModelNew (the weights copied in; a Linear's weight transposed once,
  its bias added after);
- an operator unit (swap["how"] == "op": softmax over the last dimension, a generated operator) is called in
  place of the operator when it runs in one of the part's modules (paths normalised, `layers.*.attn`) with the
  part's shapes and dtypes; the modules are tracked by forward hooks.
"""
from __future__ import annotations

import re

ROOT = "model"   # the module path of the model itself
# torch functions (by __name__) -> the profiled aten operator an operator unit names
OPS = {"matmul": "aten::matmul", "__matmul__": "aten::matmul", "bmm": "aten::bmm", "softmax": "aten::softmax",
       "silu": "aten::silu", "gelu": "aten::gelu", "mul": "aten::mul", "__mul__": "aten::mul",
       "add": "aten::add", "__add__": "aten::add", "div": "aten::div", "__truediv__": "aten::div"}


def norm_path(path: str) -> str:
    """`layers.3.mlp.up_proj` -> `layers.*.mlp.up_proj`: one row for every layer's copy of a module."""
    return re.sub(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.|$)", "*", path)


def _submodule(model, path: str, part: dict):
    try:
        return model.get_submodule(path)
    except AttributeError:
        raise ValueError(f"the model has no module {path!r}, where {part.get('key')}'s kernel goes: it is not the "
                         "model this kernel was found for (the same module paths are expected)") from None


class ModuleSwap:
    """A module unit's kernel at every path the unit covers; install() puts them in, remove() the originals back."""

    def __init__(self, model, part: dict, cls, init, device):
        import torch.nn as nn

        self.model, self.part, self.originals = model, part, {}
        swap = part["swap"]

        class Kernel(nn.Module):
            def __init__(self, orig):
                super().__init__()
                kind = swap["kind"]
                self.kind = kind
                self.k = cls(*init)
                if kind in ("rmsnorm", "layernorm"):
                    state = {"weight": orig.weight.detach()}
                    if kind == "layernorm":
                        state["bias"] = orig.bias.detach()
                    self.k.load_state_dict(state, strict=False)
                    if hasattr(self.k, "eps"):
                        self.k.eps = swap["eps"]
                else:
                    w = orig.weight.detach()
                    self.register_buffer("wt", (w.t() if kind == "linear" else w).contiguous())
                    b = getattr(orig, "bias", None)
                    self.register_buffer("b", b.detach() if b is not None else None)
                self.k.to(device)

            def forward(self, x):
                shape = x.shape
                x2 = x.reshape(-1, shape[-1]).contiguous()
                if self.kind in ("rmsnorm", "layernorm"):
                    return self.k(x2).reshape(shape)
                y = self.k(x2, self.wt)
                if self.b is not None:
                    y = y + self.b
                return y.reshape(*shape[:-1], y.shape[-1])

        Kernel.__name__ = Kernel.__qualname__ = f"Kernel_{swap['kind']}"
        self.kernels = {path: Kernel(_submodule(model, path, part)) for path in swap["paths"]}

    def install(self):
        for path, k in self.kernels.items():
            parent, _, attr = path.rpartition(".")
            owner = self.model.get_submodule(parent) if parent else self.model
            self.originals[path] = getattr(owner, attr)
            setattr(owner, attr, k)

    def remove(self):
        for path, orig in self.originals.items():
            parent, _, attr = path.rpartition(".")
            setattr(self.model.get_submodule(parent) if parent else self.model, attr, orig)
        self.originals = {}


class OpSwaps:
    """Operator units: a TorchFunctionMode that calls a kernel in place of an operator, in the problem's modules
    and at its shapes and dtypes only; module paths are tracked by forward hooks (remove() takes them off)."""

    def __init__(self, model):
        self.handlers: dict[str, list] = {}
        self.stack: list[str] = []
        self.hooks = []
        for path, m in model.named_modules():
            name = norm_path(path) if path else ROOT
            self.hooks.append(m.register_forward_pre_hook(lambda mod, a, name=name: self._enter(name)))
            self.hooks.append(m.register_forward_hook(self._leave))

    def _enter(self, name: str) -> None:
        if name == ROOT:   # a new forward of the model: nothing is left of one that raised
            self.stack.clear()
        self.stack.append(name)

    def _leave(self, mod, args, out) -> None:   # returns None: a forward hook's value would replace the output
        if self.stack:
            self.stack.pop()

    def add(self, part: dict, cls, init, device):
        swap = part["swap"]
        k = cls(*init)
        k.to(device)
        if part["kind"] == "family":   # softmax over the last dimension: rows x cols
            def call(tensors):
                x = tensors[0]
                return k(x.reshape(-1, x.shape[-1]).contiguous()).reshape(x.shape)
        else:
            def call(tensors):
                return k(*[t.contiguous() for t in tensors])
        entry = (set(swap["modules"]), [tuple(s) for s in swap["shapes"]], swap["dtypes"], call)
        self.handlers.setdefault(swap["op"], []).append(entry)
        return entry

    def discard(self, op: str, entry) -> None:
        self.handlers[op] = [e for e in self.handlers.get(op, []) if e is not entry]

    def remove(self) -> None:
        for h in self.hooks:
            h.remove()
        self.hooks, self.handlers = [], {}

    def mode(self):
        import torch
        from torch.overrides import TorchFunctionMode

        swaps = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                op = OPS.get(getattr(func, "__name__", ""))
                if op in swaps.handlers and swaps.stack:
                    tensors = [a for a in args if isinstance(a, torch.Tensor)]
                    shapes = [tuple(t.shape) for t in tensors]
                    dtypes = [str(t.dtype).removeprefix("torch.") for t in tensors]
                    ok_args = len(tensors) == len(args) or op == "aten::softmax"
                    if op == "aten::softmax":
                        dim = args[1] if len(args) > 1 else kwargs.get("dim")
                        ok_args = tensors and dim in (-1, tensors[0].dim() - 1) and kwargs.get("dtype") is None
                    elif op == "aten::add":
                        ok_args = ok_args and kwargs.get("alpha", 1) == 1
                    for modules, want_shapes, want_dtypes, call in swaps.handlers[op]:
                        if ok_args and swaps.stack[-1] in modules and shapes == want_shapes \
                                and dtypes == want_dtypes:
                            return call(tensors)
                return func(*args, **kwargs)

        return Mode()


class Patch:
    """Every kernel of `swaps` in `model` at once: the module units installed, and, where there are operator
    units, the model's forward run under their mode. remove() puts the model back as it was."""

    def __init__(self, model, swaps, device=None):
        if getattr(model, "_kernelsearch_patch", None) is not None:
            raise ValueError("the model is patched already: remove() that patch first")
        if device is None:
            first = next(iter(model.parameters()), None)
            device = first.device if first is not None else "cpu"
        self.model, self.modules, self.ops = model, [], None
        try:
            for part, cls, init in swaps:
                if part["swap"]["how"] == "module":
                    m = ModuleSwap(model, part, cls, init, device)
                    m.install()
                    self.modules.append(m)
                else:
                    if self.ops is None:
                        self.ops = OpSwaps(model)
                    self.ops.add(part, cls, init, device)
        except BaseException:
            self.remove()
            raise
        if self.ops is not None:
            self._own_forward = "forward" in vars(model)
            self._forward = model.forward
            ops, inner = self.ops, model.forward

            def forward(*args, **kwargs):
                with ops.mode():
                    return inner(*args, **kwargs)

            model.forward = forward
        model._kernelsearch_patch = self

    def remove(self) -> None:
        if getattr(self.model, "_kernelsearch_patch", None) is self:
            del self.model._kernelsearch_patch
        for m in reversed(self.modules):
            m.remove()
        self.modules = []
        if self.ops is not None:
            self.ops.remove()
            if hasattr(self, "_forward"):
                if self._own_forward:
                    self.model.forward = self._forward
                else:
                    del self.model.forward
            self.ops = None


def patch(model, swaps, device=None) -> Patch:
    """Put the kernels of `swaps`, (part dict, ModelNew class, init inputs) each, into `model`; returns the Patch,
    whose remove() undoes it."""
    return Patch(model, swaps, device)
