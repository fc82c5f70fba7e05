"""The static scan on what host code reaches, not on names (issue 18): every bypass class is rejected with a reason
naming its check; the candidate's own helpers are not taken for torch by their names; every honest kernel the
project ships passes."""
from __future__ import annotations

import importlib
import json
import textwrap
from pathlib import Path

import pytest

from kernelsearch.families import load_family
from kernelsearch.judge.problem import FAMILIES_DIR, family_names
from kernelsearch.judge.static import scan_source
from kernelsearch.judge.status import CandidateFailure

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
JUDGE = FIXTURES / "cheats" / "judge"

HEADER = '''
import math
import os

import torch
import triton
import triton.language as tl
from torch import nn
import torch.nn.functional as F


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _launch(x):
    y = torch.empty_like(x)
    _copy_kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(max(x.numel(), 1)))
    return y
'''


def _candidate(forward: str, *, init: str = "", module: str = "") -> str:
    """HEADER, then `module` (module-level code), then a ModelNew with `init` in __init__ and `forward`."""
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    setup = textwrap.indent(textwrap.dedent(init).strip(), " " * 8) if init.strip() else ""
    return (HEADER + textwrap.dedent(module) + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n" + (setup + "\n" if setup else "") +
            "\n    def forward(self, x):\n" + body + "\n")


def _reason(source: str) -> str | None:
    """The scan's reason for rejecting `source`, or None when it passes."""
    try:
        scan_source(source)
    except CandidateFailure as err:
        assert err.status == "rejected" and err.stage == "static", err
        return err.reason
    return None


# -- the judge fixtures whose cheat is visible in the source --------------------------------------------------------
STATIC_FIXTURES = {
    "nn_module": "torch-compute check",
    "functional_attr": "torch-compute check",
    "getattr_built": "getattr check",
    "eval_exec": "dynamic-code check",
    "dunder_import": "dynamic-code check",
    "aten_ops": "torch-compute check",
    "alias_import": "torch-compute check",
    "frames_reference": "introspection check",
    "frames_clock": "introspection check",
    "gc_reference": "introspection check",
    "code_swap": "introspection check",
    "rebind_clock": "dynamic-code check",
    "seed": "introspection check",
    "slow_reference": "dynamic-code check",
    "torch_function_mode": "torch-override check",
    "reference_does_work": "torch-compute check",
    # since issue 29 a candidate imports torch, triton and the standard library only: these two reached the judge's
    # own modules (its exception type, its problem loader), which the process boundary also defeats
    "forged_exception": "import check",
    "proc_mem_seed": "import check",
}
# cheats the scan cannot see (they use only what honest code uses: their defence is the judge's process boundary)
RUN_TIME_FIXTURES = {"forged_result", "replay", "count_calls", "batch_first_only", "first_spoiled", "store_forgery",
                     "escaped_process"}


def test_every_judge_fixture_is_classified():
    assert {p.stem for p in JUDGE.glob("*.py")} == set(STATIC_FIXTURES) | RUN_TIME_FIXTURES | {"honest_names"}


@pytest.mark.parametrize("name", sorted(STATIC_FIXTURES))
def test_judge_fixture_is_rejected_by_its_check(name):
    reason = _reason((JUDGE / f"{name}.py").read_text())
    assert reason is not None and reason.startswith(STATIC_FIXTURES[name]), (name, reason)


@pytest.mark.parametrize("name", sorted(RUN_TIME_FIXTURES | {"honest_names"}))
def test_run_time_fixtures_and_honest_names_pass_the_scan(name):
    assert _reason((JUDGE / f"{name}.py").read_text()) is None


# -- each bypass, as small as it gets -------------------------------------------------------------------------------
BYPASSES = [
    # torch compute through modules, functionals held in names or attributes, aliases and tensor methods
    ("instantiates nn.Softmax", dict(init="self.act = nn.Softmax(dim=-1)", forward="return self.act(x)"),
     "torch-compute check"),
    ("calls a weight-holding module", dict(init="self.lin = nn.Linear(4, 4)", forward="return self.lin(x)"),
     "torch-compute check"),
    ("calls a module's forward", dict(init="self.lin = nn.Linear(4, 4)", forward="return self.lin.forward(x)"),
     "torch-compute check"),
    ("calls nn.Linear.forward on the class", dict(init="self.lin = nn.Linear(4, 4)",
                                                   forward="return nn.Linear.forward(self.lin, x)"),
     "torch-compute check"),
    ("modules in a ModuleList, called in a loop",
     dict(init="self.layers = nn.ModuleList([nn.Linear(4, 4)])",
          forward="for layer in self.layers:\n    x = layer(x)\nreturn _launch(x)"), "torch-compute check"),
    ("a module in a list, called by index", dict(init="self.layers = [nn.Linear(4, 4)]",
                                                forward="return self.layers[0](x)"), "torch-compute check"),
    ("a module held by an object of its own", dict(module="class _Holder:\n    pass\n",
                                                  init="self.h = _Holder()\nself.h.lin = nn.Linear(4, 4)",
                                                  forward="return self.h.lin(x)"), "torch-compute check"),
    ("a module stored into a dict", dict(init="self.d = {}\nself.d['lin'] = nn.Linear(4, 4)",
                                         forward="return self.d['lin'](x)"), "torch-compute check"),
    ("a module fetched by a container method", dict(init="self.d = nn.ModuleDict({'lin': nn.Linear(4, 4)})",
                                                    forward="return self.d.get('lin')(x)"), "torch-compute check"),
    ("setattr with a built name", dict(forward="setattr(torch, 'soft' + 'max', None)\nreturn _launch(x)"),
     "getattr check"),
    ("subclasses a torch module", dict(module="class _Lin(nn.Linear):\n    pass\n", forward="return _launch(x)"),
     "torch-compute check"),
    ("functional held in an attribute", dict(init="self.f = F.softmax", forward="return self.f(x, -1)"),
     "torch-compute check"),
    ("functional held in a variable", dict(forward="f = torch.softmax\nreturn f(x, -1)"), "torch-compute check"),
    ("functional in a container", dict(module="_OPS = {'sm': torch.softmax}\n", forward="return _OPS['sm'](x, -1)"),
     "torch-compute check"),
    ("functional in functools.partial",
     dict(module="import functools\n_SM = functools.partial(torch.softmax, dim=-1)\n", forward="return _SM(x)"),
     "torch-compute check"),
    ("renamed import", dict(module="from torch.nn.functional import softmax as _norm\n", forward="return _norm(x, -1)"),
     "torch-compute check"),
    ("star import", dict(module="from torch.nn.functional import *\n", forward="return softmax(x, -1)"),
     "torch-compute check"),
    ("torch aliased by assignment", dict(module="T = torch\n", forward="return T.softmax(x, -1)"),
     "torch-compute check"),
    ("torch returned by a helper", dict(module="def _lib():\n    return torch\n",
                                        forward="return _lib().ops.aten._softmax(x, -1, False)"),
     "torch-compute check"),
    ("torch.ops.aten", dict(forward="return torch.ops.aten._softmax(x, -1, False)"), "torch-compute check"),
    ("unbound method on the class", dict(forward="return torch.Tensor.softmax(x, -1)"), "torch-compute check"),
    ("method through type(x)", dict(forward="return type(x).softmax(x, -1)"), "torch-compute check"),
    ("tensor method on the kernel's output", dict(forward="y = _launch(x)\nreturn y / y.sum(-1, keepdim=True)"),
     "torch-compute check"),
    ("tensor method in a lambda", dict(forward="return (lambda t: t.softmax(-1))(x)"), "torch-compute check"),
    ("tensor subclass of its own", dict(module="class _T(torch.Tensor):\n    pass\n",
                                        forward="return _T(x).softmax(-1)"), "torch-compute check"),
    ("operator arithmetic on tensors", dict(forward="e = math.e ** x\nreturn e / _launch(e)"), "torch-compute check"),
    ("in-place arithmetic", dict(forward="y = _launch(x)\ny *= 2\nreturn y"), "torch-compute check"),
    ("builtin sum over tensor columns", dict(forward="return sum(x[:, j] for j in range(x.shape[1]))"),
     "torch-compute check"),
    ("arithmetic in a helper fed tensors", dict(module="def _div(a, b):\n    return a / b\n",
                                                forward="return _div(_launch(x), x)"), "torch-compute check"),
    ("matmul operator", dict(forward="return _launch(x) @ x"), "torch-compute check"),
    ("torch.compile", dict(forward="return torch.compile(_launch)(x)"), "torch-compute check"),
    ("torch.cuda.comm", dict(forward="return torch.cuda.comm.reduce_add([x, x])"), "torch-compute check"),
    ("numpy on the host", dict(module="import numpy as np\n", forward="return _launch(x)"), "torch-compute check"),
    ("a decorator of its own named jit hides host code",
     dict(module="def jit(fn):\n    return fn\n\n\n@jit\ndef _host(x):\n    return torch.softmax(x, -1)\n",
          forward="return _host(x)"), "torch-compute check"),
    ("torch inside a Triton kernel (runs under the interpreter)",
     dict(module="_HELD = {}\n\n\n@triton.jit\ndef _cheat_kernel(y_ptr):\n    torch.softmax(_HELD['x'], -1)\n",
          forward="return _launch(x)"), "torch-compute check"),
    # getattr with names built at run time
    ("getattr on torch with a built name", dict(forward="return getattr(torch, 'soft' + 'max')(x, -1)"),
     "getattr check"),
    ("getattr on a tensor with a built name", dict(forward="return getattr(x, 'soft' + 'max')(-1)"), "getattr check"),
    ("getattr through an alias", dict(forward="g = getattr\nreturn g(F, 'soft' + 'max')(x, -1)"), "getattr check"),
    ("getattr with a constant name is the attribute", dict(forward="return getattr(x, 'softmax')(-1)"),
     "torch-compute check"),
    ("operator.methodcaller",
     dict(module="import operator\n", forward="return operator.methodcaller('softmax', -1)(x)"), "getattr check"),
    # code and modules reached through strings
    ("eval", dict(forward="return eval('torch.soft' + 'max')(x, -1)"), "dynamic-code check"),
    ("exec", dict(module="_NS = {}\nexec('def f(x): return x', _NS)\n", forward="return _launch(x)"),
     "dynamic-code check"),
    ("compile", dict(forward="c = compile('x', 'f', 'eval')\nreturn _launch(x)"), "dynamic-code check"),
    ("__import__", dict(forward="return __import__('torch').softmax(x, -1)"), "dynamic-code check"),
    ("importlib", dict(module="import importlib\n", forward="return _launch(x)"), "dynamic-code check"),
    ("sys.modules", dict(module="import sys\n", forward="return sys.modules['torch'].softmax(x, -1)"),
     "dynamic-code check"),
    ("globals()", dict(forward="return globals()['tor' + 'ch'].softmax(x, -1)"), "dynamic-code check"),
    ("vars() of torch", dict(forward="return vars(torch)['softmax'](x, -1)"), "dynamic-code check"),
    # reaching into the process: frames, the heap, code objects, raw memory
    ("sys._getframe", dict(module="import sys\n", forward="f = sys._getframe(1)\nreturn _launch(x)"),
     "introspection check"),
    ("from sys import _getframe", dict(module="from sys import _getframe\n", forward="return _launch(x)"),
     "introspection check"),
    ("inspect", dict(module="import inspect\n", forward="return _launch(x)"), "introspection check"),
    ("gc", dict(module="import gc\n", forward="return _launch(x)"), "introspection check"),
    ("ctypes", dict(module="import ctypes\n", forward="return _launch(x)"), "introspection check"),
    ("frames through a traceback", dict(forward="try:\n    raise ValueError\nexcept ValueError as e:\n"
                                                "    f = e.__traceback__.tb_frame.f_back\nreturn _launch(x)"),
     "introspection check"),
    ("a code object swapped",
     dict(module="def _a():\n    pass\n\n\ndef _b():\n    pass\n\n\n_a.__code__ = _b.__code__\n",
          forward="return _launch(x)"), "introspection check"),
    ("__dict__ of torch", dict(forward="return torch.__dict__['softmax'](x, -1)"), "introspection check"),
    ("__subclasses__", dict(forward="n = object.__subclasses__()\nreturn _launch(x)"), "introspection check"),
    ("__builtins__", dict(forward="return __builtins__['eval']('x')"), "introspection check"),
    # changing what torch computes, the comparison's calls included
    ("a TorchFunctionMode", dict(module="from torch.overrides import TorchFunctionMode\n", forward="return _launch(x)"),
     "torch-override check"),
    ("a TorchDispatchMode", dict(module="from torch.utils._python_dispatch import TorchDispatchMode\n",
                                 forward="return _launch(x)"), "torch-override check"),
    ("__torch_function__ on a class of its own",
     dict(module="class _Spy:\n    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                 "        return func(*args, **(kwargs or {}))\n", forward="return _launch(x)"),
     "torch-override check"),
    ("torch.library", dict(module="import torch.library\n", forward="return _launch(x)"), "torch-override check"),
    # the fallback
    ("except handler falls back to torch", dict(forward="try:\n    return _launch(x)\nexcept Exception:\n"
                                                        "    return x.softmax(-1)"), "fallback check"),
]


@pytest.mark.parametrize("what,parts,check", BYPASSES, ids=[b[0] for b in BYPASSES])
def test_bypass_is_rejected_naming_its_check(what, parts, check):
    reason = _reason(_candidate(**parts))
    assert reason is not None, f"{what}: passed the scan"
    assert reason.startswith(check), (what, reason)
    assert "line " in reason, reason


# -- honest code: the candidate's own names, weights held for kernels, dtypes by name --------------------------------
HONEST = [
    ("own helpers with methods named sum, max, inner, norm",
     dict(module='''
         class _Stats:
             def __init__(self):
                 self.rows = 0
                 self.inner = _Limits()

             def sum(self):
                 return self.rows

             def max(self):
                 return self.rows

             def norm(self):
                 return self.rows ** 0.5


         class _Limits:
             def __init__(self):
                 self.norm = 1 << 20

             def inner(self, other):
                 return self.norm * other.norm
         ''', init="self.stats = _Stats()",
          forward='''
          s = self.stats
          if s.sum() < 0 or s.max() < 0 or s.norm() < 0 or s.inner.inner(s.inner) < 0 or self.stats.inner.norm < 0:
              raise ValueError("impossible")
          helper = _Stats()
          helper.rows = max(x.shape[-1], helper.sum())
          return _launch(x)''')),
    ("weights held in nn.Linear and nn.Parameter, handed to a kernel",
     dict(init="self.lin = nn.Linear(4, 4)\nself.scale = nn.Parameter(torch.randn(4))\n"
               "nn.init.uniform_(self.scale, -1.0, 1.0)",
          forward="w, b = self.lin.weight, self.lin.bias\nassert w.dim() == 2 and self.scale.numel() == 4\n"
                  "return _launch(x)")),
    ("dtypes by name", dict(module='''
         def _alloc(n, dtype: str):
             dt = getattr(torch, dtype)
             return torch.empty(n, dtype=dt).to(getattr(torch, dtype))
         ''', forward="y = _alloc(x.numel(), 'float32')\nz = torch.zeros(1, dtype=getattr(torch, 'float32'))\n"
                      "return _launch(x)")),
    ("shapes, sizes, devices and plain Python on the host", dict(forward='''
         if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float32, torch.bfloat16):
             raise TypeError(f"unsupported {type(x).__name__}")
         n_rows, n_cols = x.reshape(-1, x.shape[-1]).shape
         nbytes = x.numel() * x.element_size() + n_rows * n_cols
         block = max(triton.next_power_of_2(n_cols), 16) * max(1, int(os.environ.get("KS_SCALE", "1")))
         scale = 1.0 / math.sqrt(x.shape[-1])
         sizes = [n_rows, n_cols]
         total = sum(sizes) + abs(-block) + min(nbytes, 1) + round(scale)
         table = {"a": 1}
         for v in table.values():
             total += v
         order = sorted(sizes)
         order.sort()
         if x.is_cuda:
             sms = torch.cuda.get_device_properties(x.device).multi_processor_count
         with torch.no_grad():
             y = _launch(x.contiguous().view(-1, x.shape[-1]))
         y.fill_(0.0)
         return y.view(x.shape)''')),
    ("a CUDA C++ extension with a function named softmax",
     dict(module="from torch.utils.cpp_extension import load_inline\n_ext = load_inline(name='k', cpp_sources='', "
                 "cuda_sources='', functions=['softmax'])\n", forward="return _ext.softmax(x)")),
]


@pytest.mark.parametrize("what,parts", HONEST, ids=[h[0] for h in HONEST])
def test_honest_code_passes(what, parts):
    source = _candidate(**parts)
    compile(source, what, "exec")
    assert _reason(source) is None


def test_honest_name_fixture_passes():
    assert scan_source((JUDGE / "honest_names.py").read_text()) == {"torch_ops": []}


# -- every honest kernel the project ships ---------------------------------------------------------------------------
def test_every_family_starter_passes():
    for name in family_names():
        assert _reason(load_family(name).starter_source) is None, name


def test_wrong_kernels_and_problem_candidates_pass():
    """A family's wrong/ kernels are honest mistakes (they must fail as incorrect, not rejected); the candidates among
    tests/fixtures/problems likewise."""
    files = sorted(FAMILIES_DIR.glob("*/wrong/*.py")) + sorted((FIXTURES / "problems").glob("*.py"))
    checked = 0
    for path in files:
        source = path.read_text()
        if "class ModelNew" not in source:
            continue   # a problem (a reference), not a candidate
        assert _reason(source) is None, path
        checked += 1
    assert checked >= 20


def _space_points(max_moves: int) -> dict[str, str]:
    out = {}
    for family in sorted(p.name for p in FAMILIES_DIR.iterdir() if (p / "space.py").exists()):
        space = importlib.import_module(f"kernelsearch.families.{family}.space").SPACE
        frontier, seen = [dict(space.default)], {json.dumps(space.default, sort_keys=True)}
        for _ in range(max_moves):
            nxt = []
            for point in frontier:
                for _, new in space.applicable(point):
                    key = json.dumps(new, sort_keys=True)
                    if key not in seen:
                        seen.add(key)
                        nxt.append(new)
            frontier = nxt
        for key in seen:
            out[f"{family} {key}"] = space.render(json.loads(key))
    return out


def test_space_points_one_move_away_pass():
    points = _space_points(1)
    assert len(points) > 200
    bad = {k: r for k, s in points.items() if (r := _reason(s)) is not None}
    assert not bad, list(bad.items())[:3]


@pytest.mark.slow
def test_space_points_two_moves_away_pass():
    points = _space_points(2)
    assert len(points) > 2000
    bad = {k: r for k, s in points.items() if (r := _reason(s)) is not None}
    assert not bad, list(bad.items())[:3]
