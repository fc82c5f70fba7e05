"""A model run: profile -> extract -> plan -> one child run per planned problem -> verify the whole model.

`kernelsearch run` on a config with `model:` starts one; `kernelsearch resume NAME` continues it. Every step is
stored before the next begins (the ModelRun row: profile, plan, verify; a ModelProblem row per problem with its
child run's name), so a killed model run resumes where it stopped: a stored profile and plan are not redone (the
plan is the one printed before the search began), a finished child run is not searched again, an interrupted one
is resumed with runner.resume_run, and the verify step runs once every child is done.

The folder `<store's folder>/<name>.model/` holds the generated problem files (problems/), the winning kernels
(kernels/) and verify's request and result. Child runs are named `<model run>.<problem key>` in the same store.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Optional

from rich.console import Console
from sqlalchemy.exc import IntegrityError

from kernelsearch.config import Config, ConfigError, parse_config
from kernelsearch.model.extract import Part, extract, safe_key
from kernelsearch.model.plan import Plan, make_plan, plan_lines, profile_lines
from kernelsearch.runner import RunError, _open, resume_run, start_run
from kernelsearch.store import ModelProblem, ModelRun, Run, session_scope
from kernelsearch.store.model_queries import model_problems, model_run_of, run_named
from kernelsearch.store.queries import best_kernels, get_kernel

# what a model run passes to the profile and verify subprocesses besides their allow-listed environment
MODEL_ENV_PREFIX = "KERNELSEARCH_MODEL_"


def _say(console: Console, line: str = "") -> None:
    console.print(line, markup=False, soft_wrap=True, highlight=False)


def is_model_run(db: Path, name: str) -> bool:
    if not Path(db).exists():
        return False
    from kernelsearch.store import open_store
    from kernelsearch.store.database import StoreError

    try:
        engine = open_store(db, readonly=True)
    except StoreError:   # said by the resume that follows, in its own words
        return False
    try:
        with session_scope(engine) as s:
            run = run_named(s, name)
            return run is not None and model_run_of(s, run.id) is not None
    finally:
        engine.dispose()


def _device(cfg: Config) -> str:
    from kernelsearch.sandbox.pool import detect_mode

    try:
        mode, _ = detect_mode(cfg.device)
    except RuntimeError as err:
        raise RunError(str(err)) from None
    return "cuda" if mode == "cuda" else "cpu"


def start_model_run(cfg: Config, db: Path, name: Optional[str], console: Console) -> str:
    model = Path(cfg.model).resolve()
    engine = _open(db)
    name = name or cfg.name or f"{model.stem}-{datetime.now():%Y%m%d-%H%M%S}"
    exists = f"a run named {name!r} already exists in {db}; `kernelsearch resume {name}` continues it"
    device = _device(cfg)
    folder = Path(db).resolve().parent / f"{name}.model"
    try:
        with session_scope(engine) as s:
            if run_named(s, name):
                raise RunError(exists)
            run = Run(name=name, problem=f"model:{model}", config_json=cfg.model_dump_json(),
                      device="cpu-interpreter" if device == "cpu" else "cuda")
            s.add(run)
            s.flush()
            s.add(ModelRun(run_id=run.id, model=str(model), folder=str(folder)))
            run_id = run.id
    except IntegrityError:
        raise RunError(exists) from None
    _say(console, f"model run {name} in {db}: model {model}, device {device}"
         + (" (CPU times, labelled cpu: not GPU timings)" if device == "cpu" else ""))
    return _continue(cfg, engine, Path(db), run_id, name, console)


def resume_model_run(name: str, db: Path, console: Console) -> str:
    engine = _open(db)
    with session_scope(engine) as s:
        run = run_named(s, name)
        if run is None or model_run_of(s, run.id) is None:
            raise RunError(f"no model run named {name!r} in {db}")
        if run.status == "finished":
            raise RunError(f"model run {name!r} already finished ({run.stop_reason})")
        cfg = parse_config(json.loads(run.config_json), source=f"model run {name!r}'s stored config")
        run.status, run.stop_reason, run.finished_at = "running", None, None
        s.add(run)
        run_id = run.id
    _say(console, f"resuming model run {name} in {db}")
    return _continue(cfg, engine, Path(db), run_id, name, console)


def _continue(cfg: Config, engine, db: Path, run_id: int, name: str, console: Console) -> str:
    t0 = time.monotonic()
    try:
        return _steps(cfg, engine, db, run_id, name, console, t0)
    except (KeyboardInterrupt, RunError):
        _mark(engine, run_id, "interrupted", None, time.monotonic() - t0)
        raise


def _mark(engine, run_id: int, status: str, reason: Optional[str], spent: float) -> None:
    from kernelsearch.store.models import utcnow

    with session_scope(engine) as s:
        run = s.get(Run, run_id)
        run.status, run.stop_reason = status, reason
        run.elapsed_s = (run.elapsed_s or 0.0) + spent
        if status == "finished":
            run.finished_at = utcnow()
        s.add(run)


def _steps(cfg: Config, engine, db: Path, run_id: int, name: str, console: Console, t0: float) -> str:
    with session_scope(engine) as s:
        mr = model_run_of(s, run_id)
    folder = Path(mr.folder)
    folder.mkdir(parents=True, exist_ok=True)
    device = _device(cfg)
    stages: dict[str, float] = {}
    mark = time.monotonic()
    # 1. profile (a subprocess: the model's memory and CUDA context never live here)
    if mr.profile_json is None:
        _say(console, f"profiling {Path(mr.model).name} ({cfg.plan.profile_iters} forwards after a warm-up) ...")
        prof = profile_subprocess(Path(mr.model), device, cfg.plan.profile_iters, folder)
        with session_scope(engine) as s:
            row = s.get(ModelRun, mr.id)
            row.profile_json, row.stage = json.dumps(prof), "profiled"
            s.add(row)
    else:
        prof = json.loads(mr.profile_json)
    for line in profile_lines(prof):
        _say(console, line)
    stages["profile_s"], mark = time.monotonic() - mark, time.monotonic()
    # 2. extract and plan (stored before any search, printed every time)
    if mr.plan_json is None:
        parts = extract(prof)
        specs = {p.key: _write_problem(p, folder) for p in parts}   # before the plan: the matcher reads the files
        plan = make_plan(parts, prof, cfg.plan, cfg.budgets.model_dump(),
                         lambda p: _unsearchable(cfg, p, specs[p.key]))
        order = {e.key: i for i, e in enumerate(plan.entries)}
        selected = {e.key for e in plan.selected}
        with session_scope(engine) as s:
            for p in parts:
                spec = specs[p.key]
                s.add(ModelProblem(model_run_id=mr.id, key=p.key, spec=spec, part_json=json.dumps(p.__dict__),
                                   order=order[p.key], selected=p.key in selected,
                                   child_run=f"{name}.{safe_key(p.key)}" if p.key in selected else None))
            row = s.get(ModelRun, mr.id)
            row.plan_json, row.stage = json.dumps(plan.as_dict()), "planned"
            s.add(row)
    else:
        plan = Plan.from_dict(json.loads(mr.plan_json))
        _say(console, "(the plan as stored when the model run began)")
    for line in plan_lines(plan):
        _say(console, line)
    stages["plan_s"], mark = time.monotonic() - mark, time.monotonic()
    # 3. one child run per planned problem, one after another
    with session_scope(engine) as s:
        problems = model_problems(s, mr.id)
        row = s.get(ModelRun, mr.id)
        row.stage = "searching"
        s.add(row)
    entries = {e.key: e for e in plan.entries}
    for i, mp in enumerate([p for p in problems if p.selected], 1):
        _child(cfg, engine, db, mp, entries[mp.key].budget, console, f"[{i}/{len(plan.selected)}]")
    stages["search_s"], mark = time.monotonic() - mark, time.monotonic()
    # 4. verify the whole model with the winners
    with session_scope(engine) as s:
        row = s.get(ModelRun, mr.id)
        row.stage = "verifying"
        s.add(row)
        problems = model_problems(s, mr.id)
        winners, slower = _winners(s, problems, folder, device)
    for key, sp in slower:
        _say(console, f"{key}: its best kernel ({sp:.3g}x of eager) is not faster than the operator it would replace: "
             "not swapped in")
    result = verify_subprocess(cfg, Path(mr.model), device, folder, prof, plan, winners, console)
    stages["verify_s"] = time.monotonic() - mark
    result["pipeline_s"] = stages   # this call's wall time per step (a resumed run's steps done before are 0)
    with session_scope(engine) as s:
        row = s.get(ModelRun, mr.id)
        row.verify_json, row.stage = json.dumps(result), "done"
        s.add(row)
    from kernelsearch.model.verify import report_lines

    for line in report_lines(result):
        _say(console, line)
    _say(console, "wall time: " + ", ".join(f"{k.removesuffix('_s')} {v:.0f} s" for k, v in stages.items())
         + f", in all {sum(stages.values()):.0f} s")
    _mark(engine, run_id, "finished", "verified", time.monotonic() - t0)
    return name


def _write_problem(part: Part, folder: Path) -> str:
    """The child run's `problem:`: a family's spec, or a generated problem's file written under problems/."""
    if part.kind != "generated":
        return part.spec
    path = folder / "problems" / f"{safe_key(part.key)}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(part.source)
    return str(path)


def _unsearchable(cfg: Config, part: Part, spec: str) -> Optional[str]:
    """Why the provider cannot search `part`, or None. The offline provider searches a generated problem when the
    matcher finds a space for its reference (generators/match.py: elementwise graphs, a family's operation at other
    shapes), as its child run would; what the matcher refuses is left out with the matcher's one line."""
    if part.kind != "generated" or "offline" not in (cfg.role("ideas").provider, cfg.role("code").provider):
        return None
    from kernelsearch.generators.match import Unmatched, match_problem
    from kernelsearch.judge.problem import ProblemError, load_file

    try:
        match_problem(load_file(spec))
    except Unmatched as err:
        return str(err)
    except ProblemError as err:
        return f"the offline provider cannot load it: {err}"
    return None


def child_config(cfg: Config, spec: str, name: str, budget: dict) -> Config:
    """The child run's config: the model run's provider, search and evaluation settings, the problem, its share of
    the budgets."""
    raw = json.loads(cfg.model_dump_json())
    for key in ("model", "plan", "verify", "starter"):
        raw.pop(key, None)
    raw["problem"], raw["name"] = spec, name
    raw["budgets"] = {**raw.get("budgets", {}), **budget}
    try:
        return parse_config(raw, source=f"child run {name}")
    except ConfigError as err:
        raise RunError(str(err)) from None


def _child(cfg: Config, engine, db: Path, mp: ModelProblem, budget: dict, console: Console, head: str) -> None:
    with session_scope(engine) as s:
        run = run_named(s, mp.child_run)
        status = run.status if run else None
    head = f"{head} {mp.key} (child run {mp.child_run})"
    if status == "finished":
        _say(console, f"{head}: finished, not searched again")
    else:
        try:
            if status is None:
                _say(console, f"{head}: starting, budget " + ", ".join(f"{k} {v:g}" for k, v in budget.items()))
                start_run(child_config(cfg, mp.spec, mp.child_run, budget), db, mp.child_run, console)
            else:
                _say(console, f"{head}: resuming ({status})")
                resume_run(mp.child_run, db, console)
        except RunError as err:   # this problem's; the model run goes on with the others
            _say(console, f"{head}: not searched: {err}")
    with session_scope(engine) as s:
        run = run_named(s, mp.child_run)
        row = s.get(ModelProblem, mp.id)
        if run is not None and row.child_run_id != run.id:
            row.child_run_id = run.id
            s.add(row)


def _winners(s, problems: list[ModelProblem], folder: Path, device: str) -> tuple[list[dict], list]:
    """Each searched problem's best correct kernel, written to kernels/<key>.py for the verify subprocess. On a GPU
    one no faster than eager is not swapped in (returned second, with its speedup); on the CPU every best kernel
    is, so that the interpreter checks the swap (its timings rank nothing)."""
    out, slower = [], []
    for mp in problems:
        if not mp.selected or mp.child_run_id is None:
            continue
        best = best_kernels(s, mp.child_run_id, 1)
        if not best:
            continue
        if device == "cuda" and (best[0].speedup or 0.0) <= 1.0:
            slower.append((mp.key, best[0].speedup or 0.0))
            continue
        k = get_kernel(s, best[0].id)
        path = folder / "kernels" / f"{safe_key(mp.key)}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(k.code)
        out.append({"key": mp.key, "part": json.loads(mp.part_json), "kernel_file": str(path),
                    "kernel_id": k.id, "speedup": best[0].speedup})
    return out, slower


def _model_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(MODEL_ENV_PREFIX)}


def profile_subprocess(model: Path, device: str, iters: int, folder: Path) -> dict:
    """profile.py in a process of its own; a model that fails is a RunError of one line."""
    req, out = folder / "profile_request.json", folder / "profile.json"
    req.write_text(json.dumps({"model": str(model), "device": device, "iters": iters}))
    out.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "kernelsearch.model.profile", str(req), str(out)],
                          capture_output=True, text=True)
    if not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RunError(f"model {model}: the profile process ended with code {proc.returncode}: {tail[0]}")
    result = json.loads(out.read_text())
    if "error" in result:
        raise RunError(f"model {model}: {result['error']}")
    return result


def verify_subprocess(cfg: Config, model: Path, device: str, folder: Path, prof: dict, plan: Plan,
                      winners: list[dict], console: Console) -> dict:
    """verify.py in a subprocess with the workers' scrubbed environment: it loads the winning kernels (candidate
    code) into the model, which the trusted process never does."""
    from kernelsearch.sandbox.env import scrubbed_env

    entries = {e.key: e for e in plan.entries}
    for w in winners:
        w["share"] = entries[w["key"]].share
    compile_ = cfg.verify.compile == "on" or (cfg.verify.compile == "auto" and device == "cuda")
    seed = cfg.verify.seed if cfg.verify.seed is not None else int.from_bytes(os.urandom(4), "little")
    req = {"model": str(model), "device": device, "seed": seed, "winners": winners, "iters": cfg.verify.iters,
           "compile": compile_, "tolerance": cfg.verify.tolerance, "output_dtype": prof["output"]["dtype"]}
    rq, out = folder / "verify_request.json", folder / "verify.json"
    rq.write_text(json.dumps(req))
    out.unlink(missing_ok=True)
    extra = {**_model_env(), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    if device == "cpu":
        extra["TRITON_INTERPRET"] = "1"
    _say(console, f"verifying the whole model with {len(winners)} kernel(s) in a subprocess "
         f"(fresh inputs, seed {seed}{', torch.compile too' if compile_ else ''}) ...")
    try:
        proc = subprocess.run([sys.executable, "-m", "kernelsearch.model.verify", str(rq), str(out)],
                              capture_output=True, text=True, env=scrubbed_env(extra), cwd=folder,
                              timeout=cfg.verify.timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"verify took longer than verify.timeout_s {cfg.verify.timeout_s:g} s; killed"}
    if not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"the verify process ended with code {proc.returncode}: {tail[0]}"}
    return json.loads(out.read_text())
