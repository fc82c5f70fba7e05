"""`kernelsearch export-tsv`: every evaluated kernel of a run as a row of AutoKernel's results.tsv."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelsearch.store import DEFAULT_DB, Run
from kernelsearch.store import queries as q
from kernelsearch.store.model_queries import child_run_ids
from kernelsearch.store.status import Status
from kernelsearch.views import fmt
from kernelsearch.views.session import DbOpt, find_run, read_only_session

TSV_COLUMNS = ("experiment", "tag", "kernel_type", "throughput_tflops", "latency_us", "pct_peak",
               "speedup_vs_pytorch", "correctness", "peak_vram_mb", "description")


# -- the one read of the harness's free-form `detail` --------------------------------------------------------
# The only place a view digs into `Evaluation.detail_json`. When the typed evaluation result (issue 17) gives the
# peak memory a named field, this function reads that field instead, and nothing else here changes.
def peak_vram_mb(detail_json: Optional[str]) -> Optional[float]:
    """`peak_vram_mb` at the top of an evaluation's detail or in one of its stages; None when not measured."""
    try:
        d = json.loads(detail_json or "{}")
    except json.JSONDecodeError:
        return None
    if not isinstance(d, dict):
        return None
    for holder in [d, *[v for v in d.values() if isinstance(v, dict)]]:
        v = holder.get("peak_vram_mb")
        if isinstance(v, (int, float)):
            return float(v)
    return None


def _num(v: Optional[float], fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def export_tsv_cmd(
    name: Annotated[str, typer.Argument(help="The run's name.")],
    db: DbOpt = DEFAULT_DB,
    out: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write here instead of stdout.")] = None,
) -> None:
    """Every evaluated kernel as a row of AutoKernel's results.tsv (same columns, tab-separated).

    experiment counts evaluations in the order they finished; tag is r<round>-k<kernel id>; correctness is PASS
    (status ok) or FAIL (any other status, named in the description); empty cells mean "not measured".
    """
    with read_only_session(db) as s:
        run = find_run(s, name, db)
        # a model run's rows are its child runs', one after another (kernel_type: each child's problem)
        runs = [run] + [s.get(Run, c) for c in child_run_ids(s, run.id)]
        parts = [(r, q.tree(s, r.id), q.detail_jsons(s, r.id)) for r in runs]
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow(TSV_COLUMNS)
    n = 0
    for r, t, details in parts:
        n = _rows(w, r, t, details, n)
    text = buf.getvalue()
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}: {n} evaluations of run {run.name}", err=True)


def _rows(w, run, t, details, before: int) -> int:
    """One run's evaluated kernels as rows, numbered on from `before`; the last number written."""
    done = sorted((k for k in t.kernels.values() if k.status is not None), key=lambda k: k.eval_id)
    n = before
    for n, k in enumerate(done, start=before + 1):
        idea = t.ideas.get(k.idea_id) if k.idea_id is not None else None
        desc = "starter (seed)" if k.is_seed else (idea.title if idea else f"idea {k.idea_id}")
        if k.status != Status.ok:
            desc = f"{k.status}: {k.reason or ''} | {desc}"
        if k.timing_kind == fmt.CPU_KIND:
            desc += " [cpu-interpreter timing]"
        desc = " ".join(desc.replace("\t", " ").split())
        w.writerow([n, f"r{k.round}-k{k.id}", run.problem, _num(k.tflops, ".6g"),
                    _num(k.time_ms * 1000 if k.time_ms is not None else None, ".3f"),
                    _num(k.roofline_fraction * 100 if k.roofline_fraction is not None else None, ".2f"),
                    _num(k.speedup, ".4g"), "PASS" if k.status == Status.ok else "FAIL",
                    _num(peak_vram_mb(details.get(k.id)), ".1f"), desc])
    return n
