"""The problem-level checks a run makes before it searches (kernelsearch/runner.py `check_problem`, and `kernelsearch
bench`), in the command's own process: on a machine without a GPU, inputs small enough for Triton's interpreter; the
reference's outputs must be tensors, and must vary across inputs (anti-cheat check 12: a problem whose reference
output is (near) constant lets zeros or a constant pass). They judge the user's problem, never a
candidate, so they live outside the judge (kernelsearch.judge, the part a candidate attacks: tests/test_layering.py
keeps it small)."""
from __future__ import annotations

import torch

from kernelsearch.judge.correctness import flatten
from kernelsearch.judge.problem import (
    CPU_MAX_INPUT_ELEMENTS,
    OWN_ONLY,
    Problem,
    ProblemError,
    _sized_module,
    probe_inputs,
)


def _check_outputs(problem, out) -> None:
    """What a reference returns must be a tensor, or a tuple or list of them (ints, bools and None beside them are
    compared exactly): a Python float is compared exactly too, so no kernel could match it, and a dict or another
    object is not compared at all. Anything else is a ProblemError of one line."""
    where = f"problem {problem.name}: the reference's forward"
    if not isinstance(out, (torch.Tensor, tuple, list)):
        hint = " (drop the .item(): return the 0-dim tensor)" if isinstance(out, (float, int, bool)) else ""
        raise ProblemError(f"{where} returns {type(out).__name__}, not a tensor or a tuple of tensors: outputs are "
                           f"compared as tensors{hint}")
    values = flatten(out)
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor) or v is None or type(v) in (int, bool):
            continue
        hint = " (drop the .item(): return the 0-dim tensor)" if isinstance(v, float) else ""
        raise ProblemError(f"{where} returns a {type(out).__name__} whose item {i} is {type(v).__name__}: "
                           f"outputs are compared as tensors{hint}")
    if not any(isinstance(v, torch.Tensor) for v in values):
        raise ProblemError(f"{where} returns a {type(out).__name__} with no tensor in it: outputs are compared as "
                           "tensors")


VARIANCE_MAX_ELEMENTS = 1 << 22   # output values the variance check keeps per input set (every stride-th above it)


def check_problem_variance(problem, n_inputs: int = 4, rel_eps: float = 1e-6) -> tuple[bool, str]:
    """Check 12: (degenerate, message). A problem whose reference output barely changes across inputs lets zeros
    or a constant pass; flag it before searching it."""
    case = problem.cpu_timed_case()   # the largest CPU case (a 1x1 softmax is constant by nature)
    outs = []
    for seed in range(n_inputs):
        torch.manual_seed(1000 + seed)
        model = problem.module.Model(*problem.build_init_inputs(case))
        inputs = problem.build_inputs(case, 1000 + seed, "cpu")
        with torch.no_grad():
            out = model(*inputs)
        if seed == 0:
            _check_outputs(problem, out)
        tensors = [t.detach() for t in flatten(out) if isinstance(t, torch.Tensor)]
        # every stride-th value where the outputs are large: the parent keeps n_inputs float64 copies of what it
        # keeps (a level-1 problem's own case can be the one on the CPU: 41_Max_Pooling_1D's output is 3.2 GB)
        stride = max(1, -(-sum(t.numel() for t in tensors) // VARIANCE_MAX_ELEMENTS))
        flat = [t.flatten()[::stride].double() for t in tensors]
        outs.append(torch.cat(flat) if flat else torch.zeros(0, dtype=torch.float64))
        del out, inputs, model, tensors
    stack = torch.stack(outs)
    if stack.numel() == 0:
        return True, f"problem {problem.name}: the reference returns no tensor"
    spread = stack.std(dim=0).max().item() if len(outs) > 1 else 0.0
    scale = max(stack.abs().max().item(), 1e-30)
    if not (spread > rel_eps * scale):
        return True, (f"variance check: problem {problem.name}'s reference output is (near) constant across "
                      f"{n_inputs} inputs (max std {spread:.3g}, scale {scale:.3g}): zeros or a constant would pass")
    return False, f"problem {problem.name}: output varies across inputs (max std {spread:.3g})"


def interpreter_size_error(problem: Problem) -> str | None:
    """On a machine without a GPU: one line saying the problem's interpreter case is too large for Triton's
    interpreter (learned on the meta device, nothing drawn), or None. A family's CPU cases are sized for it."""
    if problem.builtin:
        return None
    case = problem.cpu_timed_case()
    where = f"problem {problem.name}"
    try:
        if case.timed:
            values = probe_inputs(problem.module, where)
        else:
            with torch.device("meta"):
                values = list(_sized_module(problem, case.params).get_inputs())
    except ProblemError:
        raise
    except Exception:   # noqa: BLE001 - sizes that cannot be learned are not refused here
        return None
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    n = sum(t.numel() for t in tensors)
    if n <= CPU_MAX_INPUT_ELEMENTS:
        return None
    mb = sum(t.numel() * t.element_size() for t in tensors) / 1e6
    why = ("its sizes are not module-level integers (batch_size = 16), so no smaller case can be derived"
           if case.name == OWN_ONLY else "no smaller case of it runs the reference")
    return (f"{where}: its inputs are {n:,} elements ({mb:,.0f} MB), too large for Triton's interpreter on this "
            f"machine without a GPU (at most {CPU_MAX_INPUT_ELEMENTS:,}); {why}: run it where there is a GPU "
            "(device: cuda), or write its sizes as module-level integers")
