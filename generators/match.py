"""What the offline provider can search for a problem that is not a built-in family: its reference's graph, matched.

`match_problem` traces the reference (generators/trace.py) and returns a `Match`: its search space and a line that
says what was found. In order:
- a graph of elementwise operations gets the generated pointwise family (generators/pointwise.py);
- a graph that is one built-in family's operation at other shapes gets that family's template and search space,
  with a `ModelNew` of the problem's constructor and forward around the family's public function (softmax along any
  dim; sum along one dim, keepdim or not; mm with transposed or flattened operands; mv; bmm and batched torch.matmul
  (3-D/4-D, batch dims broadcast, operands transposed) by the family's batched `tiled` kernel; layer norm over the
  trailing dims with its weight and bias; cross-entropy with a mean over the batch; RMS norm as x / sqrt(mean(x^2) +
  eps) along one dim). The family's default is adjusted to the shape where its own would not fit (a softmax row too
  wide for registers starts from the online sweep; a layer norm of few, very wide rows from the split kernel);
- a linear layer (or a product with a parameter) followed by elementwise ops (level 2's Gemm_X_Y) gets the matmul
  family's template and space for the GEMM and one generated elementwise kernel for the bias and the epilogue;
- max or average pooling over the last 1-3 dims gets the generated pooling family (generators/pooling.py);
- a cumsum or cumprod along one dim (a mask multiply, flips, the exclusive form) gets the scan family (cumulative.py);
- triu / tril of an mm, and a tensor of 3+ dims times a matrix over its last dim (an einsum), get the matmul family
  (matched_products.py); batch norm in training mode gets a generated per-channel normalisation (matched_batchnorm.py);
- the triplet margin loss gets generated row distances and a fixed-order mean (matched_triplet.py);
- a convolution (1-3 D, strided, padded, dilated, grouped, depthwise, transposed), alone or followed by elementwise
  ops, gets the generated convolution family (conv.py, matched_conv.py);
- a convolution or a linear layer, then elementwise ops and group / batch / instance norms (level 2's chains), gets
  the head's space with one generated kernel a stage after it (matched_chain.py);
- scaled dot-product attention (sdpa, or q k^T * scale, softmax, @ v), causal or not, at any head size and sequence
  lengths: the flash_attention family where it fits, else a generated flash kernel over head-dim slices
  (matched_attention.py);
- anything else raises `Unmatched`, one line naming the ops found and saying to use an LLM provider.
The `Match` returned, `Unmatched` and the adapter around a family's template are generators/common.py's, which
every matcher imports (never this module, which imports them all).
"""
from __future__ import annotations

import math

import torch

from kernelsearch.generators.common import (
    LAYOUT,
    LLM_HINT,
    Match,
    Unmatched,
    adapted_space,
    core_ops,
    operand,
    shape_text,
    tensor_input,
    with_helper,
)
from kernelsearch.generators.cumulative import match_cumulative
from kernelsearch.generators.losses import match_loss
from kernelsearch.generators.matched_attention import match_attention
from kernelsearch.generators.matched_batchnorm import match_batch_norm
from kernelsearch.generators.matched_chain import match_chain
from kernelsearch.generators.matched_conv import match_conv
from kernelsearch.generators.matched_extra import match_extra
from kernelsearch.generators.matched_products import match_flattened_product, match_triangular
from kernelsearch.generators.matched_triplet import match_triplet
from kernelsearch.generators.pointwise import DEFAULT as POINTWISE_DEFAULT
from kernelsearch.generators.pointwise import (
    DEFAULT_INIT,
    NotPointwise,
    match_pointwise,
    pointwise_space,
    render_kernel,
    self_attr,
)
from kernelsearch.generators.pooling import match_pooling
from kernelsearch.generators.reduction import reduction_space
from kernelsearch.generators.trace import Traced, TraceError, meta, op_name, schema_args, trace_problem
from kernelsearch.judge.problem import Case, Problem, ProblemError

# Match, Unmatched and LLM_HINT live in common.py (the matchers import them there); the rooms above import them here
__all__ = ["LLM_HINT", "Match", "Unmatched", "adapted_space", "match_problem"]


def match_problem(problem: Problem) -> Match:
    """The search space the offline provider uses for `problem` (a family's own, or one matched from its graph)."""
    space = getattr(problem.family, "SPACE", None) if problem.family else None
    if space is not None:
        return Match(problem.name, f"the built-in family {problem.name}", space)
    try:
        traced = trace_problem(problem)
    except (TraceError, ProblemError) as err:
        raise Unmatched(f"the offline provider cannot read {problem.name}'s reference as a graph ({err}); "
                        f"{LLM_HINT}") from None
    try:
        pg = match_pointwise(traced)
        return Match("pointwise", pg.describe(), pointwise_space(pg, traced))
    except NotPointwise as err:
        why = str(err)
    for matcher in _FAMILY_MATCHERS:
        found = matcher(traced)
        if found is not None:
            return found
    ops = ", ".join(traced.op_names()) or "no operation"
    raise Unmatched(f"the offline provider has no kernel family for {problem.name}: its reference computes {ops} "
                    f"(not elementwise: {why}; not one family's operation); {LLM_HINT}")


def _dim(d: int, ndim: int) -> int:
    return d % ndim if ndim else 0


def _moved(x: str, d: int, ndim: int) -> str:
    return x if d == ndim - 1 else f"{x}.movedim({d}, -1)"


def _softmax(traced: Traced) -> Match | None:
    ops = core_ops(traced, {"_softmax"})
    if not ops or len(ops) != 1 or ops[0] is not _result(traced):
        return None
    a = schema_args(ops[0])
    x = tensor_input(traced, a["self"])
    if x is None or not x.shape:
        return None
    nd = len(x.shape)
    d = _dim(a["dim"], nd)
    cols = x.shape[d]
    call = f"softmax({_moved(x.name, d, nd)})"
    body = [f"return {call}" if d == nd - 1 else f"return {call}.movedim(-1, {d})"]
    summary = f"softmax over dim {d} of {shape_text(x)}"
    block = max(triton_next_pow2(cols), 16)
    # (the family's rule for other shapes starts a row too wide for registers from the online sweep, short rows
    # packed a few a program)
    fits = (lambda p: not (p["variant"] == "pipelined" and block > 32768)
            and not (p["variant"] == "single" and block * p["ROWS"] > 65536))
    return Match("softmax", summary, adapted_space("softmax", traced, body, summary, fits=fits,
                                                   case=_rows_case(x, cols)))


def _sum(traced: Traced) -> Match | None:
    ops = core_ops(traced, {"sum"})
    if not ops or len(ops) != 1 or ops[0] is not _result(traced):
        return None
    a = schema_args(ops[0])
    x = tensor_input(traced, a["self"])
    dims = a.get("dim")
    if x is None or not x.shape or not isinstance(dims, (list, tuple)) or len(dims) != 1 or a.get("dtype"):
        return None
    nd = len(x.shape)
    d = _dim(dims[0], nd)
    call = f"sum_last_dim({_moved(x.name, d, nd)})"
    body = [f"return {call}.unsqueeze({d})" if a.get("keepdim") else f"return {call}"]
    summary = f"sum over dim {d} of {shape_text(x)}{' (keepdim)' if a.get('keepdim') else ''}"
    return Match("reduce", summary, adapted_space("reduce", traced, body, summary, case=_rows_case(x, x.shape[d])))


def _matmul(traced: Traced) -> Match | None:
    ops = core_ops(traced, {"mm", "bmm"} | LAYOUT)
    if not ops:
        return None
    cores = [n for n in ops if op_name(n) in ("mm", "bmm")]
    if len(cores) != 1:
        return None
    if op_name(cores[0]) == "bmm":
        return _batched_matmul(traced, cores[0])
    mm = cores[0]
    a, b = (operand(traced, mm.args[i]) for i in (0, 1))
    if a is None or b is None or isinstance(b[1], tuple):
        return None
    out = _result(traced)
    call = f"matmul({a[0]}, {b[0]})"
    if out is not mm:   # the product viewed back to the flattened operand's leading dims
        m, s = meta(out), meta(mm)
        if not (isinstance(a[1], tuple) and op_name(out) in ("view", "_unsafe_view", "reshape") and out.args[0] is mm
                and m is not None and s is not None and m.shape[-1] == s.shape[-1]):
            return None
        call = f"{call}.reshape(*{a[1][1]}.shape[:-1], -1)"
    if isinstance(a[1], tuple) and out is mm:
        return None
    body = [f"return {call}"]
    x = a[1][0] if isinstance(a[1], tuple) else a[1]
    if x.dtype != b[1].dtype:
        return None
    summary = f"{op_name(mm)} of {shape_text(x)} and {shape_text(b[1])}"
    ma, mc = meta(mm.args[0]), meta(mm)
    case = None
    if ma is not None and mc is not None:
        case = Case("problem", {"m": int(mc.shape[0]), "n": int(mc.shape[1]), "k": int(ma.shape[1])},
                    str(x.dtype).removeprefix("torch."), timed=True)
    return Match("matmul", summary, adapted_space("matmul", traced, body, summary, case=case, case_limits=True))


def _matvec(traced: Traced) -> Match | None:
    """torch.mv, or torch.matmul of a matrix and a 1-D vector (traced as mv): the matmul family at N = 1, the vector
    viewed as a column, so the family's shape rule starts it from its matrix-vector kernel (`gemv`)."""
    ops = core_ops(traced, {"mv"})
    if not ops or len(ops) != 1 or ops[0] is not _result(traced):
        return None
    a = schema_args(ops[0])
    x, v = tensor_input(traced, a["self"]), tensor_input(traced, a["vec"])
    if x is None or v is None or len(x.shape) != 2 or len(v.shape) != 1 or x.dtype != v.dtype:
        return None
    body = [f"return matmul({x.name}, {v.name}.unsqueeze(1)).squeeze(1)"]
    summary = f"mv of {shape_text(x)} and {shape_text(v)}"
    case = Case("problem", {"m": int(x.shape[0]), "n": 1, "k": int(x.shape[1])}, str(x.dtype).removeprefix("torch."),
                timed=True)
    return Match("matmul", summary, adapted_space("matmul", traced, body, summary, case=case, case_limits=True))


def _batched_operand(traced: Traced, node) -> tuple[str, object] | None:
    """A bmm operand as host code for the batched kernel (`bmm`, which broadcasts batch dims as torch.matmul does):
    a forward argument, its last two dims transposed or not, given to bmm as it is (3-D), or as torch.matmul traces
    it: broadcast over the batch (expand, a clone where the broadcast cannot be viewed) and flattened to 3-D."""
    n = node
    v = meta(n) if isinstance(n, torch.fx.Node) else None
    if v is None or v.dim() != 3:
        return None
    if op_name(n) in ("view", "_unsafe_view", "reshape"):
        s = meta(n.args[0])
        if s is None or s.dim() < 2 or tuple(v.shape) != (math.prod(s.shape[:-2]), *s.shape[-2:]):
            return None
        n = n.args[0]
        if isinstance(n, torch.fx.Node) and op_name(n) == "clone":
            n = n.args[0]
        if isinstance(n, torch.fx.Node) and op_name(n) == "expand":
            e, s = meta(n), meta(n.args[0])
            if e is None or s is None or tuple(e.shape[-2:]) != tuple(s.shape[-2:]):
                return None
            n = n.args[0]
    suffix = ""
    if isinstance(n, torch.fx.Node) and op_name(n) in ("transpose", "permute"):
        t, s = meta(n), meta(n.args[0])
        nd = s.dim() if s is not None else 0
        if t is None or nd < 2:
            return None
        if op_name(n) == "permute":
            swap = [d % nd for d in n.args[1]] == [*range(nd - 2), nd - 1, nd - 2]
        else:
            swap = {_dim(n.args[1], nd), _dim(n.args[2], nd)} == {nd - 2, nd - 1}
        if not swap:
            return None
        suffix = ".transpose(-2, -1)"
        n = n.args[0]
    x = tensor_input(traced, n)
    if x is None or len(x.shape) < 2:
        return None
    return f"{x.name}{suffix}", x


def _batched_matmul(traced: Traced, mm) -> Match | None:
    """torch.bmm, or torch.matmul with batch dims (3-D/4-D, broadcast, transposed operands): the matmul family's
    batched template (its `tiled` kernel with a batch axis) at the problem's batch, M, N, K and dtype."""
    a, b = (_batched_operand(traced, mm.args[i]) for i in (0, 1))
    out = _result(traced)
    if a is None or b is None or a[1].dtype != b[1].dtype:
        return None
    c, o = meta(mm), meta(out)
    if c is None or o is None:
        return None
    if out is not mm and not (op_name(out) in ("view", "_unsafe_view", "reshape") and out.args[0] is mm):
        return None
    ta, tb = meta(mm.args[0]), meta(mm.args[1])
    K = int(ta.shape[2])
    batch = tuple(torch.broadcast_shapes(a[1].shape[:-2], b[1].shape[:-2]))
    M, N = int(c.shape[1]), int(c.shape[2])
    if tuple(o.shape) != (*batch, M, N) or math.prod(batch) != c.shape[0] or int(tb.shape[1]) != K:
        return None
    from kernelsearch.families.matmul.space import batched_template

    dtype = str(a[1].dtype).removeprefix("torch.")
    case = Case("problem", {"batch": math.prod(batch), "m": M, "n": N, "k": K}, dtype, timed=True)
    body = [f"return bmm({a[0]}, {b[0]})"]
    summary = f"bmm of {shape_text(a[1])} and {shape_text(b[1])}"
    space = adapted_space("matmul", traced, body, summary, case=case, family_template=batched_template,
                          case_limits=True)
    return Match("matmul", summary, space)


def _layernorm(traced: Traced) -> Match | None:
    ops = core_ops(traced, {"native_layer_norm"})
    if not ops or len(ops) != 1:
        return None
    out = _result(traced)
    if not (op_name(out) == "getitem" and out.args[0] is ops[0] and out.args[1] == 0):
        return None
    a = schema_args(ops[0])
    x = tensor_input(traced, a["input"])
    w, bias = (traced.input_of(a[k]) if isinstance(a.get(k), torch.fx.Node) else None for k in ("weight", "bias"))
    if x is None or w is None or bias is None or w.kind != "param" or bias.kind != "param":
        return None
    n_dims = len(a["normalized_shape"])
    cols = math.prod(a["normalized_shape"])
    body = [f"return layer_norm({x.name}, {self_attr(w.name)}, {self_attr(bias.name)}, {float(a['eps'])!r}, "
            f"n_dims={n_dims})"]
    summary = f"layer norm over the last {n_dims} dims of {shape_text(x)}"
    # few, very wide rows (KernelBench's 16 rows of 4M): the split kernel of layernorm_crfm's starter
    wide = cols > 65536
    space = adapted_space("layernorm", traced, body, summary, space_module="layernorm_crfm" if wide else None,
                          case=None if wide else _rows_case(x, cols))
    return Match("layernorm", summary, space)


def _cross_entropy(traced: Traced) -> Match | None:
    ops = core_ops(traced, {"_log_softmax", "nll_loss_forward"})
    if not ops or [op_name(n) for n in ops] != ["_log_softmax", "nll_loss_forward"]:
        return None
    lsm, nll = ops
    out = _result(traced)
    if not (op_name(out) == "getitem" and out.args[0] is nll and out.args[1] == 0):
        return None
    a, b = schema_args(lsm), schema_args(nll)
    x = tensor_input(traced, a["self"])
    t = traced.input_of(b["target"]) if isinstance(b["target"], torch.fx.Node) else None
    if x is None or t is None or t.kind != "tensor" or len(x.shape) != 2 or _dim(a["dim"], 2) != 1 or \
            b["self"] is not lsm or b.get("weight") is not None or b.get("reduction") != 1:
        return None
    body = [f"return cross_entropy({x.name}, {t.name}, {int(b['ignore_index'])})"]
    summary = f"cross-entropy (mean) of {shape_text(x)} logits"
    return Match("cross_entropy", summary, adapted_space("cross_entropy", traced, body, summary))


def _rmsnorm(traced: Traced) -> Match | None:
    """x / sqrt(mean(x^2, dim, keepdim) + eps) (or x * rsqrt(...)), along one dim, with no weight."""
    ops = core_ops(traced, {"pow", "mul", "mean", "add", "sqrt", "rsqrt", "div"})
    if not ops or len(ops) != 5:
        return None
    names = [op_name(n) for n in ops]
    if names not in (["pow", "mean", "add", "sqrt", "div"], ["pow", "mean", "add", "rsqrt", "mul"],
                     ["mul", "mean", "add", "sqrt", "div"], ["mul", "mean", "add", "rsqrt", "mul"]):
        return None
    sq, mean, add, root, fin = ops
    x = tensor_input(traced, sq.args[0])
    sa, ma, aa, fa = schema_args(sq), schema_args(mean), schema_args(add), schema_args(fin)
    square = sa.get("exponent") == 2 if names[0] == "pow" else sa.get("other") is sq.args[0]
    dims = ma.get("dim")
    if x is None or not square or ma.get("self") is not sq or not isinstance(dims, (list, tuple)) or \
            len(dims) != 1 or not ma.get("keepdim") or aa.get("self") is not mean or \
            isinstance(aa.get("other"), torch.fx.Node) or root.args[0] is not add or \
            fa.get("self") is not x.node or fa.get("other") is not root or fin is not _result(traced):
        return None
    nd = len(x.shape)
    d = _dim(dims[0], nd)
    eps = float(aa["other"])
    call = f"rms_norm({_moved(x.name, d, nd)}, torch.ones({x.name}.shape[{d}], dtype={x.name}.dtype, " \
           f"device={x.name}.device), {eps!r})"
    body = [f"return {call}" if d == nd - 1 else f"return {call}.movedim(-1, {d})"]
    summary = f"RMS norm over dim {d} of {shape_text(x)} (no weight)"
    return Match("rmsnorm", summary, adapted_space("rmsnorm", traced, body, summary,
                                                   case=_rows_case(x, x.shape[d])))


def _gemm_epilogue(traced: Traced) -> Match | None:
    """Level-2 style: x @ W^T (+ bias) from a linear layer or a parameter, then elementwise ops on the product
    (with numbers, the layer's bias and other parameters broadcast along rows). Two kernels: the matmul family's
    GEMM (its template and search space) and a generated elementwise kernel for the bias and the epilogue, at the
    pointwise family's default. Not fused: the product makes one round trip through memory."""
    cores = [n for n in traced.ops if op_name(n) in ("mm", "addmm")]
    if len(cores) != 1 or any(op_name(n) in ("bmm", "convolution") for n in traced.ops):
        return None
    mm = cores[0]
    a = schema_args(mm)
    addmm = op_name(mm) == "addmm"
    if addmm and (a.get("beta", 1) != 1 or a.get("alpha", 1) != 1):
        return None
    x_node, w_node = (a["mat1"], a["mat2"]) if addmm else (a["self"], a["mat2"])
    x = tensor_input(traced, x_node)
    if x is None or len(x.shape) != 2:
        return None
    skip = {mm}
    w = traced.input_of(w_node) if isinstance(w_node, torch.fx.Node) else None
    w_expr = None
    if w is not None and w.kind == "param":
        w_expr = self_attr(w.name)
    elif isinstance(w_node, torch.fx.Node) and op_name(w_node) in ("t", "permute", "transpose"):
        w = traced.input_of(w_node.args[0])
        m = meta(w_node)
        if w is not None and w.kind == "param" and len(w.shape) == 2 and m is not None and \
                tuple(m.shape) == tuple(reversed(w.shape)):
            w_expr, skip = f"{self_attr(w.name)}.t()", skip | {w_node}
    if w_expr is None or w.dtype != x.dtype:
        return None
    bias = None
    if addmm:
        bias = traced.input_of(a["self"]) if isinstance(a["self"], torch.fx.Node) else None
        if bias is None or bias.kind != "param":
            return None
    try:
        pg = match_pointwise(traced, sources={mm: ("y", bias)}, skip=frozenset(skip))
    except NotPointwise:
        return None
    m = meta(mm)
    summary = (f"linear {shape_text(x)} -> {m.shape[-1]}, then elementwise {' -> '.join(pg.ops)} (the matmul family's "
               f"GEMM, then one generated elementwise kernel)")
    args = ", ".join([o.expr for o in pg.operands] + pg.numbers)
    body = [f"y = matmul({x.name}, {w_expr})", f"return pointwise({args})"]
    # the GEMM's tiles sized to its M, N and K (a one-tile problem does not start from the 128 x 256 TMA default)
    case = Case("problem", {"m": int(x.shape[0]), "n": int(m.shape[-1]), "k": int(x.shape[1])},
                str(x.dtype).removeprefix("torch."), timed=True)
    space = adapted_space("matmul", traced, body, summary, case=case, case_limits=True)
    epilogue = render_kernel(pg, dict(POINTWISE_DEFAULT), prefix="_pw")
    epilogue = epilogue.replace("import torch\nimport triton\nimport triton.language as tl\n", "", 1)
    return Match("gemm_epilogue", summary, with_helper(space, "\n\n" + epilogue.strip("\n") + "\n"))


def _reduce_other(traced: Traced) -> Match | None:
    """mean, amax/amin, or max/min's values along one dim: the generated reduction (generators/reduction.py)."""
    ops = core_ops(traced, {"mean", "amax", "amin", "max", "min"})
    if not ops or len(ops) != 1:
        return None
    node, out = ops[0], _result(traced)
    name = op_name(node)
    a = schema_args(node)
    if name in ("max", "min"):   # max.dim / min.dim: (values, indices); the values are the output
        if not (op_name(out) == "getitem" and out.args[0] is node and out.args[1] == 0) or "dim" not in a:
            return None
        dims = [a["dim"]]
    else:
        if out is not node:
            return None
        dims = a.get("dim")
    x = tensor_input(traced, a["self"])
    if x is None or not x.shape or not isinstance(dims, (list, tuple)) or len(dims) != 1 or a.get("dtype"):
        return None
    nd = len(x.shape)
    d = _dim(dims[0], nd)
    op = {"amax": "max", "amin": "min"}.get(name, name)
    keep = bool(a.get("keepdim"))
    summary = f"{op} over dim {d} of {shape_text(x)}{' (keepdim)' if keep else ''}"
    space = reduction_space(op, d, keep, math.prod(x.shape[d + 1:]), x.name,
                            ", ".join(traced.forward_args) or "*inputs", traced.init_source or DEFAULT_INIT, summary)
    return Match("reduction", summary, space)


_FAMILY_MATCHERS = (_softmax, _sum, _matmul, _matvec, _layernorm, _cross_entropy, _rmsnorm, _gemm_epilogue,
                    _reduce_other, match_extra, match_pooling, match_loss, match_cumulative, match_triangular,
                    match_flattened_product, match_batch_norm, match_triplet, match_conv, match_chain, match_attention)


def _rows_case(x, cols: int) -> Case:
    """The problem's shape as a family's rows x cols case (rows: every other dim), for its starter at that shape."""
    return Case("problem", {"rows": math.prod(x.shape) // max(cols, 1), "cols": cols},
                str(x.dtype).removeprefix("torch."), timed=True)


def _result(traced: Traced):
    return traced.output


def triton_next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())
