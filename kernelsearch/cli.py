"""The command line: `kernelsearch run | resume | bench | experiment | eval` here; the read-only views are in views/."""
from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from sqlalchemy.exc import DatabaseError

from kernelsearch import views
from kernelsearch.config import ConfigError, load_config
from kernelsearch.export import export_cmd
from kernelsearch.store import DEFAULT_DB

app = typer.Typer(add_completion=False, no_args_is_help=True, help="LLM-driven tree search for fast GPU kernels.")
views.register(app)
app.command("export")(export_cmd)
console = Console(highlight=False)


def _fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)   # one line, never wrapped
    raise typer.Exit(2)


def _sqlite_says(err: DatabaseError) -> str:
    orig = getattr(err, "orig", None) or err
    return f"SQLite says {str(orig).splitlines()[0] if str(orig) else type(orig).__name__}"


@app.command()
def run(config: Path = typer.Argument(..., help="YAML config file"),
        db: Optional[Path] = typer.Option(None, help="SQLite store (default: the config's `store`)"),
        name: Optional[str] = typer.Option(None, help="run name (default: the config's `name`, or problem+time)")
        ) -> None:
    """Launch a search from a config file."""
    from kernelsearch.runner import RunError, start_run

    cfg = None
    try:
        cfg = load_config(config)
        if cfg.model is not None:   # a whole model: profile, plan, child runs, verify (kernelsearch/model/)
            from kernelsearch.model.pipeline import start_model_run

            start_model_run(cfg, db or cfg.store, name, console)
        else:
            start_run(cfg, db or cfg.store, name, console)
    except (ConfigError, RunError) as err:
        _fail(str(err))
    except DatabaseError as err:   # the store failed under the run (damage found mid-run, a disk error)
        _fail(f"store {db or (cfg.store if cfg else '?')}: {_sqlite_says(err)}")


@app.command()
def resume(name: str = typer.Argument(..., help="the run to continue"),
           db: Path = typer.Option(DEFAULT_DB, help="SQLite store"),
           evaluations: Optional[int] = typer.Option(None, help="a larger evaluation budget (kernels in all)"),
           wall_time: Optional[float] = typer.Option(None, help="a larger wall-time budget, seconds, counted from "
                                                     "the run's start"),
           rounds: Optional[int] = typer.Option(None, help="more rounds (the total)")) -> None:
    """Continue a run: an interrupted one where it stopped (nothing already evaluated is redone or lost), a
    finished one with a larger budget, which is stored in the run's config."""
    from kernelsearch.model.pipeline import is_model_run, resume_model_run
    from kernelsearch.runner import RunError, resume_run

    try:
        if is_model_run(db, name):   # its child runs are resumed or started in turn, then the model is verified
            resume_model_run(name, db, console)
        else:
            resume_run(name, db, console, evaluations=evaluations, wall_time_s=wall_time, rounds=rounds)
    except (ConfigError, RunError) as err:
        _fail(str(err))
    except DatabaseError as err:
        _fail(f"store {db}: {_sqlite_says(err)}")


@app.command()
def bench(paths: list[str] = typer.Argument(..., help="a folder of KernelBench-format problem files, files, or a "
                                            "glob ('level1/*.py')"),
          config: Path = typer.Option(..., help="YAML config for every problem: provider, search, budgets (no "
                                      "`problem:`)"),
          problems: Optional[str] = typer.Option(None, help="KernelBench numbers to keep: 1-20, or 3,5-7"),
          db: Optional[Path] = typer.Option(None, help="SQLite store (default: the config's `store`)"),
          name: Optional[str] = typer.Option(None, help="the batch's name, prefix of its runs' names (default: "
                                             "the config's `name`, or its file stem)"),
          jobs: int = typer.Option(1, help="problems searched at once, sharing one pool of evaluators (the config's "
                                   "search.concurrency evaluations in all)"),
          no_compile: bool = typer.Option(False, "--no-compile", help="do not time torch.compile beside eager "
                                          "(timed by default on a GPU: fast_p over torch.compile)")) -> None:
    """Search a batch of problems into one store, one after another (or --jobs at once), then print a table and
    fast_p. Rerun the same command to go on: finished problems are not searched again, interrupted ones are
    resumed."""
    from kernelsearch.bench import BenchError, run_bench

    try:
        run_bench(paths, config, db, name, problems, console, jobs=jobs, no_compile=no_compile)
    except BenchError as err:
        _fail(str(err))
    except DatabaseError as err:
        _fail(f"store {db or '?'}: {_sqlite_says(err)}")
    except KeyboardInterrupt:
        print("batch interrupted; rerun the same command to go on where it stopped", file=sys.stderr)
        raise typer.Exit(130) from None


@app.command()
def experiment(config: Path = typer.Argument(..., help="YAML config: the problem, provider, search and evaluation"),
               strategies: str = typer.Option("branching,sequential,best_of_n,evolutionary",
                                              help="comma-separated strategies"),
               budgets: str = typer.Option("16,32,64", help="comma-separated evaluation budgets"),
               repeats: int = typer.Option(3, help="runs per strategy and budget (repeat r: search.seed + r)"),
               nested: bool = typer.Option(False, help="one run per strategy and repeat at the largest budget; "
                                           "smaller budgets read from its first evaluations"),
               db: Optional[Path] = typer.Option(None, help="SQLite store (default: the config's `store`)"),
               name: Optional[str] = typer.Option(None, help="the experiment's name, prefix of its runs' names "
                                                  "(default: the config's `name`, or its file stem)")) -> None:
    """Search one problem under each strategy at equal evaluation budgets, repeated, into one store; print best
    speedup per strategy and budget. Rerun the same command to go on: finished runs are not run again."""
    from kernelsearch.experiment import ExperimentError, parse_budgets, parse_strategies, run_experiment

    try:
        run_experiment(config, parse_strategies(strategies), parse_budgets(budgets), repeats, db, name, console,
                       nested=nested)
    except ExperimentError as err:
        _fail(str(err))
    except DatabaseError as err:
        _fail(f"store {db or '?'}: {_sqlite_says(err)}")
    except KeyboardInterrupt:
        print("experiment interrupted; rerun the same command to go on where it stopped", file=sys.stderr)
        raise typer.Exit(130) from None


@app.command("eval")
def eval_(problem: str = typer.Argument(..., help="a built-in family (softmax) or a KernelBench .py file"),
          candidate: Path = typer.Argument(..., help="a Python file defining ModelNew"),
          as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
          device: str = typer.Option("auto", help="auto | cpu | cuda"),
          timeout: float = typer.Option(300.0, help="seconds before the worker is killed"),
          trials: int = typer.Option(2, help="fresh-input trials per shape case"),
          allow_torch: str = typer.Option("", help="torch operations the candidate may call, comma-separated "
                                          "(matmul,linear; evaluation.allow_torch in a config)")) -> None:
    """Evaluate one candidate file against one problem, in a sandboxed worker."""
    from kernelsearch.families import load_problem
    from kernelsearch.judge.problem import ProblemError
    from kernelsearch.judge.settings import EvalSettings
    from kernelsearch.judge.static import check_size
    from kernelsearch.judge.status import CandidateFailure
    from kernelsearch.problem_check import interpreter_size_error
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings, detect_mode

    if not candidate.is_file():
        _fail(f"candidate file not found: {candidate}")
    try:
        source = candidate.read_text()
    except (OSError, UnicodeDecodeError) as err:
        _fail(f"candidate file {candidate} cannot be read as text: {err}")
    try:
        check_size(source)   # refused here, before a worker: the judge's static check says the same
    except CandidateFailure as err:
        _refused(err, as_json)
    try:
        settings = EvalSettings(timeout_s=timeout, trials=trials,
                                allow_torch=[op.strip() for op in allow_torch.split(",") if op.strip()])
    except ValueError as err:   # pydantic's ValidationError: the first error's message, in one line
        msg = err.errors()[0]["msg"] if hasattr(err, "errors") else str(err)
        _fail(f"--allow-torch: {msg.removeprefix('Value error, ')}")
    try:
        prob = load_problem(problem)
        mode, gpus = detect_mode(device)
        too_large = interpreter_size_error(prob) if mode == "cpu" else None
    except (ProblemError, RuntimeError) as err:
        _fail(str(err))
    if too_large:
        _fail(too_large)
    pool = EvaluatorPool(PoolSettings(mode=mode, gpus=gpus, concurrency=1, evaluation=settings))
    try:
        result = asyncio.run(pool.evaluate(source, prob.ref))
    finally:
        pool.close()
    if as_json:
        print(result.to_json())
    else:
        why = f"  ({result.reason})" if result.reason else ""
        console.print(f"status: [bold]{result.status.value}[/]{why}")
        if result.error_text:
            console.print(result.error_text, markup=False)
        for k in ("time_ms", "ref_time_ms", "speedup", "speedup_compile", "gbps", "tflops", "roofline_fraction",
                  "timing_kind", "device", "torch_ops"):
            v = getattr(result, k)
            if v is not None:
                console.print(f"{k}: {v:.4g}" if isinstance(v, float) else f"{k}: {v}")
    raise typer.Exit(0 if result.ok else 1)


def _refused(err, as_json: bool) -> None:
    """A candidate refused before any worker ran, printed as an evaluation's status and reason; exit code 1."""
    if as_json:
        print(json.dumps({"status": err.status.value, "reason": err.reason, "error_text": err.text,
                          "stage": err.stage}))
    else:
        console.print(f"status: [bold]{err.status.value}[/]  ({err.reason})")
    raise typer.Exit(1)


def main() -> None:
    # SIGTERM (a job manager, `timeout`, a container's stop) stops a command as Ctrl-C does: a run is marked
    # `interrupted` and its pool closed, where the default action left it `running` in the store
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    app()


if __name__ == "__main__":   # `python -m kernelsearch.cli` is `python -m kernelsearch`
    main()
