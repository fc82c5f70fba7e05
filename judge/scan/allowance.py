"""What a config may allow of torch (`evaluation.allow_torch`): ALLOWABLE_TORCH names the operations, `Allowance`
matches a scan's torch paths, tensor methods and module calls against those a config allows, and records which it
excused.

KernelBench lets a candidate keep part of the work in PyTorch (a level-2 solution keeps its GEMM in cuBLAS and fuses
the epilogue into its own kernel). A config may allow, per problem, the named operations below and nothing else; the
strict default allows none. An allowance is matched by identity, never by name: a torch path is allowed only if it
resolves (in the real torch module) to one of the allowance's functions, so an alias of the same function passes and
anything else (softmax under an allowance of matmul, however it is reached) is rejected by the same rules as without
one. A tensor method is allowed by its name on torch.Tensor (`x.matmul(w)`), `@` by the matmul allowance, and calling
an nn module (or its forward) only for the exact classes listed (not a subclass: a subclass of a torch class is
rejected anyway, not a container such as nn.Sequential). What a call returns is a tensor, so arithmetic or a tensor
method on it is still host compute. The kernel-launch check (a forward that launched none of the candidate's own
Triton kernels is rejected) and `no kernel of its own` stand as they are: an allowance lets a candidate call a
library for part of the work, never for all of it.
"""
from __future__ import annotations

from kernelsearch.judge.scan.torch_paths import MISSING, torch_object

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


class Allowance:
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
                obj = torch_object(path)
                if obj is not MISSING:
                    self.funcs[id(obj)] = name
            for m in spec.get("methods", ()):
                self.methods[m] = name
            for path in spec.get("modules", ()):
                obj = torch_object(path)
                if obj is not MISSING:
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
        obj = torch_object(path)
        return obj is not MISSING and self._take(self.funcs.get(id(obj)))

    def method(self, attr: str) -> bool:
        """A tensor method on a tensor (or a value that may be one)."""
        return bool(self.names) and self._take(self.methods.get(attr))

    def module(self, cls_path: str) -> bool:
        """Calling an instance of this torch.nn class (or its forward)."""
        if not self.names:
            return False
        obj = torch_object(cls_path)
        return obj is not MISSING and self._take(self.modules.get(id(obj)))

    def matmul_operator(self) -> bool:
        return self.operator and self._take("matmul")

