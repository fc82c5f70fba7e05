"""The offline search space of a family: a code template, its parameters, and named moves with idea text; and the
template kit every family's templates are written with.

A rendered kernel carries its parameters on its first line (`# kernelsearch-space: {...}`), so a seed's
position in the space can be read back from its code alone.

Feasibility: a space carries its family's shape cases and a model of what an H200 (sm_90) can run (`limits`:
registers a thread holds, shared memory of tiles and stages, a launcher's own refusal), and a point is feasible
only where no case refuses it. No move, no branch and (through `refusal`, which reads a kernel back from its
code) no evaluation lands on a point the model refuses. The models and their calibration against sm_90
compiles: bench/feasibility.py.

Starting points: a family's default is tuned at its timed case. At another shape (a model's, a matched KernelBench
problem's) round 0 starts from `default_for(case, cases)`: the family's `shaped` rule, where it has one and the
feasibility model accepts its point at every case (`row_tile` and `packed_rows` size whole-row tiles for it).

The kit, one scheme for every family: a template is Python source with `$NAME` placeholders (string.Template
syntax) filled by `fill`. A placeholder alone on its line takes a snippet (several lines of code, written at any
indentation) and sets it at that line's indentation; the snippets shared by several families live here
(FP32_DEPTH, PIPELINED_ROWS, `num_programs`), as do the small pieces of text the templates compute
(`tl_exp`, `tl_log`, `evict`).
"""
from __future__ import annotations

import json
import math
import random
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from string import Template
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:   # (an annotation only: problem.py imports torch)
    from kernelsearch.judge.problem import Case

HEADER = "# kernelsearch-space: "
_HEADER_RE = re.compile(r"^# kernelsearch-space: (\{.*\})\s*$", re.M)

# -- the template kit ---------------------------------------------------------------------------------------------

_ALONE = re.compile(r"^([ \t]*)\$(\w+)[ \t]*$", re.M)   # a placeholder alone on its line: a snippet goes there


def fill(template: str, values: Mapping[str, Any]) -> str:
    """`template` with every `$NAME` replaced by `values[NAME]` (string.Template syntax: `${NAME}` inside a word,
    `$$` for a dollar sign). A placeholder alone on its line is replaced by its value dedented and set at that
    line's indentation, so a snippet of several lines lands where it is pasted; snippets may hold placeholders
    of their own, filled in turn. A placeholder with no value raises KeyError naming it."""

    def paste(m: re.Match) -> str:
        indent, name = m.group(1), m.group(2)
        if name not in values:
            raise KeyError(f"template placeholder ${name} has no value")
        lines = str(values[name]).split("\n")
        while lines and not lines[0].strip():    # blank lines around a snippet are the template's to place
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        return textwrap.indent(textwrap.dedent("\n".join(lines)), indent)

    for _ in range(8):   # snippets inside snippets: a few levels at most
        pasted = _ALONE.sub(paste, template)
        if pasted == template:
            break
        template = pasted
    try:
        return Template(template).substitute(values)
    except KeyError as e:
        raise KeyError(f"template placeholder ${e.args[0]} has no value") from None


def preset(template: str, values: Mapping[str, Any]) -> str:
    """`template` with the placeholders named in `values` filled now and the others left for `fill`: one body
    reused with some knobs of its own (cross_entropy's online sweep as the pipelined variant's fallback)."""
    return Template(template).safe_substitute(values)


def tl_exp(x: str, base2: bool) -> str:
    """Triton text for e**x: with `base2`, exp2 of x pre-scaled by log2(e), one MUFU.EX2 instruction (the template
    defines LOG2E)."""
    return f"tl.exp2(({x}) * LOG2E)" if base2 else f"tl.exp({x})"


def tl_log(x: str, base2: bool) -> str:
    """Triton text for ln(x): with `base2`, log2 scaled by ln(2) (the template defines LN2)."""
    return f"(tl.log2({x}) * LN2)" if base2 else f"tl.log({x})"


def evict(policy: str, on: bool) -> str:
    """The cache hint a load takes, `, eviction_policy="..."`, or nothing: `evict_first` for data that streams
    through once, `evict_last` for data every row reuses (a weight, cos and sin)."""
    return f', eviction_policy="{policy}"' if on else ""


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
PIPELINED_ROWS = """
cols = tl.arange(0, BLOCK)
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

_NUM_PROGRAMS = '''
_SMS = {}


def _num_programs(x):
    # persistent grids: $HOW (the interpreter has no SMs; 4 keeps it quick)
    if x.device.type != "cuda":
        return 4
    idx = x.device.index or 0
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx] * $PER_SM
'''


def num_programs(per_sm: int, how: str = "a few programs per SM") -> str:
    """The persistent grids' launcher helper `_num_programs(x)`, pasted into the epilogue of every template with a
    persistent grid: `per_sm` programs per SM of x's device (4 in all on the interpreter, which has no SMs);
    `how` is what its comment calls that count."""
    return fill(_NUM_PROGRAMS, {"PER_SM": per_sm, "HOW": how})


def programs_per_sm(p: dict[str, Any], persistent_grid: bool) -> int:
    """The programs-per-SM value a template renders: the parameter where a persistent grid reads it, else one
    canonical value, so kernels that differ only in an unused knob render the same text (one kernel to a search)."""
    return p["programs_per_sm"] if persistent_grid else 4


# -- feasibility on the H200 (sm_90) ---------------------------------------------------------------------------

SM90_SHARED_MAX = 232448   # bytes of shared memory one program may opt into on an H100/H200 (227 KB)
SM90_THREAD_REGISTERS = 255


# fp32 values a thread can hold in registers without spilling: three quarters of what ptxas gives it (255 registers
# up to 8 warps, 65536 / threads past that: 128 at 16 warps, 64 at 32), the rest being pointers, masks, offsets
# and loop state. Calibrated on sm_90 compiles (bench/feasibility.py; rmsnorm `single`: 192 values compiled to at
# most 248 registers and no spill, 256 spilled at every case; 160 at 16 warps and 80 at 32 spilled, 96 and 48 did
# not)


def thread_registers(num_warps: int) -> int:
    """The registers ptxas lets each thread of a num_warps program use on sm_90 (64K a block, 255 a thread)."""
    return min(SM90_THREAD_REGISTERS, 65536 // (num_warps * 32))


def held_budget(num_warps: int) -> int:
    """fp32 values a thread holds without spilling: three quarters of its registers, rounded up (192 of 255)."""
    return -(-thread_registers(num_warps) * 3 // 4)


def per_thread(elements: int, num_warps: int) -> int:
    """Elements of a block each thread holds: the block spread over num_warps x 32 threads (at least one)."""
    return max(elements // (num_warps * 32), 1)


def next_pow2(n: int) -> int:
    """triton.next_power_of_2, as the launchers size a whole row's block."""
    return 1 << max(int(n) - 1, 0).bit_length()


ELEMENT_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}


def row_tile(cols: int, dtype: str, program_bytes: int, thread_bytes: int, warps: Sequence[int],
             max_rows: int = 8) -> tuple[int, int, int]:
    """(BLOCK, ROWS, num_warps) for whole rows of `cols` held in registers, one tile a program: BLOCK the row's next
    power of two (as the launchers size it); ROWS rows packed so that a program reads about `program_bytes` of x
    (at most `max_rows`, at least one); warps so that each thread holds about `thread_bytes` of them, the nearest
    of `warps` (the family's values). A family passes the ratios its tuned default has at its timed case, so a
    short row gets the tile's bytes and threads the default had, not a 32-warp program for 512 elements."""
    size = ELEMENT_BYTES.get(dtype, 4)
    block = max(next_pow2(cols), 16)
    rows = max(1, min(max_rows, program_bytes // (block * size)))
    want = max(1, block * rows * size // (32 * thread_bytes))
    return block, rows, min(warps, key=lambda w: (abs(w.bit_length() - want.bit_length()), w))


def packed_rows(case: Case, cases: Sequence[Case], base: dict[str, Any], limits: Callable, program_bytes: int,
                thread_bytes: int, warps: Sequence[int], block_values: Sequence[int]) -> dict[str, Any] | None:
    """The whole-rows tile of `row_tile` at `case`, as parameters over `base` (`ROWS`, `num_warps`, and `BLOCK`
    the row's next power of two within `block_values`), that the family's `limits` accept at every one of `cases`
    (one kernel runs them all: rows packed for a narrow case must not break a wide one, nor spill there on too few
    warps). Of 8, 4, 2 or 1 rows, each on the fewest warps from its tile's up that fit: the one whose threads hold
    the most of `case`'s elements, up to the `thread_bytes` aimed at; among those that reach it, the one nearest
    `program_bytes` a program; then the fewest warps. None where nothing fits."""
    best, score = None, None
    target = max(1, thread_bytes // ELEMENT_BYTES.get(case.dtype, 4))
    for most in (8, 4, 2, 1):
        block, rows, w0 = row_tile(case.params["cols"], case.dtype, program_bytes, thread_bytes, warps, most)
        for w in [w for w in warps if w >= w0]:
            point = {**base, "ROWS": rows, "num_warps": w,
                     "BLOCK": min(max(block, block_values[0]), block_values[-1])}
            if all(limits(point, c) is None for c in cases):
                held = min(target, rows * block / (32 * w))
                near = -abs(math.log2(rows * block * ELEMENT_BYTES.get(case.dtype, 4) / program_bytes))
                key = (held, near if held >= target else 0.0, -w)
                if score is None or key > score:
                    best, score = point, key
                break
    return best


def register_limit(held: int, num_warps: int, what: str) -> str | None:
    """The reason a kernel holding `held` fp32 values a thread on num_warps warps spills (`what` says which), or
    None."""
    budget = held_budget(num_warps)
    if held > budget:
        return (f"{what}: {held} fp32 values a thread, over the {budget} that fit in its "
                f"{thread_registers(num_warps)} registers without spilling")
    return None


def shared_limit(need: Callable[[dict[str, Any]], int]) -> Callable[[dict[str, Any], Any], str | None]:
    """A `limits` model for the GEMM-shaped families: `need(p)` bytes of shared memory at the timed bf16 tiles
    against the 227 KB a program may use (their fp32 cases run one stage deep, FP32_DEPTH, so the timed tiles
    are the largest)."""

    def limits(p: dict[str, Any], case) -> str | None:
        n = need(p)
        if n > SM90_SHARED_MAX:
            return f"{n} B of shared memory for its tiles and stages > {SM90_SHARED_MAX} B (227 KB, sm_90)"
        return None

    return limits


# -- the space ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """One idea: set some parameters. `when` limits it to the seeds it makes sense for."""

    title: str
    description: str
    changes: dict[str, Any]
    when: Callable[[dict], bool] = lambda p: True
    # limits it to problems it changes anything for, by their shape cases (an fp32-only knob on a bf16 problem
    # renders other text for the same behaviour: a duplicate kernel under another header)
    for_cases: Callable[[Sequence[Case]], bool] = lambda cases: True


@dataclass
class SearchSpace:
    params: dict[str, list[Any]]                 # every parameter and its allowed values
    default: dict[str, Any]                      # the starter
    template: Callable[[dict[str, Any]], str]    # params -> the ModelNew source, without the header
    moves: list[Move]
    tuning: list[str] = field(default_factory=list)  # knobs the coder varies across branches of one idea
    # the family's shape cases (its spec's CASES): a point is feasible only if it can run at every one
    cases: Sequence[Case] = ()
    # why a point cannot run at one case on an H200 (sm_90: registers, shared memory, a launcher's refusal), or
    # None: the family's feasibility model. No move, no branch and no evaluation lands on a point it refuses
    limits: Callable[[dict[str, Any], Case], str | None] = lambda p, case: None
    # the starter's knobs at a shape the default was not tuned for (a model's, a matched KernelBench problem's):
    # (case, every case the kernel must run: the problem's) -> the parameters that differ from `default` there;
    # None: the default at every shape (`default_for`)
    shaped: Callable[[Case, Sequence[Case]], dict[str, Any]] | None = None
    _bodies: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    _verdicts: dict[str, str | None] = field(default_factory=dict, init=False, repr=False, compare=False)

    def infeasible(self, params: dict[str, Any], cases: Sequence[Case] | None = None) -> str | None:
        """Why `params` cannot run at some shape case (`case[dims; dtype]: reason`, the first such case), or None
        when the feasibility model knows of none. `cases`: the problem's, where they are not the family's own (a
        family at a model's shape); by default the space's."""
        cases = self.cases if cases is None else cases
        key = json.dumps(params, sort_keys=True) + "|" + "|".join(c.describe() for c in cases)
        if key not in self._verdicts:
            why = None
            for case in cases:
                reason = self.limits(params, case)
                if reason:
                    why = f"{case.describe()}: {reason}"
                    break
            self._verdicts[key] = why
        return self._verdicts[key]

    def feasible(self, params: dict[str, Any], cases: Sequence[Case] | None = None) -> bool:
        return self.infeasible(params, cases) is None

    def default_for(self, case: Case, cases: Sequence[Case] = ()) -> dict[str, Any]:
        """The starter at `case`'s shape: the tuned default at a shape the family was tuned for (one of its own timed
        cases), or where it has no `shaped` rule; else the default with the rule's knobs, where the feasibility model
        accepts that point at `case` and at `cases` (the problem's other cases), the default otherwise."""
        tuned = any(c.timed and c.params == case.params and c.dtype == case.dtype for c in self.cases)
        if tuned or self.shaped is None:
            return dict(self.default)
        point = {**self.default, **self.shaped(case, [case, *cases])}
        try:
            self.validate(point)   # (a space derived from another may lack a value the rule picks)
        except ValueError:
            return dict(self.default)
        if self.body(point) == self.body(self.default) or not self.feasible(point, [case, *cases]):
            return dict(self.default)   # (the same kernel: the family's starter.py, byte for byte)
        return point

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

    def refusal(self, code: str, cases: Sequence[Case] | None = None) -> str | None:
        """Why a kernel of this space cannot run at some case, read back from its code; None when the model knows
        no reason or cannot tell. Only code that is exactly what the space renders for the parameters its header
        names is judged: a header kept on edited code says nothing about the code."""
        m = _HEADER_RE.search(code)
        if not m:
            return None
        try:
            params = json.loads(m.group(1))
            if not isinstance(params, dict) or set(params) != set(self.params):
                return None
            rendered = self.render(params)
        except (json.JSONDecodeError, ValueError, KeyError, TypeError):
            return None
        if rendered.strip() != code.strip():
            return None
        return self.infeasible(params, cases)

    def applicable(self, params: dict[str, Any],
                   cases: Sequence[Case] | None = None) -> list[tuple[Move, dict[str, Any]]]:
        """The moves that change `params`, with where each one lands: feasible points only (at `cases`)."""
        out = []
        problem_cases = self.cases if cases is None else cases
        for move in self.moves:
            if not move.when(params) or not move.for_cases(problem_cases):
                continue
            new = {**params, **move.changes}
            if new != params and self.feasible(new, cases):
                out.append((move, new))
        return out

    def branches(self, params: dict[str, Any], n: int, rng: random.Random, fixed: set[str],
                 avoid: set[str] = frozenset(), cases: Sequence[Case] | None = None) -> list[dict]:
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
            if not self.feasible(cand, cases):
                continue
            b = self.body(cand)
            if b not in bodies:
                bodies.add(b)
                out.append(cand)
        return out
