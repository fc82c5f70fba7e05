"""The typed contract of a built-in family: what its `spec.py` declares beyond the KernelBench reference.

A family is one folder under families/: `reference.py` (the KernelBench problem), `spec.py` (a
`SPEC = FamilySpec(...)`), `space.py` (the offline search space, `SPACE`), `starter.py` (the starter kernel, the
space's default rendered) and `wrong/` (fixtures that must fail). problem.load_family reads them into a Problem.
A shape case (`Case`) lives here, below problem.py, which imports this module.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

@dataclass(frozen=True)
class Case:
    """One shape case. `timed` marks the case that is timed; `cpu` marks one small enough for the interpreter."""

    name: str
    params: dict[str, Any]
    dtype: str = "float32"
    timed: bool = False
    cpu: bool = False

    def describe(self) -> str:
        dims = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.name}[{dims}; {self.dtype}]"


# the stability inputs a family is checked with unless its spec names others (harness.stability_inputs)
STABILITY = ("large", "tiny", "mixed", "equal")


@dataclass(frozen=True)
class FamilySpec:
    """Shape cases, inputs, tolerances and the roofline's counts of one family."""

    cases: Sequence[Case]                              # the timed case and odd sizes for correctness
    make_inputs: Callable[[Case, torch.Generator], list]   # a case's inputs, drawn from the generator
    init_inputs: Callable[[Case], list]                # the constructor arguments of Model and ModelNew
    flops: Callable[[Case], float]                     # the work of a case, for the roofline
    bytes_moved: Callable[[Case], float]               # the fewest bytes a case must move
    # (atol, rtol) per dtype, over problem.DEFAULT_TOLERANCES
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # (atol, rtol) of one case where its dtype's pair is not enough (matmul: an fp32 dot's rounding error grows with
    # K); None: every case takes its dtype's
    case_tolerance: Callable[[Case], tuple[float, float]] | None = None
    stability: tuple[str, ...] = STABILITY             # the stability inputs checked
    # per dtype; by default ten times the plain tolerance (Problem.stability_tolerance)
    stability_tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.cases:
            raise ValueError("FamilySpec.cases is empty: a family needs at least its timed case")
        names = [c.name for c in self.cases]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"FamilySpec.cases: case names repeated: {', '.join(repeated)}")
        if not any(c.timed for c in self.cases):
            raise ValueError("FamilySpec.cases: no case is marked timed=True")
        if self.case_tolerance is not None and not callable(self.case_tolerance):
            raise TypeError(f"FamilySpec.case_tolerance is {type(self.case_tolerance).__name__}, not a function")
        for name in ("make_inputs", "init_inputs", "flops", "bytes_moved"):
            if not callable(getattr(self, name)):
                raise TypeError(f"FamilySpec.{name} is {type(getattr(self, name)).__name__}, not a function")
        for name in ("tolerances", "stability_tolerances"):
            for dtype, pair in getattr(self, name).items():
                if not (isinstance(pair, tuple) and len(pair) == 2):
                    raise ValueError(f"FamilySpec.{name}[{dtype!r}] is {pair!r}, not an (atol, rtol) pair")
