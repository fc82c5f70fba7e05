"""The C++ and CUDA a candidate compiles, read (the native-code check).

A load_inline extension is the candidate's own code, but its C++ can call ATen (`torch::softmax(x, -1)`,
`x.matmul(w)`), cuBLAS or cuDNN as easily as Python can call torch: read only the Python, such a candidate was `ok` at
eager's speed with none of the work its own (fixture round3/cpp_aten). So every source the candidate hands the
compiler must be text the judge can read, and that text is held to the rule the Python is held to:

- `torch::`, `at::` and `c10::` calls that compute (classified as the same name in torch is: `torch::empty`,
  `at::zeros_like` allocate and pass; `torch::softmax`, `at::matmul`, `torch::nn::functional::softmax` compute),
  except the CUDA runtime helpers under `...::cuda::` (the current stream, device guards);
- a tensor method that computes (`x.softmax(-1)`, `x.sum()`, `x.mm(w)`), by the names torch.Tensor computes with;
- cuBLAS, cuBLASLt, cuDNN, cuFFT, cuSPARSE, cuSOLVER calls, and ATen's per-op and native headers;
- a source built at run time (from a variable the scan cannot resolve to literals, a file, `str.format`) is
  rejected as unreadable, and so is `torch.utils.cpp_extension.load` (it compiles files from disk).

Every string literal of the file is read (f-strings by their literal parts, whose placeholders must be literals or
names bound to literals), and so is their concatenation in file order, so a call split across literals is seen.
"""
from __future__ import annotations

import ast
import re

from kernelsearch.judge.scan.torch_paths import MISSING, TENSOR_METHODS_OK, classify, tensor_compute_names, torch_object

# a C++ source is told from other strings by any of these
_CXX_MARKS = ("#include", "__global__", "torch::", "at::", "c10::", "PYBIND11", "<<<", "__device__", "cublas",
              "cudnn")
_NS_CALL = re.compile(r"\b(?:at|torch|c10)::((?:\w+::)*)(\w+)\s*(?:<[^;(){}]*>)?\s*\(")
_METHOD_CALL = re.compile(r"(?:\.|->)\s*(\w+)\s*(?:<[^;(){}]*>)?\s*\(")
_LIBRARY = re.compile(r"\b(cublas\w*|cublasLt\w*|cudnn\w*|cufft\w*|cusparse\w*|cusolver\w*)\s*\(|"
                      r"#\s*include\s*[<\"](ATen/ops/|ATen/native/|cublas|cudnn|cufft|cusparse|cusolver)[^>\"]*")
# names C++ host code calls under torch::/at::/c10:: that are not torch ops (or are allocations torch classifies
# as something else here): types, options, guards, checks
_CXX_OK = frozenset({"Tensor", "TensorOptions", "dtype", "device", "Device", "Scalar", "ScalarType", "IntArrayRef",
                     "ArrayRef", "MemoryFormat", "Layout", "irange", "elementSize", "toString", "from_blob",
                     "empty_strided", "make_optional", "typeMetaToScalarType", "DeviceGuard", "OptionalDeviceGuard",
                     "check", "requires_grad", "layout", "memory_format", "kCUDA", "kCPU"})
_SOURCE_ARGS = ("cpp_sources", "cuda_sources", "sources")
_LOADERS = ("load_inline", "load")


def _strings(tree: ast.AST) -> list[ast.Constant]:
    """Every string literal of the file, f-strings by their literal parts, in file order."""
    out = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _computes(name: str) -> bool:
    """Whether `torch.<name>` (or ATen's op of that name) computes."""
    if name in _CXX_OK:
        return False
    import torch

    if torch_object(f"torch.{name}") is MISSING:   # an ATen op with no Python name computes; no op at all is the
        return hasattr(torch.ops.aten, name)        # candidate's own or the language's
    return classify(f"torch.{name}") == "compute"


def native_findings(text: str) -> list[str]:
    """What in one C++/CUDA source computes with a library instead of the candidate's own kernels."""
    if not any(m in text for m in _CXX_MARKS):
        return []
    found = []
    for m in _NS_CALL.finditer(text):
        spaces, name = m.group(1), m.group(2)
        if "cuda::" in spaces:
            continue
        if _computes(name):
            found.append(f"calls {m.group(0).rstrip('( ')} (ATen computes it, not the candidate's kernel)")
    compute = tensor_compute_names()
    for m in _METHOD_CALL.finditer(text):
        name = m.group(1)
        if name in compute and name not in TENSOR_METHODS_OK and not name.startswith("_"):
            found.append(f"calls the tensor method .{name}() (ATen computes it, not the candidate's kernel)")
    for m in _LIBRARY.finditer(text):
        found.append(f"uses {m.group(0).strip().rstrip('(').strip()} (a vendor library computes it)")
    return found


class _Literals:
    """Which expressions of the file are text the scan can read: literals, names bound only to readable values,
    f-strings whose placeholders are readable, lists, tuples and concatenations of them."""

    def __init__(self, tree: ast.AST):
        self.bound: dict[str, list[ast.AST]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.bound.setdefault(target.id, []).append(node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                self.bound.setdefault(node.target.id, []).append(node.value if node.value is not None
                                                                 else ast.Name(id="?"))
            elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
                self.bound.setdefault(node.target.id, []).append(ast.Name(id="?"))

    def readable(self, node: ast.AST | None, seen: frozenset = frozenset()) -> bool:
        if node is None:
            return True
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (str, int, float, bool)) or node.value is None
        if isinstance(node, ast.JoinedStr):
            return all(isinstance(v, ast.Constant) or self.readable(v, seen) for v in node.values)
        if isinstance(node, ast.FormattedValue):
            return self.readable(node.value, seen)
        if isinstance(node, (ast.List, ast.Tuple)):
            return all(self.readable(e, seen) for e in node.elts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.readable(node.left, seen) and self.readable(node.right, seen)
        if isinstance(node, ast.Name) and node.id not in seen and node.id in self.bound:
            return all(self.readable(v, seen | {node.id}) for v in self.bound[node.id])
        return False


def check_native(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """(node, what) of every native-code finding of the file: unreadable sources handed to the C++ extension
    loader, and library compute in any C++ source it holds."""
    out: list[tuple[ast.AST, str]] = []
    literals = _Literals(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        if name == "load" and "cpp_extension" in ast.unparse(fn) or name == "load" and any(
                kw.arg == "sources" for kw in node.keywords):
            out.append((node, "compiles sources from files (torch.utils.cpp_extension.load): the judge reads only "
                              "sources given as text (load_inline)"))
            continue
        if name != "load_inline":
            continue
        args = [kw.value for kw in node.keywords if kw.arg in _SOURCE_ARGS] + list(node.args[1:3])
        for arg in args:
            if not literals.readable(arg):
                out.append((node, f"hands load_inline a source built at run time ({ast.unparse(arg)[:60]}): its "
                                  "C++/CUDA must be string literals the judge can read"))
    strings = _strings(tree)
    if not strings:
        return out
    # each literal, then all of them joined (a call split across literals), at the first literal's line
    texts = [(s, s.value) for s in strings] + [(strings[0], "".join(s.value for s in strings))]
    seen: set[str] = set()
    for node, text in texts:
        for what in native_findings(text):
            if what not in seen:
                seen.add(what)
                out.append((node, what))
    return out
