"""Ahead-of-time Triton compile for the H200 (sm_90) on a machine without a GPU.

How: the candidate's `ModelNew` runs once on CPU tensors in a process where Triton is *not* in interpreter mode,
with `JITFunction.run` replaced by a recorder: each launch's arguments are bound with Triton's own binder for
an sm_90 backend (so pointer dtypes, integer widths, divisibility and constexprs are exactly what a real launch
on the GPU would specialise on), and nothing is launched. Autotuned kernels record one launch per config. The
records (JSON) are then compiled by judge/aot_compile.py, in a process that runs none of the candidate's code where
this one ran it: the kernels re-made from the source's text, each distinct launch compiled with
`triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))`, and `ptxas -v` on the produced PTX giving
registers and spills (on a GPU they come from the driver at load time).

    report = aot_report(source, problem, case)       # case: a Case or its name; None = the problem's timed case
    report["status"]   # "ok" | "compile_error" (a kernel failed to compile) | "error" (the run itself failed)
    report["kernels"]  # [{name, signature, constexprs, num_warps, num_stages, registers, spills_bytes, ...}]

A process that already set TRITON_INTERPRET=1 (the CPU worker) cannot do this in process (its kernels are
interpreter functions), so `aot_report` then records in a child process (`python -m kernelsearch.judge.aot`, the
candidate's user) and compiles in a second one (the judge's user, none of the candidate's code).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

from kernelsearch.judge.aot_compile import OPTION_KEYS, AOTError, target
from kernelsearch.judge.isolation import confine_candidate, die_with_parent, leave_network, orphans_reaped


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


# -- capture -------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _recording(launches: list[dict]):
    """Patch JITFunction.run (and Autotuner.run) so launches are recorded, bound for sm_90, and not run."""
    from triton.compiler import make_backend
    from triton.runtime import autotuner, jit

    backend = make_backend(target())
    binders: dict[int, Any] = {}

    def run(self, *args, grid=None, warmup=False, **kwargs):
        kwargs["debug"] = kwargs.get("debug", self.debug) or False
        if id(self) not in binders:
            binders[id(self)] = jit.create_function_from_signature(self.signature, self.params, backend)
        bound_args, specialization, options = binders[id(self)](*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound_args, specialization, options)
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


def record(launch: dict) -> dict:
    """A launch as the sm_90 compile takes it (judge/aot_compile.py): JSON, no object of the candidate's."""
    def value(v):
        if hasattr(v, "primitive_bitwidth") or type(v).__name__ == "dtype":
            return {"dtype": str(v)}
        if isinstance(v, (tuple, list)):
            return [value(x) for x in v]
        return v if v is None or isinstance(v, (int, float, bool, str)) else repr(v)

    opts = launch["options"].__dict__
    return {"kernel": launch["fn"].__name__,
            "signature": {str(k): str(v) for k, v in launch["signature"].items()},
            "constexprs": [[list(k) if isinstance(k, tuple) else k, value(v)] for k, v in launch["constexprs"].items()],
            "attrs": [[list(k) if isinstance(k, tuple) else k, value(v)] for k, v in launch["attrs"].items()],
            "options": {k: opts[k] for k in OPTION_KEYS if k in opts}}


# -- in process ----------------------------------------------------------------------------------------------

def record_launches(source: str, problem, cases: list) -> dict:
    """Run the candidate once on CPU tensors per case, recording its launches bound for sm_90 (nothing launches):
    {"records": [...], "error": ..., "compile_error": bool}. The first case is the one reported; a later one runs
    only while a kernel the source launches has no record yet (a kernel on a branch the first case does not take).
    Runs candidate code: call it only in a process of the candidate's (the child of `aot_report`) or a trusted one."""
    if _interpreting():
        raise AOTError("recording launches needs TRITON_INTERPRET unset (use aot_report, which spawns a child)")
    import torch

    from kernelsearch.judge.aot_compile import kernel_module_source
    from kernelsearch.judge.problem import load_source_module

    t0 = time.monotonic()
    out: dict[str, Any] = {"records": [], "error": None, "compile_error": False}
    # @triton.jit reads the kernel's source back from its file, so the candidate must live in one
    src_dir = tempfile.mkdtemp(prefix="ks-aot-src-")
    path = os.path.join(src_dir, "candidate.py")
    with open(path, "w") as f:
        f.write(source)
    try:
        _, _, wanted = kernel_module_source(source)
    except SyntaxError:
        wanted = set()
    try:
        module = load_source_module(source, f"ks_aot_candidate_{os.getpid()}_{int(t0 * 1e6)}", filename=path)
    except Exception as err:  # noqa: BLE001
        out.update(error=f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=-6)}"[-6000:],
                   compile_error=_is_compile_error(err))
        return out
    finally:   # JITFunction keeps the source it read; the file is not needed after the module is loaded
        shutil.rmtree(src_dir, ignore_errors=True)
    for i, case in enumerate(cases):
        launches: list[dict] = []
        try:
            inputs = problem.build_inputs(case, seed=1234, device="cpu")
            init = problem.build_init_inputs(case)
            with torch.no_grad(), _recording(launches):
                torch.manual_seed(0)
                model = module.ModelNew(*init)
                model(*inputs)
        except Exception as err:  # noqa: BLE001
            # with the real launch replaced, code after a launch may trip (it reads outputs never written); a
            # failure before any launch is the candidate's own
            if i == 0 and not launches:
                out.update(error=f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=-6)}"[-6000:],
                           compile_error=_is_compile_error(err))
                return out
            out.setdefault("run_error", f"{type(err).__name__}: {err}")
        out["records"] += [{**record(lc), "case": case.name} for lc in launches]
        if not wanted - {r["kernel"] for r in out["records"]}:
            break
    return out


def aot_report_inprocess(source: str, problem, case=None, required: set[str] | None = None) -> dict:
    """Record the candidate's launches and compile them for sm_90, both in this process (which runs the candidate's
    code: call it only inside a sandboxed worker or on trusted sources). Needs TRITON_INTERPRET unset."""
    from kernelsearch.judge.aot_compile import records_report

    case = _resolve_case(problem, case)
    rec = record_launches(source, problem, _cases(problem, case))
    return _report(source, rec, case.name, lambda *a: records_report(*a, required=required))


def _cases(problem, first) -> list:
    """The reported case first, then the problem's others that fit the CPU (a kernel on another branch)."""
    return [first, *(c for c in problem.cases_for("cpu") if c.name != first.name)]


def _report(source: str, rec: dict, case_name: str, compile_records) -> dict:
    t0 = time.monotonic()
    if rec.get("error") and not rec.get("records") and rec.get("compile_error"):
        return {"status": "compile_error", "kernels": [], "case": case_name, "launches": 0, "error": rec["error"],
                "run_error": rec["error"]}
    # an error and no records otherwise goes to the compile too: the records are the candidate's process's word, and
    # an "error" it writes must not stand in for the kernels its runner was seen to launch (`required`)
    records = [r for r in rec["records"] if r.get("case") == case_name]
    others = [r for r in rec["records"] if r.get("case") != case_name
              and r.get("kernel") not in {x.get("kernel") for x in records}]
    report = compile_records(source, records + others, case_name)
    report["launches"] = len(records)
    report["run_error"] = rec.get("run_error") or rec.get("error")
    if report.get("status") == "error" and report["run_error"]:
        report["error"] += f" ({report['run_error']})"
    report["wall_s"] = round(report.get("wall_s", 0) + time.monotonic() - t0, 3)
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

def _child(request: dict, env: dict, timeout_s: float, marker: str) -> tuple[dict | None, dict]:
    """Run `python -m kernelsearch.judge.aot` on `request`; (the JSON after `marker` on its stdout, or None; facts:
    strays, timed_out, returncode, tail). Output goes to files, not pipes: a pipe stays open while a daemon the
    child left holds it, and reading to its end would wait for the daemon. Orphans it leaves (a daemon double-forked
    in a session of its own) are re-parented here and killed when it ends, and named in `strays`."""
    strays: list[str] = []
    facts: dict[str, Any] = {"strays": strays, "timed_out": False, "returncode": None}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with orphans_reaped(strays):
            try:
                p = subprocess.run([sys.executable, "-m", "kernelsearch.judge.aot"], input=json.dumps(request).encode(),
                                   preexec_fn=die_with_parent, stdout=out, stderr=err, timeout=timeout_s, env=env,
                                   start_new_session=True)
                facts["returncode"] = p.returncode
            except subprocess.TimeoutExpired:
                facts["timed_out"] = True
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    facts["tail"] = (stderr or stdout)[-4000:]
    for line in reversed(stdout.splitlines()):
        if line.startswith(marker):
            try:
                return json.loads(line[len(marker):]), facts
            except ValueError:
                break
    return None, facts


def aot_report(source: str, problem, case=None, *, timeout_s: float = 300.0, in_process: bool | None = None,
               as_user: dict | None = None, isolate: bool = False, required: set[str] | None = None) -> dict:
    """Compile every Triton kernel the candidate launches (on `case`) for sm_90 and report per kernel: name,
    registers, spills, shared memory, num_warps/num_stages; or status "compile_error" with the message.

    Two steps. The candidate's launches are recorded in a process that runs its code: this one where
    `in_process` (None: unless Triton is in interpreter mode here), else a child (TRITON_INTERPRET unset, no GPU
    visible; `problem.ref` must be set, as it is for every loaded problem). `as_user` ({"uid", "home"}): that child
    becomes that user once torch and Triton are imported, before the candidate's code loads, with `home` as its HOME,
    TMPDIR and Triton cache; `isolate`: it also leaves the network. The records are then compiled from the source
    text by judge/aot_compile.py in a process that runs none of the candidate's code (a second child where this one
    interprets), so the candidate's process can say which launches it made, never what they compiled to.
    `required`: kernels that must be among the records (the judge passes those its runner saw launched in the
    correctness calls); one left out is a compile error. None: the records' word alone.
    """
    if in_process is None:
        in_process = not _interpreting()
    if in_process:
        return aot_report_inprocess(source, problem, case, required)
    case_name = _resolve_case(problem, case).name
    if not problem.ref:
        raise AOTError(f"problem {problem.name!r} has no ref: a child process cannot load it")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    judge_env = dict(env)
    if as_user:
        home = str(as_user["home"])
        env.update(HOME=home, TMPDIR=home, TRITON_CACHE_DIR=os.path.join(home, ".triton"))
    t0 = time.monotonic()
    rec, facts = _child({"op": "record", "source": source, "problem": problem.ref, "case": case_name,
                         "uid": as_user.get("uid") if as_user else None, "isolate": isolate},
                        env, timeout_s, "KS-AOT-LAUNCHES ")
    wall = round(time.monotonic() - t0, 3)
    if facts["strays"]:
        return {"status": "strays", "kernels": [], "case": case_name, "wall_s": wall, "strays": facts["strays"],
                "error": f"the sm_90 compile child (which ran the candidate's code) left {len(facts['strays'])} "
                         f"process(es) running: {', '.join(facts['strays'])[:300]}"}
    if facts["timed_out"]:
        return {"status": "error", "error": f"AOT compile took longer than {timeout_s:g} s", "kernels": [],
                "case": case_name, "wall_s": wall}
    if rec is None or not isinstance(rec.get("records"), list):
        # no record: the child (which ran the candidate's code) died or left before writing one. Its status is
        # "died", which the judge charges to the candidate: counted as a pass, a kernel that cannot compile for
        # sm_90 went through by exiting (fixture round3/aot_dies)
        return {"status": "died", "kernels": [], "case": case_name, "wall_s": wall,
                "error": f"the AOT child died (exit {facts['returncode']}) before its launch records: {facts['tail']}"}

    def compile_elsewhere(src: str, records: list, case: str) -> dict:
        report, f = _child({"op": "compile", "source": src, "records": records, "case": case,
                            "required": sorted(required or ())}, judge_env, timeout_s, "KS-AOT-REPORT ")
        if report is None:   # the compiler itself died or hung on the candidate's kernels
            return {"status": "compile_error", "kernels": [], "case": case,
                    "error": (f"the Triton compiler took longer than {timeout_s:g} s" if f["timed_out"] else
                              f"the Triton compiler died (exit {f['returncode']}) on the kernels: {f['tail']}")}
        return report

    report = _report(source, rec, case_name, compile_elsewhere)
    report["wall_s"] = round(time.monotonic() - t0, 3)
    return report


def _main() -> None:
    req = json.loads(sys.stdin.read())
    if req.get("op") == "compile":   # the judge's side: none of the candidate's code runs here
        from kernelsearch.judge.aot_compile import records_report

        leave_network()
        try:
            report = records_report(req["source"], req["records"], req.get("case"), set(req.get("required") or ()))
        except Exception as err:  # noqa: BLE001
            report = {"status": "error", "kernels": [], "case": req.get("case"),
                      "error": f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=-6)}"[-6000:]}
        sys.stdout.write("KS-AOT-REPORT " + json.dumps(report, default=str) + "\n")
        sys.stdout.flush()
        os._exit(0)
    try:
        import triton.compiler  # noqa: F401 - imported before the user changes (the interpreter's files are root's)

        from kernelsearch.judge.problem import load_problem

        problem = load_problem(req["problem"])
        if req.get("uid") is not None or req.get("isolate"):
            leave_network()   # first: a network namespace needs root
            # before its code loads: the candidate's own user, or, keeping root's, none of root's capabilities (the
            # judge, its parent, holds the seed)
            confine_candidate(None if req.get("uid") is None else int(req["uid"]))
        case = _resolve_case(problem, req["case"])
        with contextlib.redirect_stdout(sys.stderr):   # the candidate's prints must not garble the records
            rec = record_launches(req["source"], problem, _cases(problem, case))
    except Exception as err:  # noqa: BLE001
        rec = {"records": [], "error": f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=-6)}"[-6000:]}
    sys.stdout.write("KS-AOT-LAUNCHES " + json.dumps(rec, default=str) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    _main()
