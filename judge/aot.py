"""Ahead-of-time Triton compile for the H200 (sm_90) on a machine without a GPU.

How: the candidate's `ModelNew` runs once on CPU tensors in a process where Triton is *not* in interpreter mode,
with `JITFunction.run` replaced by a recorder: each launch's arguments are bound with Triton's own binder for
an sm_90 backend (so pointer dtypes, integer widths, divisibility and constexprs are exactly what a real launch
on the GPU would specialise on), and nothing is launched. Autotuned kernels record one launch per config. Each
distinct launch is then compiled with `triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`, and
`ptxas -v` on the produced PTX gives registers and spills (on a GPU they come from the driver at load time).

    report = aot_report(source, problem, case)       # case: a Case or its name; None = the problem's timed case
    report["status"]   # "ok" | "compile_error" (a kernel failed to compile) | "error" (the run itself failed)
    report["kernels"]  # [{name, signature, constexprs, num_warps, num_stages, registers, spills_bytes, ...}]

A process that already set TRITON_INTERPRET=1 (the CPU worker) cannot do this in process (its kernels are
interpreter functions), so `aot_report` then runs in a child process: `python -m kernelsearch.judge.aot`.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

from kernelsearch.judge.isolation import confine_candidate, die_with_parent, leave_network, orphans_reaped

ARCH = 90           # H200 / H100: sm_90 (ptxas target sm_90a)
WARP = 32
MAX_LAUNCHES = 32   # distinct specialisations compiled per candidate, at most


class AOTError(Exception):
    """The AOT check itself could not run (not a verdict on the candidate)."""


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# -- capture -------------------------------------------------------------------------------------------------

def _target():
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", ARCH, WARP)


def _describe(v: Any) -> Any:
    if hasattr(v, "cache_key"):
        return str(v.cache_key)
    if isinstance(v, (int, float, bool, str)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return [_describe(x) for x in v]
    return repr(v)


@contextlib.contextmanager
def _recording(launches: list[dict]):
    """Patch JITFunction.run (and Autotuner.run) so launches are recorded, bound for sm_90, and not run."""
    from triton.compiler import make_backend
    from triton.runtime import autotuner, jit

    backend = make_backend(_target())
    binders: dict[int, Any] = {}

    def run(self, *args, grid=None, warmup=False, **kwargs):
        kwargs["debug"] = kwargs.get("debug", self.debug) or False
        if id(self) not in binders:
            binders[id(self)] = jit.create_function_from_signature(self.signature, self.params, backend)
        bound_args, specialization, options = binders[id(self)](*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound_args, specialization,
                                                                options)
        launches.append({"fn": self, "signature": signature, "constexprs": constexprs, "attrs": attrs,
                         "options": options})
        return None

    def tune_run(self, *args, **kwargs):
        # every config is what the GPU would compile (and time); record them all, launch none
        for config in self.configs:
            self.fn.run(*args, **{**kwargs, **config.all_kwargs()})
        return None

    saved = (jit.JITFunction.run, autotuner.Autotuner.run)
    jit.JITFunction.run = run
    autotuner.Autotuner.run = tune_run
    try:
        yield
    finally:
        jit.JITFunction.run, autotuner.Autotuner.run = saved


# -- compile -------------------------------------------------------------------------------------------------

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


def _compile_one(launch: dict) -> dict:
    import triton
    from triton.compiler import ASTSource

    fn = launch["fn"]
    opts = launch["options"]
    entry: dict[str, Any] = {
        "name": fn.__name__,
        "signature": {k: str(v) for k, v in launch["signature"].items()},
        "num_warps": opts.num_warps,
        "num_stages": opts.num_stages,
    }
    # constexpr keys are index paths; name them after the kernel's parameters for the report
    names = fn.arg_names
    entry["constexprs"] = {names[k[0]] if isinstance(k, tuple) and len(k) == 1 else str(k): _describe(v)
                           for k, v in launch["constexprs"].items()}
    t0 = time.monotonic()
    try:
        src = ASTSource(fn, launch["signature"], launch["constexprs"], launch["attrs"])
        kernel = triton.compile(src, target=_target(), options=opts.__dict__)
    except Exception as err:  # noqa: BLE001 - the compiler's message is the verdict
        entry["status"] = "compile_error"
        entry["error"] = f"{type(err).__name__}: {err}"[-6000:]
        entry["compile_s"] = round(time.monotonic() - t0, 3)
        return entry
    md = kernel.metadata
    entry["status"] = "ok"
    entry["shared_bytes"] = int(md.shared)
    entry["compile_s"] = round(time.monotonic() - t0, 3)
    entry["memory_ops"] = memory_ops(kernel.asm["ptx"])
    try:
        usage = _ptxas_usage(kernel.asm["ptx"], getattr(opts, "enable_fp_fusion", True))
    except (AOTError, OSError, subprocess.SubprocessError) as err:
        entry["usage_error"] = str(err)
        usage = {}
    entry["registers"] = usage.get("registers")
    entry["spills_bytes"] = ((usage.get("spill_stores_bytes") or 0) + (usage.get("spill_loads_bytes") or 0)
                             if usage else None)
    entry.update({k: usage.get(k) for k in ("spill_stores_bytes", "spill_loads_bytes", "stack_bytes")})
    # a register budget check the GPU would make at load time: 64K registers per SM, 255 per thread
    threads = opts.num_warps * WARP
    if entry["registers"] and entry["registers"] * threads > 65536:
        entry["status"] = "compile_error"
        entry["error"] = (f"out of resources: {entry['registers']} registers x {threads} threads "
                          f"> 65536 per SM")
    if entry["shared_bytes"] > 232448:   # H100/H200 opt-in maximum per block
        entry["status"] = "compile_error"
        entry["error"] = f"out of resources: shared memory {entry['shared_bytes']} B > 232448 B (sm_90)"
    return entry


def _key(launch: dict) -> tuple:
    return (id(launch["fn"]), str(launch["signature"]), str(sorted((str(k), _describe(v))
            for k, v in launch["constexprs"].items())), str(launch["attrs"]), str(launch["options"]))


# -- in process ----------------------------------------------------------------------------------------------

def aot_report_inprocess(source: str, problem, case=None) -> dict:
    """Run the candidate once on CPU tensors recording launches, then compile each for sm_90. Needs a process
    where Triton is not in interpreter mode; candidate code runs here (call it only inside a sandboxed worker)."""
    if _interpreting():
        raise AOTError("aot_report_inprocess needs TRITON_INTERPRET unset (use aot_report, which spawns a child)")
    import torch

    from kernelsearch.judge.problem import load_source_module

    t0 = time.monotonic()
    case = _resolve_case(problem, case)
    report: dict[str, Any] = {"status": "ok", "arch": f"sm_{ARCH}", "case": case.name, "kernels": [],
                              "launches": 0, "run_error": None}
    launches: list[dict] = []
    try:
        # @triton.jit reads the kernel's source back from its file, so the candidate must live in one
        src_dir = tempfile.mkdtemp(prefix="ks-aot-src-")
        path = os.path.join(src_dir, "candidate.py")
        with open(path, "w") as f:
            f.write(source)
        try:
            module = load_source_module(source, f"ks_aot_candidate_{os.getpid()}_{int(t0 * 1e6)}", filename=path)
        finally:   # JITFunction keeps the source it read; the file is not needed after the module is loaded
            shutil.rmtree(src_dir, ignore_errors=True)
        inputs = problem.build_inputs(case, seed=1234, device="cpu")
        init = problem.build_init_inputs(case)
        with torch.no_grad(), _recording(launches):
            torch.manual_seed(0)
            model = module.ModelNew(*init)
            model(*inputs)
    except Exception as err:  # noqa: BLE001
        # with the real launch replaced, code after a launch may trip (it reads outputs never written); a
        # failure before any launch is the candidate's own
        report["run_error"] = f"{type(err).__name__}: {err}"
        if not launches:
            tb = traceback.format_exc(limit=-6)
            report["status"] = "compile_error" if _is_compile_error(err) else "error"
            report["error"] = f"{type(err).__name__}: {err}\n{tb}"[-6000:]
            report["wall_s"] = round(time.monotonic() - t0, 3)
            return report
    report["launches"] = len(launches)
    seen: set = set()
    for launch in launches:
        k = _key(launch)
        if k in seen:
            continue
        seen.add(k)
        if len(seen) > MAX_LAUNCHES:
            report["truncated"] = True
            break
        report["kernels"].append(_compile_one(launch))
    bad = [k for k in report["kernels"] if k["status"] != "ok"]
    if bad:
        report["status"] = "compile_error"
        report["error"] = "\n".join(f"{k['name']}: {k['error']}" for k in bad)[-6000:]
    elif not report["kernels"]:
        report["status"] = "error"
        report["error"] = "the candidate launched no @triton.jit kernel on this case" + (
            f" ({report['run_error']})" if report["run_error"] else "")
    report["wall_s"] = round(time.monotonic() - t0, 3)
    return report


def _is_compile_error(err: BaseException) -> bool:
    try:
        from triton.compiler.errors import CompilationError
    except ImportError:   # pragma: no cover
        return False
    return isinstance(err, CompilationError)


def _resolve_case(problem, case):
    if case is None:
        return problem.timed_case
    if isinstance(case, str):
        for c in problem.cases:
            if c.name == case:
                return c
        raise AOTError(f"problem {problem.name!r} has no case {case!r}")
    return case


# -- the public entry ----------------------------------------------------------------------------------------

def aot_report(source: str, problem, case=None, *, timeout_s: float = 300.0, in_process: bool | None = None,
               as_user: dict | None = None, isolate: bool = False) -> dict:
    """Compile every Triton kernel the candidate launches (on `case`) for sm_90 and report per kernel: name,
    registers, spills, shared memory, num_warps/num_stages; or status "compile_error" with the message.

    `in_process=None` runs in this process unless Triton is in interpreter mode here, in which case a child
    process (TRITON_INTERPRET unset, no GPU visible) does the work; `problem.ref` must then be set (it is for
    every loaded problem). The child inherits this process's environment otherwise (scrubbed by the pool).
    `as_user` ({"uid", "home"}): the child becomes that user once torch and Triton are imported, before the
    candidate's code loads, with `home` as its HOME, TMPDIR and Triton cache (the judge runs the candidate's sm_90
    compile this way: in a process of the candidate's own user, never in the judge's). `isolate`: the child also
    leaves the network (an empty namespace, where allowed), with or without a user of its own.
    """
    if in_process is None:
        in_process = not _interpreting()
    if in_process:
        return aot_report_inprocess(source, problem, case)
    case_name = _resolve_case(problem, case).name
    if not problem.ref:
        raise AOTError(f"problem {problem.name!r} has no ref: a child process cannot load it")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    if as_user:
        home = str(as_user["home"])
        env.update(HOME=home, TMPDIR=home, TRITON_CACHE_DIR=os.path.join(home, ".triton"))
    request = json.dumps({"source": source, "problem": problem.ref, "case": case_name,
                          "uid": as_user.get("uid") if as_user else None, "isolate": isolate})
    t0 = time.monotonic()
    # The child runs the candidate's code, which may leave processes behind (a daemon double-forked in a session of
    # its own): they are re-parented here and killed when it ends, and the report says so (`strays`, which the judge
    # rejects). The child's output goes to files, not pipes: a pipe stays open while a daemon holds it, and reading
    # to its end would wait for the daemon.
    strays: list[str] = []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with orphans_reaped(strays):
            try:
                p = subprocess.run([sys.executable, "-m", "kernelsearch.judge.aot"], input=request.encode(),
                                   preexec_fn=die_with_parent, stdout=out, stderr=err, timeout=timeout_s, env=env,
                                   start_new_session=True)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    wall = round(time.monotonic() - t0, 3)
    if strays:
        return {"status": "strays", "kernels": [], "case": case_name, "wall_s": wall, "strays": strays,
                "error": f"the sm_90 compile child (which ran the candidate's code) left {len(strays)} process(es) "
                         f"running: {', '.join(strays)[:300]}"}
    if timed_out:
        return {"status": "error", "error": f"AOT compile took longer than {timeout_s:g} s", "kernels": [],
                "case": case_name, "wall_s": wall}
    marker = "KS-AOT-REPORT "
    for line in reversed(stdout.splitlines()):
        if line.startswith(marker):
            return json.loads(line[len(marker):])
    # no report: the child (which ran the candidate's code) died or left before writing one. Its status is "died",
    # which the judge charges to the candidate: counted as a pass, a kernel that cannot compile for sm_90 went
    # through by exiting (fixture round3/aot_dies)
    return {"status": "died", "kernels": [], "case": case_name, "wall_s": wall,
            "error": f"the AOT child died (exit {p.returncode}) before its report: {(stderr or stdout)[-4000:]}"}


def _main() -> None:
    req = json.loads(sys.stdin.read())
    try:
        import triton.compiler  # noqa: F401 - imported before the user changes (the interpreter's files are root's)

        from kernelsearch.judge.problem import load_problem

        problem = load_problem(req["problem"])
        if req.get("uid") is not None or req.get("isolate"):
            leave_network()   # first: a network namespace needs root
            # before its code loads: the candidate's own user, or, keeping root's, none of root's capabilities (the
            # judge, its parent, holds the seed)
            confine_candidate(None if req.get("uid") is None else int(req["uid"]))
        with contextlib.redirect_stdout(sys.stderr):   # the candidate's prints must not garble the report
            report = aot_report_inprocess(req["source"], problem, req["case"])
    except Exception as err:  # noqa: BLE001
        report = {"status": "error", "kernels": [], "case": req.get("case"),
                  "error": f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=-6)}"[-6000:]}
    sys.stdout.write("KS-AOT-REPORT " + json.dumps(report, default=str) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    _main()
