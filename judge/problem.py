"""One contract for every problem: KernelBench's.

A problem is a reference `Model(nn.Module)` with `get_init_inputs()` and `get_inputs()`; a candidate is one
Python source file defining `ModelNew` with the same constructor and `forward`. A built-in family adds what
KernelBench lacks (a `spec.py` beside its `reference.py`): several shape cases, per-dtype tolerances, FLOP and
byte counts, a starter kernel and the offline search space.

The module is long because it loads both forms behind that one contract: a family's folder, and a KernelBench
file, whose extra shape cases are derived here from its module-level sizes (the sizes its get_inputs reads, and
the rest of its integers where the reference still runs with them halved).
"""
from __future__ import annotations

import ast
import math
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from kernelsearch.judge.family import Case, FamilySpec

# The built-in families are data to the judge: it reads a family's reference.py, spec.py and starter.py by path, as it
# reads any KernelBench file, and never imports the families room (kernelsearch.families, whose search spaces write
# kernels). The folder sits beside this room's, in the source tree and in an installed package alike.
FAMILIES_DIR = Path(__file__).resolve().parent.parent / "families"

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}

# (atol, rtol) per dtype: fp32 about 1e-4 relative, bf16 about 1e-2 (docs/design.md section 3; issue 4).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-5, 1e-4),
    "float16": (1e-3, 2e-3),
    "bfloat16": (1e-2, 1.6e-2),
    "float64": (1e-10, 1e-8),
}


class ProblemError(Exception):
    """The problem itself (not a candidate) cannot be loaded or is malformed."""


@dataclass
class Problem:
    name: str
    reference_source: str
    cases: list[Case]
    tolerances: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    case_tolerance: Callable[[Case], tuple[float, float]] | None = None   # a family's per-case rule (FamilySpec)
    make_inputs: Callable[[Case, torch.Generator], list] | None = None   # None: the module's get_inputs()
    init_inputs: Callable[[Case], list] | None = None                  # None: the module's get_init_inputs()
    flops: Callable[[Case], float] | None = None
    bytes_moved: Callable[[Case], float] | None = None
    starter_source: str | None = None
    # the family package (its SPACE, the offline search space): set by kernelsearch.families.load_problem for the
    # rooms above the judge; the judge never sets or reads it (a built-in family is `builtin`)
    family: types.ModuleType | None = None
    stability: tuple[str, ...] = ()          # stability inputs checked (harness.stability_inputs), families only
    stability_tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    ref: dict[str, str] = field(default_factory=dict)  # how a worker finds this problem again: JSON-safe
    _module: types.ModuleType | None = None

    @property
    def builtin(self) -> bool:
        """A built-in family (its own inputs, cases and tolerances), not a KernelBench file."""
        return "builtin" in self.ref

    # -- the reference module -------------------------------------------------------------------------------
    @property
    def module(self) -> types.ModuleType:
        """The reference, executed once. A file that does not parse, raises while loading or lacks one of the
        contract's names is a ProblemError of one line naming the file, never the loader's traceback."""
        if self._module is None:
            name, filename = f"ks_reference_{self.name}", self.ref.get("file")
            where = f"problem file {filename}" if filename else f"problem {self.name!r}"
            try:
                module = load_source_module(self.reference_source, name, filename=filename)
            except SyntaxError as err:
                sys.modules.pop(name, None)
                raise ProblemError(f"{where}: syntax error at line {err.lineno}: {err.msg}") from None
            except (Exception, SystemExit) as err:   # noqa: BLE001 - any failure of the file is the file's
                sys.modules.pop(name, None)
                raise ProblemError(f"{where}: loading it raised {describe_exception(err)}") from None
            for attr in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(module, attr):
                    sys.modules.pop(name, None)
                    raise ProblemError(f"{where}: the reference defines no {attr} (a problem defines Model, "
                                       "get_inputs and get_init_inputs)")
            self._module = module
        return self._module

    def build_inputs(self, case: Case, seed: int, device: str) -> list:
        """The case's inputs, drawn on `device` itself: drawing the GPU cases on one CPU thread and copying
        them over took most of a correctness stage on an H200 (about 9 of 14 s per softmax candidate)."""
        dev = torch.device(device)
        with dev:   # factory functions without a device (randn, arange, ...) make their tensors there
            gen = torch.Generator(device=dev).manual_seed(seed)
            if self.make_inputs is not None:
                values = self.make_inputs(case, gen)
            else:  # a KernelBench file draws from the global RNG
                torch.manual_seed(seed)
                values = list(self.module.get_inputs())
        return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]

    def build_init_inputs(self, case: Case) -> list:
        if self.init_inputs is not None:
            return list(self.init_inputs(case))
        return list(self.module.get_init_inputs())

    def tolerance(self, case: Case | str) -> tuple[float, float]:
        """(atol, rtol) of a case (the family's per-case rule where it has one) or of a dtype."""
        if isinstance(case, Case):
            return self.case_tolerance(case) if self.case_tolerance else self.tolerance(case.dtype)
        return self.tolerances.get(case, DEFAULT_TOLERANCES.get(case, (1e-5, 1e-4)))

    def stability_tolerance(self, case: Case | str) -> tuple[float, float]:
        """Looser than the plain tolerance, stated per problem: by default ten times it."""
        dtype = case.dtype if isinstance(case, Case) else case
        if dtype in self.stability_tolerances:
            return self.stability_tolerances[dtype]
        atol, rtol = self.tolerance(case)
        return atol * 10, rtol * 10

    @property
    def timed_case(self) -> Case:
        timed = [c for c in self.cases if c.timed]
        return timed[0] if timed else self.cases[0]

    def cases_for(self, mode: str) -> list[Case]:
        """The correctness cases for a device mode: every case on a GPU, the small ones on the CPU."""
        if mode == "cpu":
            small = [c for c in self.cases if c.cpu]
            return small or self.cases[:1]
        return list(self.cases)

    def cpu_timed_case(self) -> Case:
        """On the CPU interpreter the timed case is the largest CPU case (the real one would take hours)."""
        return self.cases_for("cpu")[-1]


def load_source_module(source: str, name: str, filename: str | None = None) -> types.ModuleType:
    """Execute `source` as a fresh module named `name` (registered in sys.modules so Triton can find it)."""
    module = types.ModuleType(name)
    module.__file__ = filename or f"<{name}>"
    sys.modules[name] = module
    code = compile(source, module.__file__, "exec")
    exec(code, module.__dict__)  # noqa: S102 - the reference is trusted; candidates only run in workers
    return module


def describe_exception(err: BaseException, limit: int = 300) -> str:
    """`Type: first line of its message`, at most `limit` characters, whatever the exception carries (a message
    that is not text, or a __str__ that itself raises, still gives a line)."""
    try:
        text = str(err)
    except Exception:   # noqa: BLE001 - a broken __str__ is the exception's, not ours
        text = "(its message cannot be printed)"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = f"{type(err).__name__}: {first}" if first else type(err).__name__
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _call_listing(fn: Callable[[], Any], what: str) -> list:
    """Call a problem's get_inputs / get_init_inputs; anything it raises, or a result that is not a list of
    inputs, is a ProblemError naming `what`."""
    try:
        values = fn()
    except (Exception, SystemExit) as err:   # noqa: BLE001 - any failure of the file is the file's
        raise ProblemError(f"{what} raised {describe_exception(err)}") from None
    if not isinstance(values, (list, tuple)):
        raise ProblemError(f"{what} returned {type(values).__name__}, not a list of inputs")
    return list(values)


def family_names() -> list[str]:
    """The built-in families: the folders of families/ with a spec.py."""
    return sorted(p.name for p in FAMILIES_DIR.iterdir() if (p / "spec.py").exists())


def family_spec_module(name: str) -> types.ModuleType:
    """A family's spec.py, executed once from its path (a module of the judge's own, never the families package)."""
    key = f"ks_family_spec_{name}"
    if key in sys.modules:
        return sys.modules[key]
    path = FAMILIES_DIR / name / "spec.py"
    try:
        return load_source_module(path.read_text(), key, filename=str(path))
    except BaseException:
        sys.modules.pop(key, None)
        raise


def load_family(name: str) -> Problem:
    """A built-in family as a Problem: its folder's reference.py, spec.py's SPEC (a FamilySpec) and starter.py, read
    by path. Its search space is not the judge's: kernelsearch.families.load_problem adds it."""
    if name not in family_names():
        raise ProblemError(f"unknown problem {name!r}: built-in families are {', '.join(family_names())}")
    folder = FAMILIES_DIR / name
    try:
        module = family_spec_module(name)
    except (ValueError, TypeError) as err:   # FamilySpec's checks of what the spec declares
        raise ProblemError(f"family {name!r}: spec.py: {err}") from None
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, FamilySpec):
        raise ProblemError(f"family {name!r}: spec.py's SPEC is {type(spec).__name__}, not a FamilySpec(...)")
    if not (folder / "starter.py").is_file():
        raise ProblemError(f"family {name!r}: no starter.py in {folder}")
    return Problem(
        name=name,
        reference_source=(folder / "reference.py").read_text(),
        cases=list(spec.cases),
        tolerances={**DEFAULT_TOLERANCES, **spec.tolerances},
        case_tolerance=spec.case_tolerance,
        make_inputs=spec.make_inputs,
        init_inputs=spec.init_inputs,
        flops=spec.flops,
        bytes_moved=spec.bytes_moved,
        starter_source=(folder / "starter.py").read_text(),
        stability=tuple(spec.stability),
        stability_tolerances=dict(spec.stability_tolerances),
        ref={"builtin": name},
    )


def load_file(path: str | Path) -> Problem:
    """A KernelBench problem file, used as it is. Its inputs are never drawn in full here: their dtypes and sizes
    are learned on the meta device (`probe_inputs`). Where its sizes are module-level integers (`batch_size = 16`),
    correctness is also checked at smaller, odd sizes, and interpreter-sized ones on a machine without a GPU
    (`derive_cases`); the timed case is always the problem's own. Otherwise its one case is named `own-only`."""
    p = Path(path).resolve()
    if not p.is_file():
        raise ProblemError(f"problem file not found: {p}")
    try:
        source = p.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ProblemError(f"problem file {p}: cannot be read: {describe_exception(err)}") from None
    problem = Problem(name=p.stem, reference_source=source, cases=[], ref={"file": str(p)})
    sample = probe_inputs(problem.module, f"problem file {p}")
    _call_listing(problem.module.get_init_inputs, f"problem file {p}: get_init_inputs()")
    dtypes = [str(t.dtype).removeprefix("torch.") for t in sample if isinstance(t, torch.Tensor)]
    dtype = dtypes[0] if dtypes else "float32"
    problem.cases = derive_cases(problem, dtype)
    if len(problem.cases) > 1:
        sized = _SizedModules(problem)
        problem.make_inputs, problem.init_inputs = sized.inputs, sized.init_inputs
    return problem


def probe_inputs(module: types.ModuleType, where: str) -> list:
    """The module's get_inputs() drawn on the meta device (shapes and dtypes, no memory: a level-1 problem's inputs
    are 6-8 GB). A get_inputs() the meta device cannot run (a value read back with .item(), a tensor made on an
    explicit device) is called for real, as before; anything it raises then is a ProblemError naming `where`."""
    torch.manual_seed(0)
    try:
        with torch.device("meta"):
            values = module.get_inputs()
        if isinstance(values, (list, tuple)) and all(not isinstance(v, torch.Tensor) or v.is_meta for v in values):
            return list(values)
    except Exception:   # noqa: BLE001 - the meta device cannot run it: the real call below says what is wrong
        pass
    torch.manual_seed(0)
    return _call_listing(module.get_inputs, f"{where}: get_inputs()")


# -- more than one shape for a KernelBench file ----------------------------------------------------------------
MIN_SIZE = 8            # module-level integers at least this large are sizes (smaller ones: dims, kernel sizes, ...)
CPU_BUDGETS = {"cpu_small": 1024, "cpu": 16384}   # input elements of the interpreter-sized cases
OWN_ONLY = "own-only"   # the case name of a file whose sizes are not module-level integers
# the largest inputs run under Triton's interpreter (a machine without a GPU): a 1M-element elementwise call took
# 2.8 s there (relu_scale_kernel.py, BLOCK 1024; 4M: 7.4 s), and an evaluation makes about 15 calls, so past this a
# candidate cannot finish inside the 300 s timeout and every one would be charged a timeout
CPU_MAX_INPUT_ELEMENTS = 1 << 20


def module_sizes(source: str) -> dict[str, int]:
    """The file's module-level `NAME = <int>` assignments (each name assigned once) whose value is a size."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    seen: dict[str, list] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            seen.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            seen.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign,)) and isinstance(node.target, ast.Name):
            seen.setdefault(node.target.id, []).extend([None, None])   # changed later: not a plain constant
    values = {name: _const_int(v[0]) if len(v) == 1 else None for name, v in seen.items()}
    return {name: n for name, n in values.items() if n is not None and n >= MIN_SIZE}


_INT_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b if b else None, ast.LShift: lambda a, b: a << b if 0 <= b < 64 else None,
            ast.Pow: lambda a, b: a ** b if 0 <= b < 64 else None}


def _const_int(node) -> int | None:
    """An int literal or arithmetic of int literals (`4096 * 4`, `1 << 20`), else None."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        a, b = _const_int(node.left), _const_int(node.right)
        return None if a is None or b is None else _INT_OPS[type(node.op)](a, b)
    return None


def sized_source(source: str, sizes: dict[str, int]) -> str:
    """The file's source with its module-level size integers replaced by `sizes`."""
    tree = ast.parse(source)
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id in sizes and _const_int(node.value) is not None:
            node.value = ast.Constant(sizes[target.id])
    return ast.unparse(tree)


def _odd(n: int) -> int:
    return n if n % 2 else n + 1


def derive_cases(problem: Problem, dtype: str) -> list[Case]:
    """The file's own case (timed), and where its sizes are module-level integers: one at about half the sizes,
    each odd, and interpreter-sized ones (CPU_BUDGETS input elements at most), odd too. A derived case is kept only
    if the reference runs on it (checked on the meta device, or for real where that cannot run and it is small);
    the cheapest come first."""
    own = module_sizes(problem.reference_source)
    if not own:
        return [Case(OWN_ONLY, {}, dtype=dtype, timed=True, cpu=True)]
    derived: list[Case] = []
    seen = {tuple(sorted(own.items()))}

    def keep(name: str, sizes: dict[str, int], cpu: bool) -> bool:
        key = tuple(sorted(sizes.items()))
        if key in seen:
            return True
        if _reference_runs(problem, sizes, cpu):
            seen.add(key)
            derived.append(Case(name, sizes, dtype=dtype, cpu=cpu))
            return True
        return False

    # every size first; where the reference refuses that (a kernel size of 8 with padding 4 halved to 4: torch wants
    # padding <= kernel / 2), only the sizes get_inputs reads, the module's own arguments (get_init_inputs) kept
    scopes = [set(own)]
    shapes = _input_size_names(problem.reference_source) & set(own)
    if shapes and shapes != set(own):
        scopes.append(shapes)

    def shrunk(scope: set[str], budget: int) -> dict[str, int]:
        sizes = dict(own)
        for _ in range(64):
            n = _input_elements(problem, sizes)
            if n is None or n <= budget or all(sizes[k] <= 3 for k in scope):
                break
            sizes = {k: max(3, v // 2) if k in scope else v for k, v in sizes.items()}
        return {k: _odd(v) if k in scope else v for k, v in sizes.items()}

    for name, budget in CPU_BUDGETS.items():
        any(keep(name, shrunk(scope, budget), cpu=True) for scope in scopes)
    any(keep("odd", {k: _odd(max(3, v // 2)) if k in scope else v for k, v in own.items()}, cpu=False)
        for scope in scopes)
    own_case = Case("own", dict(own), dtype=dtype, timed=True, cpu=not any(c.cpu for c in derived))
    return derived + [own_case]


def _input_size_names(source: str) -> set[str]:
    """The module-level names that the file's get_inputs reads (its inputs' sizes, not the module's arguments)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return set()


def _sized_module(problem: Problem, sizes: dict[str, int]) -> types.ModuleType:
    name = f"ks_reference_{problem.name}__" + "_".join(f"{k}{v}" for k, v in sorted(sizes.items()))
    return load_source_module(sized_source(problem.reference_source, sizes), name, filename=problem.ref.get("file"))


def _input_elements(problem: Problem, sizes: dict[str, int]) -> int | None:
    """How many elements the inputs have at `sizes` (on the meta device), or None where that cannot be learned."""
    try:
        module = _sized_module(problem, sizes)
        with torch.device("meta"):
            values = module.get_inputs()
        return sum(v.numel() for v in values if isinstance(v, torch.Tensor))
    except Exception:   # noqa: BLE001 - a reference that cannot be sized this way keeps its own case only
        return None


def _reference_runs(problem: Problem, sizes: dict[str, int], small: bool) -> bool:
    """Whether the reference Model runs on the inputs drawn at `sizes` (divisibility, head counts, ...)."""
    try:
        module = _sized_module(problem, sizes)
    except Exception:   # noqa: BLE001
        return False
    for device in ("meta", "cpu") if small else ("meta",):
        try:
            torch.manual_seed(0)
            with torch.device(device):
                model = problem.module.Model(*module.get_init_inputs())
                out = model(*module.get_inputs())
            return out is not None
        except Exception:   # noqa: BLE001 - the meta device cannot run every op: a small case is tried for real
            continue
    return False


class _SizedModules:
    """A derived case's get_inputs / get_init_inputs: the file re-executed with its sizes replaced, once per case."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.modules: dict[str, types.ModuleType] = {}

    def module(self, case: Case) -> types.ModuleType:
        if case.name not in self.modules:
            self.modules[case.name] = _sized_module(self.problem, case.params) if not case.timed \
                else self.problem.module
        return self.modules[case.name]

    def inputs(self, case: Case, gen: torch.Generator) -> list:
        torch.manual_seed(gen.initial_seed())   # a KernelBench file draws from the global RNG
        return list(self.module(case).get_inputs())

    def init_inputs(self, case: Case) -> list:
        return list(self.module(case).get_init_inputs())


def parse_family_at(spec: str) -> tuple[str, dict[str, Any], str] | None:
    """`rmsnorm@rows=4096,cols=4096,dtype=bfloat16` -> (family, params, dtype): a family at a shape of a model's
    (kernelsearch.model extracts them); None for a spec without `@`. A malformed one is a ProblemError."""
    if "@" not in spec:
        return None
    name, _, rest = spec.partition("@")
    params: dict[str, Any] = {}
    dtype = "float32"
    for piece in filter(None, rest.split(",")):
        key, eq, value = piece.partition("=")
        if not eq or not key.strip():
            raise ProblemError(f"problem {spec!r}: {piece!r} is not key=value "
                               "(rmsnorm@rows=64,cols=4096,dtype=float32)")
        key, value = key.strip(), value.strip()
        if key == "dtype":
            if value not in DTYPES:
                raise ProblemError(f"problem {spec!r}: dtype {value!r} is not one of {', '.join(DTYPES)}")
            dtype = value
            continue
        try:
            params[key] = int(value)
        except ValueError:
            try:
                params[key] = float(value)
            except ValueError:
                raise ProblemError(f"problem {spec!r}: {key}={value!r} is not a number") from None
    if not params:
        raise ProblemError(f"problem {spec!r}: no shape after @")
    return name.strip(), params, dtype


MODEL_CASE_CPU_ELEMENTS = 1 << 18   # a model's case this small is also run by the interpreter on the CPU


def family_at(name: str, params: dict[str, Any], dtype: str) -> Problem:
    """A built-in family timed at a model's real shape (`params`, `dtype`), after its own small and odd cases; run on
    the CPU too when small. Its starter here is starter.py; kernelsearch.families.family_at starts round 0 from the
    space's point for that shape (`default_for`)."""
    problem = load_family(name)
    want = set(problem.timed_case.params)
    if set(params) - want or not set(params) >= {k for k in want if k not in ("batch",)}:
        raise ProblemError(f"problem {name}@...: family {name!r} takes the sizes {', '.join(sorted(want))}, "
                           f"not {', '.join(sorted(params))}")
    elements = math.prod(int(v) for v in params.values() if isinstance(v, int))
    case = Case("model", dict(params), dtype=dtype, timed=True, cpu=elements <= MODEL_CASE_CPU_ELEMENTS)
    problem.cases = [c for c in problem.cases if not c.timed] + [case]
    problem.ref = {"builtin": name, "shape": dict(params), "dtype": dtype}
    return problem


def load_problem(spec: str | dict) -> Problem:
    """`softmax` (a built-in family), `softmax@rows=..,cols=..,dtype=..` (a family at a model's shape), a path to a
    KernelBench file, or a worker's JSON ref."""
    if isinstance(spec, dict):
        if "builtin" in spec and "shape" in spec:
            return family_at(spec["builtin"], spec["shape"], spec.get("dtype", "float32"))
        if "builtin" in spec:
            return load_family(spec["builtin"])
        if "file" in spec:
            return load_file(spec["file"])
        raise ProblemError(f"bad problem ref {spec!r}")
    if spec.endswith(".py") or "/" in spec:
        return load_file(spec)
    at = parse_family_at(spec)
    if at is not None:
        return family_at(*at)
    return load_family(spec)


