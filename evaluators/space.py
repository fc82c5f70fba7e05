"""The offline search space of a family: a code template, its parameters, and named moves with idea text.

A rendered kernel carries its parameters on its first line (`# kernelsearch-space: {...}`), so a seed's
position in the space can be read back from its code alone.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable

HEADER = "# kernelsearch-space: "
_HEADER_RE = re.compile(r"^# kernelsearch-space: (\{.*\})\s*$", re.M)

# Pasted into the prologue of the GEMM-shaped templates (matmul, fused_mlp, flash_attention): each rendered
# candidate is one standalone file, so the launcher helper travels in its text.
FP32_DEPTH = '''

def _depth(stages, x):
    # fp32 tiles take twice the shared memory of the 16-bit tiles the depth was tuned for (fp32 matmul at 4
    # stages: 360 KB > the H200's 227 KB): fp32, checked for correctness rather than tuned, runs one stage deep
    return 1 if x.element_size() == 4 else stages
'''


# Pasted into the `pipelined` templates (softmax, cross_entropy): a persistent program's rows whole in registers,
# the next row's loads issued (in x's own dtype) before this row is reduced, so they are in flight meanwhile. The
# kernel then reduces `x` (fp32, masked elements -inf) for `row`; `cmask` masks the columns.
PIPELINED_ROWS = """    cols = tl.arange(0, BLOCK)
    cmask = cols < n_cols
    step = tl.num_programs(0)
    first = tl.program_id(0)
    nxt = tl.load(x_ptr + tl.cast(first, tl.int64) * x_stride + cols, mask=cmask & (first < n_rows),
                  other=float("-inf"))
    for row in range(first, n_rows, step):
        x = nxt.to(tl.float32)
        after = row + step
        nxt = tl.load(x_ptr + tl.cast(after, tl.int64) * x_stride + cols, mask=cmask & (after < n_rows),
                      other=float("-inf"))
"""

def programs_per_sm(p: dict[str, Any], persistent_grid: bool) -> int:
    """The programs-per-SM value a template renders: the parameter where a persistent grid reads it, else one
    canonical value, so kernels that differ only in an unused knob render the same text (one kernel to a search)."""
    return p["programs_per_sm"] if persistent_grid else 4


@dataclass(frozen=True)
class Move:
    """One idea: set some parameters. `when` limits it to the seeds it makes sense for."""

    title: str
    description: str
    changes: dict[str, Any]
    when: Callable[[dict], bool] = lambda p: True


@dataclass
class SearchSpace:
    params: dict[str, list[Any]]                 # every parameter and its allowed values
    default: dict[str, Any]                      # the starter
    template: Callable[[dict[str, Any]], str]    # params -> the ModelNew source, without the header
    moves: list[Move]
    tuning: list[str] = field(default_factory=list)  # knobs the coder varies across branches of one idea
    # points that can run at all (the GEMM-shaped families: the stages fit in shared memory); no move and no
    # branch lands outside
    feasible: Callable[[dict[str, Any]], bool] = lambda p: True
    _bodies: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def body(self, params: dict[str, Any]) -> str:
        """The kernel `params` render to, without the header: two parameter sets that differ only in knobs their
        variant ignores (BLOCK for the cooperative softmax, say) have the same body and are the same kernel."""
        key = json.dumps(params, sort_keys=True)
        if key not in self._bodies:
            self._bodies[key] = self.template(params)
        return self._bodies[key]

    def render(self, params: dict[str, Any]) -> str:
        self.validate(params)
        return f"{HEADER}{json.dumps(params, sort_keys=True)}\n" + self.template(params)

    def validate(self, params: dict[str, Any]) -> None:
        for k, v in params.items():
            if k not in self.params:
                raise ValueError(f"unknown search-space parameter {k!r}")
            if v not in self.params[k]:
                raise ValueError(f"value {v!r} of {k!r} is not in {self.params[k]}")

    def params_of(self, code: str) -> dict[str, Any]:
        """The parameters a rendered kernel was made from; the default for code from elsewhere."""
        m = _HEADER_RE.search(code)
        if not m:
            return dict(self.default)
        try:
            found = json.loads(m.group(1))
        except json.JSONDecodeError:
            return dict(self.default)
        params = {**self.default, **{k: v for k, v in found.items() if k in self.params}}
        return params

    def applicable(self, params: dict[str, Any]) -> list[tuple[Move, dict[str, Any]]]:
        """The moves that change `params`, with where each one lands."""
        out = []
        for move in self.moves:
            if not move.when(params):
                continue
            new = {**params, **move.changes}
            if new != params and self.feasible(new):
                out.append((move, new))
        return out

    def branches(self, params: dict[str, Any], n: int, rng: random.Random, fixed: set[str],
                 avoid: set[str] = frozenset()) -> list[dict]:
        """Up to `n` variants of one idea, distinct kernels: the idea as stated first, then tuning knobs it left
        free. A variant whose body is another's, or one in `avoid` (kernels evaluated already), is not made."""
        out = [dict(params)]
        bodies = {self.body(params)} | set(avoid)
        free = [k for k in self.tuning if k not in fixed]
        tries = 0
        while len(out) < n and free and tries < 50 * n:
            tries += 1
            k = rng.choice(free)
            v = rng.choice(self.params[k])
            cand = {**params, k: v}
            if not self.feasible(cand):
                continue
            b = self.body(cand)
            if b not in bodies:
                bodies.add(b)
                out.append(cand)
        return out
