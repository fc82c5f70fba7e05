"""The sm_90 compile of a candidate's Triton kernels, from its source text, in a process that runs none of its code.

judge/aot.py records the candidate's launches in a process that runs its code (the host code decides grids, dtypes
and constexprs) and that process's word is all this module takes from it: a list of launch records (kernel name,
signature, constexprs, attributes, a few options). The verdict is made here: the candidate's source is cut down to
what a Triton kernel needs (imports of triton and math, module constants built from literals, and the functions the
source makes Triton kernels with a `triton.jit` decorator or `name = triton.jit(fn)`), the kernels are re-made from
that text, and each recorded launch is compiled for sm_90 with ptxas reporting registers and spills. A candidate
that forges its records can name what is compiled, not what it compiles to: every kernel the source launches must
be recorded (`missing`), and a record of a kernel the cut-down source does not define is a compile error.

    records_report(source, records, case) -> report      # {"status", "kernels", "error", ...} as judge/aot.py's
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import tempfile
import time
from typing import Any

ARCH = 90           # H200 / H100: sm_90 (ptxas target sm_90a)
WARP = 32
MAX_LAUNCHES = 32   # distinct specialisations compiled per candidate, at most

# options a record may set (everything else keeps the sm_90 backend's default: a record naming an IR file to
# compile instead, `ir_override`, or its own libdevice path is not taken)
OPTION_KEYS = {"num_warps": int, "num_ctas": int, "num_stages": int, "maxnreg": (int, type(None)),
               "enable_fp_fusion": bool, "launch_cooperative_grid": bool, "launch_pdl": bool, "debug": bool,
               "sanitize_overflow": bool}
_MODULES = ("triton", "math")
_SAFE_CALLS = {"constexpr", "float", "int", "bool", "abs", "min", "max"}


class AOTError(Exception):
    """The AOT check itself could not run (not a verdict on the candidate)."""


# -- the source, cut down ------------------------------------------------------------------------------------

def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _is_jit(node: ast.AST, aliases: dict[str, str]) -> bool:
    """`triton.jit`, `tl`-free `jit` imported from triton, or either called with options (`triton.jit(...)`)."""
    if isinstance(node, ast.Call):
        node = node.func
    name = _dotted(node)
    if not name:
        return False
    head, _, rest = name.partition(".")
    full = ".".join(filter(None, [aliases.get(head, ""), rest])) if head in aliases else name
    return full in ("triton.jit", "triton.runtime.jit.jit", "triton.runtime.jit")


def _literal(node: ast.AST, known: set[str]) -> bool:
    """An expression of literals, arithmetic, earlier constants and math/tl.constexpr calls: safe to evaluate."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Constant, ast.UnaryOp, ast.BinOp, ast.operator, ast.unaryop, ast.Load, ast.Tuple,
                            ast.List, ast.keyword)):
            continue
        if isinstance(sub, ast.Name) and (sub.id in known or sub.id in _SAFE_CALLS):
            continue
        if isinstance(sub, ast.Attribute) and (_dotted(sub) or "").split(".")[0] in known:
            continue
        if isinstance(sub, ast.Call):
            fn = _dotted(sub.func) or ""
            if fn.split(".")[-1] in _SAFE_CALLS or fn.startswith("math."):
                continue
        return False
    return True


def _plain_annotation(node: ast.AST | None) -> bool:
    return node is None or (isinstance(node, ast.Constant) and isinstance(node.value, str)) or bool(_dotted(node))


JIT_OPTIONS = ("noinline", "do_not_specialize", "do_not_specialize_on_alignment", "debug")


def _jit_decorator(fn: ast.FunctionDef, aliases: dict[str, str]) -> ast.expr:
    """`@_ks_jit`, with the literal options of the source's `@triton.jit(...)` that change what is compiled
    (`noinline=True`: a device function compiled as a call, not inlined); any other option is dropped."""
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and _is_jit(d, aliases):
            kept = [k for k in d.keywords if k.arg in JIT_OPTIONS and _literal(k.value, set())]
            if kept:
                return ast.Call(func=ast.Attribute(ast.Name("_ks_functools", ast.Load()), "partial", ast.Load()),
                                args=[ast.Name("_ks_jit", ast.Load())], keywords=kept)
    return ast.Name("_ks_jit", ast.Load())


def kernel_module_source(source: str) -> tuple[str, set[str], set[str]]:
    """The candidate's source cut down to its kernels: (text, kernel names, names the source launches as
    `name[grid](...)`). Nothing of the text runs but imports of triton and math, literal constants and `def`s."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    known: set[str] = set()
    kernels: set[str] = set()
    body: list[ast.stmt] = ast.parse("import functools as _ks_functools\n"
                                     "from triton.runtime.jit import JITFunction as _ks_jit").body
    defs: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            keep = [a for a in node.names if a.name.split(".")[0] in _MODULES]
            for a in keep:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                known.add(a.asname or a.name.split(".")[0])
            if keep:
                body.append(ast.Import(names=keep))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in _MODULES:
            body.append(node)
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                known.add(a.asname or a.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _literal(node.value, known):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) for t in targets):
                body.append(ast.Assign(targets=targets, value=node.value, lineno=node.lineno))
                known.update(t.id for t in targets)
        elif isinstance(node, ast.FunctionDef):
            defs[node.name] = node
            if any(_is_jit(d, aliases) for d in node.decorator_list):
                kernels.add(node.name)
    # `name = triton.jit(fn)`: fn is a plain def made a kernel by a call
    made: dict[str, str] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and _is_jit(node.value.func, aliases) and len(node.value.args) == 1
                and isinstance(node.value.args[0], ast.Name) and node.value.args[0].id in defs):
            made[node.targets[0].id] = node.value.args[0].id
    for name in sorted(kernels | set(made.values())):
        fn = defs[name]
        args = fn.args
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if not _plain_annotation(a.annotation):
                a.annotation = None
        args.defaults = [d if _literal(d, known) else ast.Constant(None) for d in args.defaults]
        args.kw_defaults = [d if d is None or _literal(d, known) else ast.Constant(None) for d in args.kw_defaults]
        fn.returns = None
        fn.decorator_list = [_jit_decorator(fn, aliases)] if name in kernels else []
        body.append(fn)
    for alias, fn_name in made.items():
        body.append(ast.parse(f"{alias} = _ks_jit({fn_name})").body[0])
        kernels.add(alias)
    module = ast.Module(body=body, type_ignores=[])
    text = ast.unparse(ast.fix_missing_locations(module))
    launched = {n.func.value.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                and isinstance(n.func.value, ast.Name) and n.func.value.id in kernels}
    return text, kernels, launched


def load_kernels(source: str) -> tuple[dict[str, Any], set[str]]:
    """The kernels re-made from the cut-down source (JITFunctions: compiled, never interpreted, whatever
    TRITON_INTERPRET says), and the names the source launches."""
    import importlib.util

    text, kernels, launched = kernel_module_source(source)
    d = tempfile.mkdtemp(prefix="ks-aot-kernels-")
    path = os.path.join(d, "kernels.py")   # @jit reads a kernel's source back from its file
    with open(path, "w") as f:
        f.write(text)
    try:
        spec = importlib.util.spec_from_file_location(f"ks_aot_kernels_{os.getpid()}_{time.monotonic_ns()}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:   # @jit has read each kernel's source by now; one folder an evaluation was left in /tmp (279 in a day)
        shutil.rmtree(d, ignore_errors=True)
    return {k: getattr(module, k) for k in kernels}, launched


# -- records -------------------------------------------------------------------------------------------------

def _decode_value(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"dtype"}:
        import triton.language as tl

        return tl.dtype(str(v["dtype"]))
    if isinstance(v, list):
        return tuple(_decode_value(x) for x in v)
    if v is None or isinstance(v, (int, float, bool, str)):
        return v
    raise AOTError(f"a launch record holds a value of type {type(v).__name__}")


def _path(p: Any) -> tuple:
    return tuple(int(i) for i in p) if isinstance(p, list) else (int(p),)


def _options(raw: dict) -> dict:
    out = {}
    for k, v in (raw or {}).items():
        kind = OPTION_KEYS.get(k)
        if kind is not None and isinstance(v, kind) and not (kind is int and isinstance(v, bool)):
            out[k] = v
    return out


def target():
    """The H200 / H100 as Triton's compiler names it (sm_90, 32-thread warps)."""
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", ARCH, WARP)


_PTXAS_RE = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores_bytes": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads_bytes": re.compile(r"(\d+) bytes spill loads"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
}
_MEMOP_RE = re.compile(r"^\s*(?:@!?%p\d+\s+)?((?:ld|st)\.global(?:\.[a-zA-Z0-9_:]+)*)", re.M)


def memory_ops(ptx: str) -> dict[str, int]:
    """Global load/store instructions in the PTX by full opcode (`ld.global.v4.b32`: a 16-byte vector load;
    `ld.global.b16`: one bf16 element per instruction): how wide the kernel's memory accesses compiled. The
    cache qualifiers (`.L1::evict_last`, ...) are part of the opcode."""
    counts: dict[str, int] = {}
    for m in _MEMOP_RE.finditer(ptx):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return dict(sorted(counts.items()))


def _ptxas_usage(ptx: str, fp_fusion: bool) -> dict:
    """Registers and spills from `ptxas -v` (Triton deletes its own ptxas log)."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    with tempfile.TemporaryDirectory(prefix="ks-aot-") as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [get_ptxas(ARCH).path, "-v", *([] if fp_fusion else ["--fmad=false"]),
               f"--gpu-name={sm_arch_from_capability(ARCH)}", src, "-o", os.path.join(d, "k.cubin")]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AOTError(f"ptxas -v failed ({p.returncode}): {p.stderr[-2000:]}")
    out: dict[str, Any] = {}
    for key, rx in _PTXAS_RE.items():
        m = rx.search(p.stderr)
        out[key] = int(m.group(1)) if m else None
    return out


def _compile_one(fn, record: dict) -> dict:
    import triton
    from triton.compiler import ASTSource

    opts = {**_options(record.get("options")), "arch": f"sm{ARCH}"}
    signature = {str(k): str(v) for k, v in record["signature"].items()}
    constexprs = {_path(p): _decode_value(v) for p, v in record["constexprs"]}
    attrs = {_path(p): [list(a) for a in v] for p, v in record["attrs"]}
    names = fn.arg_names
    entry: dict[str, Any] = {
        "name": record["kernel"], "signature": signature,
        "num_warps": opts.get("num_warps", 4), "num_stages": opts.get("num_stages", 3),
        "constexprs": {names[p[0]] if len(p) == 1 and p[0] < len(names) else str(p): v
                       for p, v in ((_path(p), v) for p, v in record["constexprs"])},
    }
    t0 = time.monotonic()
    try:
        kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target(), options=opts)
    except Exception as err:  # noqa: BLE001 - the compiler's message is the verdict
        entry.update(status="compile_error", error=f"{type(err).__name__}: {err}"[-6000:],
                     compile_s=round(time.monotonic() - t0, 3))
        return entry
    md = kernel.metadata
    entry.update(status="ok", shared_bytes=int(md.shared), compile_s=round(time.monotonic() - t0, 3),
                 memory_ops=memory_ops(kernel.asm["ptx"]))
    try:
        usage = _ptxas_usage(kernel.asm["ptx"], opts.get("enable_fp_fusion", True))
    except (AOTError, OSError, subprocess.SubprocessError) as err:
        entry["usage_error"] = str(err)
        usage = {}
    entry["registers"] = usage.get("registers")
    entry["spills_bytes"] = ((usage.get("spill_stores_bytes") or 0) + (usage.get("spill_loads_bytes") or 0)
                             if usage else None)
    entry.update({k: usage.get(k) for k in ("spill_stores_bytes", "spill_loads_bytes", "stack_bytes")})
    # a register budget check the GPU would make at load time: 64K registers per SM, 255 per thread
    threads = entry["num_warps"] * WARP
    if entry["registers"] and entry["registers"] * threads > 65536:
        entry.update(status="compile_error",
                     error=f"out of resources: {entry['registers']} registers x {threads} threads > 65536 per SM")
    if entry["shared_bytes"] > 232448:   # H100/H200 opt-in maximum per block
        entry.update(status="compile_error",
                     error=f"out of resources: shared memory {entry['shared_bytes']} B > 232448 B (sm_90)")
    return entry


def _key(record: dict) -> str:
    return repr((record.get("kernel"), sorted(record.get("signature", {}).items()), record.get("constexprs"),
                 record.get("attrs"), sorted(_options(record.get("options")).items())))


def records_report(source: str, records: list[dict], case: str | None = None,
                   required: set[str] | None = None) -> dict:
    """Compile the recorded launches of the kernels re-made from `source` (see the module's docstring). `required`:
    kernels that must be among the records (those the judge's runner saw launched); `missing` lists them where they
    are not, a compile error. A kernel the source launches on no case (a generated starter's other branch) is listed
    in `unreached`, not compiled."""
    t0 = time.monotonic()
    report: dict[str, Any] = {"status": "ok", "arch": f"sm_{ARCH}", "case": case, "kernels": [],
                              "launches": len(records)}
    try:
        kernels, launched = load_kernels(source)
    except Exception as err:  # noqa: BLE001 - a source Triton cannot make kernels of is the candidate's
        report.update(status="compile_error", error=f"the kernels, read from the source: {type(err).__name__}: {err}")
        return report
    seen: set[str] = set()
    covered: set[str] = set()
    for record in records:
        k = _key(record)
        if k in seen:
            continue
        seen.add(k)
        if len(seen) > MAX_LAUNCHES:
            report["truncated"] = True
            break
        name = str(record.get("kernel"))
        covered.add(name)
        if name not in kernels:
            report["kernels"].append({"name": name, "status": "compile_error", "error":
                                      f"{name} is not a kernel of the source in a form the sm_90 check reads (a "
                                      "top-level def decorated with @triton.jit, or `name = triton.jit(fn)`)"})
            continue
        try:
            report["kernels"].append(_compile_one(kernels[name], record))
        except (AOTError, KeyError, TypeError, ValueError, IndexError) as err:
            report["kernels"].append({"name": name, "status": "compile_error",
                                      "error": f"its launch record cannot be compiled: {type(err).__name__}: {err}"})
    report["missing"] = sorted((required or set()) - covered)
    report["unreached"] = sorted(launched - covered - (required or set()))
    bad = [k for k in report["kernels"] if k["status"] != "ok"]
    if bad:
        report["status"] = "compile_error"
        report["error"] = "\n".join(f"{k['name']}: {k['error']}" for k in bad)[-6000:]
    elif report["missing"] and report.get("truncated") is None:
        report["status"] = "compile_error"
        report["error"] = (f"{', '.join(report['missing'])}: launched in the correctness calls but not among the "
                           "launches the candidate's process recorded for the sm_90 compile, so never compiled for "
                           "the GPU")
    elif not report["kernels"]:
        report["status"] = "error"
        report["error"] = "the candidate launched no @triton.jit kernel on this case"
    report["wall_s"] = round(time.monotonic() - t0, 3)
    return report
