"""The offline provider over KernelBench level-1 and level-2 problems on one GPU (issue 19): `kernelsearch bench` with
provider `offline`, a short budget a problem, and a table of what it could search, what was correct, fast_1 over
eager and over torch.compile, and the wall time of each problem.

    . bench/device_env.sh
    python3 bench/kernelbench_offline_gpu.py kb/level1 kb/level2 --n1 20 --n2 5 --evaluations 8 --jobs 3 --deadline 540

PATH...: folders of KernelBench files (carried, never committed). For each folder the matcher (generators/match.py,
a trace on the meta device, no inputs drawn) is run over every file first, in KernelBench's order: the coverage line
counts the matched ones, and --n1 (first folder) / --n2 (second) matched files are searched, one of each kind in
turn (a kind: what the file matched, pointwise, matmul, softmax, ...), one `bench`
batch per folder into one store. A rerun with the same --db resumes (finished problems are not searched again), so
a batch cut by --deadline goes on where it stopped. `--dry-run`: the CPU (interpreter), 2 evaluations a problem.

Printed at the end, from the store: per problem its kind (what it matched), status, correct, best speedup over
eager and torch.compile, evaluations and wall time; per folder: searched, correct, fast_1 over eager and over
torch.compile (over the problems searched, and over every problem of the level as KernelBench counts fast_p).
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _say(*a) -> None:
    print(*a, flush=True)


def _number(p: Path) -> int:
    m = re.match(r"(\d+)", p.name)
    return int(m.group(1)) if m else 10**9


def coverage(folder: Path) -> list[tuple[Path, str | None, str]]:
    """(file, the kind it matched or None, summary or refusal) for every problem file of `folder`, in order."""
    from kernelsearch.generators.match import Unmatched, match_problem
    from kernelsearch.judge.problem import ProblemError, describe_exception, load_file

    out = []
    for f in sorted(folder.glob("*.py"), key=lambda p: (_number(p), p.name)):
        try:
            m = match_problem(load_file(f))
            out.append((f, m.kind, m.summary))
        except Unmatched as err:
            out.append((f, None, str(err)))
        except (ProblemError, Exception) as err:   # noqa: BLE001 - a file that does not load is reported, not fatal
            out.append((f, None, f"does not load: {describe_exception(err)}"))
    return out


def _spread(matched: list[tuple[Path, str]], n: int) -> list[Path]:
    """`n` matched files, one of each kind in turn (level 1 opens with 13 matmuls: the first 20 in order would be
    mostly GEMMs), each kind's in KernelBench's order; returned in KernelBench's order."""
    queues: dict[str, list[Path]] = {}
    for f, k in matched:
        queues.setdefault(k, []).append(f)
    out: list[Path] = []
    while len(out) < n and any(queues.values()):
        for q in queues.values():
            if q and len(out) < n:
                out.append(q.pop(0))
    return sorted(out, key=lambda p: (_number(p), p.name))


def _config(path: Path, args) -> None:
    import yaml

    path.write_text(yaml.safe_dump({
        "device": "cpu" if args.dry_run else "cuda",
        "llm": {"provider": "offline"},
        "search": {"rounds": 3, "ideas_per_round": 2, "branches_per_idea": 2, "first_kernels": 2,
                   "seeds_per_round": 2, "concurrency": args.concurrency},
        "budgets": {"evaluations": 2 if args.dry_run else args.evaluations},
        "evaluation": {"timeout_s": 300, "compare_compile": not args.no_compile and not args.dry_run},
    }))


def _run_batch(files: list[Path], name: str, cfg: Path, db: Path, deadline: float, jobs: int = 1) -> None:
    """One `kernelsearch bench` over `files` (linked into a folder of their own), stopped at `deadline`."""
    work = Path(tempfile.mkdtemp(prefix=f"kb-{name}-"))
    for f in files:
        (work / f.name).symlink_to(f.resolve())
    left = deadline - time.monotonic()
    if left <= 10:
        _say(f"{name}: no time left, not started")
        return
    cmd = [sys.executable, "-m", "kernelsearch", "bench", str(work), "--config", str(cfg), "--db", str(db),
           "--name", name, "--jobs", str(jobs)]
    _say("$ " + " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    t0 = time.monotonic()

    def cut(sig: int) -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, sig)

    # The batch runs in a session of its own: a deadline read only between its output lines let a silent batch run
    # on, and this script's own end (an outer `timeout`) left it holding the GPU (2026-12-07: the next call's 64
    # evaluations all failed, out of memory beside it). A timer cuts it at the deadline; SIGTERM here kills it.
    timer = threading.Timer(max(deadline - time.monotonic(), 0.0), cut, (signal.SIGINT,))
    timer.daemon = True
    timer.start()
    signal.signal(signal.SIGTERM, lambda *_: (cut(signal.SIGKILL), os._exit(143)))
    try:
        for line in proc.stdout:
            if re.match(r"\[\d+/\d+\]|error|Traceback|batch ", line):
                _say(f"  [{time.monotonic() - t0:6.1f}s] {line.rstrip()}")
            if time.monotonic() > deadline:
                break
        else:   # its output ended: the batch is closing (table printed, pool closed), not cut by the deadline
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                pass
    finally:
        timer.cancel()
        if proc.poll() is None:
            _say(f"{name}: deadline reached, batch stopped (rerun with the same --db to resume)")
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _table(name: str, files: list[Path], kinds: dict[Path, str], db: Path, level_total: int) -> int:
    """The folder's table; returns the evaluations its runs stored."""
    from sqlmodel import select

    from kernelsearch.search.bench import ProblemScore, fast_p
    from kernelsearch.store import Run, open_store, session_scope
    from kernelsearch.store.queries import run_stats

    rows = []
    engine = open_store(db, readonly=True) if db.exists() else None
    for f in files:
        row = {"problem": f.stem, "kind": kinds[f], "status": "not started", "correct": False, "eager": None,
               "compile": None, "evals": 0, "wall": None}
        if engine is not None:
            with session_scope(engine) as s:
                run = s.exec(select(Run).where(Run.name == f"{name}-{f.stem}")).first()
                if run is not None:
                    st = run_stats(s, run.id)
                    row.update(status=run.status + (f" ({run.stop_reason})" if run.stop_reason else ""),
                               correct=st.correct > 0, eager=st.best_speedup, compile=st.best_speedup_compile,
                               evals=st.evaluations, wall=run.elapsed_s)
        rows.append(row)
    if engine is not None:
        engine.dispose()
    x = lambda v: f"{v:.3g}x" if v is not None else "-"   # noqa: E731
    _say(f"\n{name}: {'problem':<48} {'kind':<14} {'status':<30} {'ok':<3} {'eager':>8} {'compile':>8} "
         f"{'evals':>5} {'wall s':>7}")
    for r in rows:
        wall = f"{r['wall']:.0f}" if r["wall"] is not None else "-"
        _say(f"{name}: {r['problem'][:48]:<48} {r['kind'][:14]:<14} {r['status'][:30]:<30} "
             f"{'yes' if r['correct'] else 'no':<3} {x(r['eager']):>8} {x(r['compile']):>8} {r['evals']:>5} "
             f"{wall:>7}")
    searched = [r for r in rows if r["status"] != "not started"]
    correct = [r for r in rows if r["correct"]]
    eager = [ProblemScore(r["correct"], r["eager"]) for r in searched]
    comp = [ProblemScore(r["correct"], r["compile"]) for r in searched]
    walls = [r["wall"] for r in searched if r["wall"] is not None]
    fe = fast_p(eager, 1.0) if eager else 0.0
    fc = fast_p(comp, 1.0) if comp else 0.0
    n_fast_e = sum(1 for r in searched if r["correct"] and (r["eager"] or 0) > 1.0)
    n_fast_c = sum(1 for r in searched if r["correct"] and (r["compile"] or 0) > 1.0)
    _say(f"{name}: searched {len(searched)} of {len(files)} chosen ({level_total} files in the level); correct "
         f"{len(correct)}; fast_1 over eager {fe:.3f} ({n_fast_e} problems; {n_fast_e / level_total:.3f} of the "
         f"level), over torch.compile {fc:.3f} ({n_fast_c}; {n_fast_c / level_total:.3f} of the level); wall time a "
         f"problem: mean {sum(walls) / len(walls):.0f} s, max {max(walls):.0f} s" if walls else
         f"{name}: searched {len(searched)} of {len(files)} chosen; no wall times")
    return sum(r["evals"] for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=Path, help="KernelBench level folders (level1, then level2)")
    ap.add_argument("--n1", type=int, default=20, help="matched problems searched from the first folder")
    ap.add_argument("--n2", type=int, default=5, help="matched problems searched from the second folder")
    ap.add_argument("--evaluations", type=int, default=8, help="evaluations a problem")
    ap.add_argument("--concurrency", type=int, default=4, help="evaluations at once (all problems together)")
    ap.add_argument("--jobs", type=int, default=3, help="problems searched at once (`bench --jobs`)")
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds for the whole script")
    ap.add_argument("--db", type=Path, default=Path("runs/kb_offline.db"))
    ap.add_argument("--no-compile", action="store_true", help="do not time torch.compile of the references")
    ap.add_argument("--dry-run", action="store_true", help="CPU, interpreter, 2 evaluations a problem")
    args = ap.parse_args(argv)
    t_start = time.monotonic()
    deadline = t_start + args.deadline - 30   # the table needs a few seconds
    if args.dry_run:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    args.db.parent.mkdir(parents=True, exist_ok=True)
    cfg = Path(tempfile.mkdtemp(prefix="kb-offline-")) / "offline.yaml"
    _config(cfg, args)
    plans = []
    for i, folder in enumerate(args.paths):
        if not folder.is_dir():
            _say(f"error: {folder} is not a folder")
            return 2
        t0 = time.monotonic()
        cov = coverage(folder)
        matched = [(f, k) for f, k, _ in cov if k]
        kinds = {f: k for f, k in matched}
        by_kind: dict[str, int] = {}
        for _, k in matched:
            by_kind[k] = by_kind.get(k, 0) + 1
        _say(f"{folder}: the offline provider matches {len(matched)} of {len(cov)} problems "
             f"({', '.join(f'{k} {n}' for k, n in sorted(by_kind.items()))}) [{time.monotonic() - t0:.0f} s]")
        n = args.n1 if i == 0 else args.n2
        chosen = _spread(matched, n)
        plans.append((f"kb{folder.name}", chosen, kinds, len(cov)))
    for name, chosen, _, _ in plans:
        if chosen:
            _run_batch(chosen, name, cfg, args.db, deadline, args.jobs)
    evals = sum(_table(name, chosen, kinds, args.db, total) for name, chosen, kinds, total in plans)
    wall = time.monotonic() - t_start
    # over the whole script (matching, pool start, tables included), and counting every evaluation in the store: a
    # resumed store's earlier ones inflate it, so the figure is for a fresh --db
    _say(f"\nwall time of the script: {wall:.0f} s (store {args.db}); {evals} evaluations stored, "
         f"{evals / wall * 60:.1f} a minute")
    return 0


if __name__ == "__main__":
    sys.exit(main())
