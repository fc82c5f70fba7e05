"""Level-2 chains with a normalisation: a convolution or a linear layer, then elementwise ops, group norm, batch norm
(training mode, as the judge runs the reference) or instance norm, then more elementwise ops, in any order after the
head (KernelBench level 2's Conv2d_GroupNorm_*, Gemm_BatchNorm_*, Conv2d_InstanceNorm_*, ...).

Nothing is fused: the chain is the existing generated kernels run one after the other on the previous one's output,
each a stage of the candidate's forward:
- the head: the generated convolution (conv.py, its search space: the space of the whole chain), or the matmul
  family's GEMM (its template and space, at the problem's M, N, K), whose bias is added by the first elementwise
  kernel;
- each run of elementwise ops between two normalisations: one generated elementwise kernel (pointwise.py) at the
  family's default;
- group norm and instance norm: matched_extra.py's row normalisation; batch norm: matched_batchnorm.py's
  per-channel one; each at its default chunk (4096 values on 8 warps).
Every stage's output makes one round trip through memory. A graph whose later op reads an earlier stage's
intermediate (a residual add over a normalisation), a pooling or a reduction in the chain, two heads, or dropout
(random in training mode) is not matched here.
"""
from __future__ import annotations

import re
from dataclasses import replace

import torch

from kernelsearch.families.space import fill
from kernelsearch.generators.common import Match, adapted_space, shape_text, with_helper
from kernelsearch.generators.conv import conv_space
from kernelsearch.generators.matched_batchnorm import _BN, _BN_STATS
from kernelsearch.generators.matched_conv import conv_head
from kernelsearch.generators.matched_extra import _NORM, _ROW_STATS
from kernelsearch.generators.pointwise import DEFAULT, FLOATS, NotPointwise, match_pointwise, render_kernel, self_attr
from kernelsearch.generators.trace import Traced, meta, op_name, schema_args
from kernelsearch.judge.problem import Case

_PASS = ("getitem", "detach", "alias", "clone")
_SIDE = ("detach", "getitem", "empty", "alias", "clone")   # ops off the output's path that are allowed
_IMPORTS = "import torch\nimport triton\nimport triton.language as tl\n"
_NORM_DEFAULT = {"CHUNK": 4096, "num_warps": 8}


def _gemm_head(traced: Traced):
    """addmm(bias, x, W.t()) or mm(x, W.t()) of a linear layer's (or a parameter's) W: (node, bias Input or None,
    the host line computing the product, a summary, the matmul case)."""
    cores = [n for n in traced.ops if op_name(n) in ("mm", "addmm", "bmm", "convolution")]
    if len(cores) != 1 or op_name(cores[0]) not in ("mm", "addmm"):
        return None
    mm = cores[0]
    a = schema_args(mm)
    addmm = op_name(mm) == "addmm"
    if addmm and (a.get("beta", 1) != 1 or a.get("alpha", 1) != 1):
        return None
    x_node, w_node = (a["mat1"], a["mat2"]) if addmm else (a["self"], a["mat2"])
    x = traced.input_of(x_node) if isinstance(x_node, torch.fx.Node) else None
    if x is None or x.kind != "tensor" or len(x.shape) != 2 or x.dtype not in FLOATS:
        return None
    if not (isinstance(w_node, torch.fx.Node) and op_name(w_node) in ("t", "permute", "transpose")):
        return None
    w = traced.input_of(w_node.args[0])
    m = meta(w_node)
    if w is None or w.kind != "param" or len(w.shape) != 2 or w.dtype != x.dtype or m is None or \
            tuple(m.shape) != tuple(reversed(w.shape)):
        return None
    bias = None
    if addmm:
        bias = traced.input_of(a["self"]) if isinstance(a["self"], torch.fx.Node) else None
        if bias is None or bias.kind != "param":
            return None
    n = int(meta(mm).shape[-1])
    case = Case("problem", {"m": int(x.shape[0]), "n": n, "k": int(x.shape[1])},
                str(x.dtype).removeprefix("torch."), timed=True)
    line = f"matmul({x.name}, {self_attr(w.name)}.t())"
    return mm, bias, line, f"linear {shape_text(x)} -> {n}", case, {w_node}


def _norm_stage(traced: Traced, node):
    """A normalisation node as (input node, output node, kind, host call with `{}` for its input, eps, nodes it
    owns); None where it is not one this chain reads."""
    a = schema_args(node)
    outs = [u for u in node.users if op_name(u) == "getitem" and u.args[1] == 0]
    if len(outs) != 1:
        return None
    out = outs[0]
    owned = {node, *node.users}

    def param(k):
        v = a.get(k)
        inp = traced.input_of(v) if isinstance(v, torch.fx.Node) else None
        return inp if inp is not None and inp.kind == "param" else None

    if op_name(node) == "native_group_norm":
        w, b = param("weight"), param("bias")
        if w is None or b is None:
            return None
        weight = self_attr(w.name)
        groups = f"{weight.removesuffix('.weight')}.num_groups" if weight.endswith(".weight") else str(int(a["group"]))
        return a["input"], out, "group norm", f"row_norm({{}}, {weight}, {self_attr(b.name)}, {groups})", \
            a["eps"], owned
    if op_name(node) != "native_batch_norm" or not a.get("training"):
        return None
    src = a["input"]
    users = list(out.users)
    # instance norm as traced: x viewed (1, N*C, ...), batch norm with no weight or running stats, viewed back
    if isinstance(src, torch.fx.Node) and op_name(src) == "view" and len(users) == 1 and op_name(users[0]) == "view":
        v, x = meta(src), meta(src.args[0])
        back = meta(users[0])
        if any(a.get(k) is not None for k in ("weight", "bias", "running_mean", "running_var")) or v is None or \
                x is None or x.dim() < 3 or back is None or tuple(back.shape) != tuple(x.shape) or \
                tuple(v.shape) != (1, x.shape[0] * x.shape[1], *x.shape[2:]):
            return None
        return src.args[0], users[0], "instance norm", "row_norm({0}, None, None, {0}.shape[1])", a["eps"], \
            owned | {src, users[0]}
    w, b = param("weight"), param("bias")
    if (a.get("weight") is None) != (a.get("bias") is None) or (a.get("weight") is not None and (w is None or
                                                                                                 b is None)):
        return None
    call = f"batch_norm({{}}, {self_attr(w.name)}, {self_attr(b.name)})" if w is not None else \
        "batch_norm({}, None, None)"
    return src, out, "batch norm", call, a["eps"], owned


def _live(traced: Traced) -> set:
    seen, todo = set(), [traced.output]
    while todo:
        n = todo.pop()
        if n in seen or not isinstance(n, torch.fx.Node):
            continue
        seen.add(n)
        todo.extend(n.all_input_nodes)
    return seen


def _renamed(text: str, suffix: str) -> tuple[str, dict]:
    """`text` with each name it defines at the top level given `suffix` (so stages never collide)."""
    names = set(re.findall(r"^def (\w+)", text, re.M)) | set(re.findall(r"^(\w+)\s*=", text, re.M))
    if not names:
        return text, {}
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    return pattern.sub(lambda m: m.group(1) + suffix, text), {n: n + suffix for n in names}


def match_chain(traced: Traced) -> Match | None:
    """A conv or GEMM head, then elementwise runs and normalisations, as one `Match`; None where the graph is not."""
    conv = conv_head(traced)
    gemm = None if conv is not None else _gemm_head(traced)
    if conv is None and gemm is None:
        return None
    head = conv[0] if conv is not None else gemm[0]
    norms = [n for n in traced.ops if op_name(n) in ("native_group_norm", "native_batch_norm")]
    if not norms:
        return None
    stages = [_norm_stage(traced, n) for n in norms]
    if any(s is None for s in stages):
        return None
    live = _live(traced)
    owned = set().union(*(s[5] for s in stages)) | {head} | (gemm[5] if gemm is not None else set())
    for n in traced.ops:   # off the output's path: copies and the buffers' `num_batches_tracked += 1` only
        if n not in live and n not in owned and not (op_name(n) in _SIDE or (op_name(n) == "add_" and _buffer(
                traced, n.args[0]))):
            return None
    position = {n: i for i, n in enumerate(traced.ops)}
    bounds = [position[n] for n in norms] + [len(traced.ops)]
    ends = [s[0] for s in stages] + [traced.output]
    helpers, lines, what = [], [], []
    src, var, bias = head, "y0", (gemm[1] if gemm is not None else None)
    lines.append(f"y0 = {conv[4] if conv is not None else gemm[2]}")
    lo = position[head]
    for k, (hi, end) in enumerate(zip(bounds, ends)):
        seg = [n for n in traced.ops[lo + 1:hi] if n in live and n not in owned]
        compute = [n for n in seg if op_name(n) not in _PASS]
        if compute or bias is not None:
            if end is not src and end not in seg:
                return None
            sub = replace(traced, ops=seg, output=end)
            skip = frozenset(n for n in traced.ops if n not in seg)
            try:
                pg = match_pointwise(sub, sources={src: (var, bias)}, skip=skip)
            except NotPointwise:
                return None
            text = render_kernel(pg, dict(DEFAULT)).replace(_IMPORTS, "", 1)
            text, names = _renamed(text, f"_{len(helpers) + 1}")
            helpers.append(text.strip("\n"))
            args = ", ".join([o.expr for o in pg.operands] + pg.numbers)
            var = f"y{len(lines)}"
            lines.append(f"{var} = {names['pointwise']}({args})")
            what.append(f"elementwise {' -> '.join(pg.ops)}")
            bias = None
        else:   # nothing computed between two stages: the next reads the previous one's output as it is
            n = end
            while n is not src and isinstance(n, torch.fx.Node) and op_name(n) in _PASS:
                n = n.args[0]
            if n is not src:
                return None
        if k == len(stages):
            break
        node_in, out, kind, call, eps, _ = stages[k]
        m = meta(out)
        if m is None or m.dtype not in FLOATS or m.dim() < 2:
            return None
        template, stats, fn = (_BN, _BN_STATS, "batch_norm") if kind == "batch norm" else \
            (_NORM, _ROW_STATS, "row_norm")
        text = fill(template, {"WHAT": f"{kind} of {'x'.join(map(str, m.shape))}", "EPS": repr(float(eps)),
                               "STATS_KERNEL": stats, **_NORM_DEFAULT}).replace(_IMPORTS, "", 1)
        text, names = _renamed(text, f"_{len(helpers) + 1}")
        helpers.append(text.strip("\n"))
        new = f"y{len(lines)}"
        lines.append(f"{new} = {call.replace(fn + '(', names[fn] + '(', 1).format(var)}")
        what.append(kind)
        src, var, lo = out, new, bounds[k]
    covered = owned | {n for n in traced.ops if position[n] > position[head]}
    if any(n in live and n not in covered for n in traced.ops):   # an op before the head feeds the chain
        return None
    lines.append(f"return {var}")
    helper = "\n\n\n".join(helpers)
    chain = ", then ".join(what)
    if conv is not None:
        _, cv, init, forward, _ = conv
        summary = f"{cv.describe()}, then {chain} (the generated convolution, then one generated kernel a stage)"
        return Match("conv_chain", summary, conv_space(cv, init, forward, "\n".join(lines), helper=helper))
    summary = f"{gemm[3]}, then {chain} (the matmul family's GEMM, then one generated kernel a stage)"
    space = adapted_space("matmul", traced, lines, summary, case=gemm[4], case_limits=True)
    return Match("gemm_chain", summary, with_helper(space, "\n\n" + helper + "\n"))


def _buffer(traced: Traced, node) -> bool:
    inp = traced.input_of(node) if isinstance(node, torch.fx.Node) else None
    return inp is not None and inp.kind == "param"
