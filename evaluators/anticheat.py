"""Anti-cheat checks against the known ways a candidate wins without doing the work (issue 5).

Static (before any process loads the candidate): `scan_source`, in evaluators/static.py, rejects torch compute
reached from host code by any route it can resolve (checks 1 and 2) and notes low-precision casts (check 10).
Run time (in the worker, see harness.Evaluator): `LaunchCounter` proves the candidate's own Triton kernels ran
during each forward (checks 1, 2); `Guard` captures the identity of the timer, synchronize and comparison
functions before the candidate is loaded and verifies them after load and after every call (check 7);
`thread_check` (check 6), `alias_check` (check 9). `check_problem_variance` flags degenerate problems (check 12).
Every reason starts with the name of its check, so a stored result says which check caught the candidate.
"""
from __future__ import annotations

import threading

import torch

from kernelsearch.evaluators.status import CandidateFailure, Status


class LaunchCounter:
    """Counts launches of Triton kernels defined in the candidate module (wraps JITFunction.run and the
    interpreter's InterpretedFunction.run). Installed before the candidate is loaded."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.wrapped: dict[type, object] = {}

    def install(self) -> None:
        classes = []
        try:
            from triton.runtime.jit import JITFunction
            classes.append(JITFunction)
        except ImportError:
            pass
        try:
            from triton.runtime.interpreter import InterpretedFunction
            classes.append(InterpretedFunction)
        except ImportError:
            pass
        counts = self.counts
        for cls in classes:
            if cls in self.wrapped or "run" not in cls.__dict__:
                continue
            original = cls.__dict__["run"]

            def run(self, *args, _original=original, **kwargs):
                if not kwargs.get("warmup", False):
                    mod = getattr(getattr(self, "fn", None), "__module__", None) or "?"
                    counts[mod] = counts.get(mod, 0) + 1
                return _original(self, *args, **kwargs)

            run.__ks_launch_counter__ = True
            cls.run = run
            self.wrapped[cls] = run

    def launches(self, module_name: str) -> int:
        return self.counts.get(module_name, 0)


class Guard:
    """Identity check: the objects in `targets` (name -> (owner, attribute)), captured when the guard is made, must
    be the very same objects later. The runner guards what it relies on and the timing and comparison functions a
    cheat would reach for; advisory there (the judge, in another process, relies on none of them)."""

    def __init__(self, targets: dict) -> None:
        self.targets = dict(targets)
        self.ids = {k: _identity(owner, attr) for k, (owner, attr) in self.targets.items()}

    def changed(self) -> list[str]:
        return [k for k, (owner, attr) in self.targets.items() if _identity(owner, attr) != self.ids[k]]


def _identity(owner, attr):
    obj = owner.__dict__.get(attr, getattr(owner, attr, None)) if hasattr(owner, "__dict__") else getattr(owner, attr)
    return id(obj), obj


def thread_check(before: int, when: str, stage: str) -> None:
    """Check 6: no thread the candidate started may outlive its call (work the timer would not wait for)."""
    after = threading.active_count()
    if after > before:
        names = [t.name for t in threading.enumerate()][-(after - before):]
        raise CandidateFailure(Status.rejected, f"thread check: {after - before} thread(s) still running after "
                               f"{when} returned ({', '.join(names)}); all work must finish inside the call",
                               stage=stage)


def alias_check(out, inputs: list, when: str, stage: str) -> None:
    """Check 9: an output must not share storage with an input (a view of the input, or the input itself)."""
    from kernelsearch.evaluators.correctness import flatten

    ptrs = {}
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor) and t.numel():
            ptrs[t.untyped_storage().data_ptr()] = i
    for j, o in enumerate(flatten(out)):
        if isinstance(o, torch.Tensor) and o.numel():
            try:
                p = o.untyped_storage().data_ptr()
            except Exception:  # noqa: BLE001 - a lazy tensor without storage is refused by compare()
                continue
            if p in ptrs:
                raise CandidateFailure(Status.rejected, f"aliasing check: output {j} of {when} shares storage with "
                                       f"input {ptrs[p]} (a view of the input, not a result of its own)",
                                       stage=stage)


def check_problem_variance(problem, n_inputs: int = 4, rel_eps: float = 1e-6) -> tuple[bool, str]:
    """Check 12: (degenerate, message). A problem whose reference output barely changes across inputs lets zeros
    or a constant pass; flag it before searching it."""
    from kernelsearch.evaluators.correctness import flatten

    case = problem.cpu_timed_case()   # the largest CPU case (a 1x1 softmax is constant by nature)
    outs = []
    for seed in range(n_inputs):
        torch.manual_seed(1000 + seed)
        model = problem.module.Model(*problem.build_init_inputs(case))
        inputs = problem.build_inputs(case, 1000 + seed, "cpu")
        with torch.no_grad():
            out = model(*inputs)
        flat = [t.detach().double().flatten() for t in flatten(out) if isinstance(t, torch.Tensor)]
        outs.append(torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64))
    stack = torch.stack(outs)
    if stack.numel() == 0:
        return True, f"problem {problem.name}: the reference returns no tensor"
    spread = stack.std(dim=0).max().item() if len(outs) > 1 else 0.0
    scale = max(stack.abs().max().item(), 1e-30)
    if not (spread > rel_eps * scale):
        return True, (f"variance check: problem {problem.name}'s reference output is (near) constant across "
                      f"{n_inputs} inputs (max std {spread:.3g}, scale {scale:.3g}): zeros or a constant would pass")
    return False, f"problem {problem.name}: output varies across inputs (max std {spread:.3g})"
