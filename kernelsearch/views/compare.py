"""`kernelsearch diff` (two kernels' code) and `kernelsearch compare` (two runs side by side, or two batches of
`kernelsearch bench` problem by problem: views/batch.py)."""
from __future__ import annotations

import difflib
import sys
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from kernelsearch.store import DEFAULT_DB
from kernelsearch.store import queries as q
from kernelsearch.store.integrity import shown_code
from kernelsearch.views import fmt
from kernelsearch.views.paint import Paint, stdout_console
from kernelsearch.views.session import DbOpt, fail, find_run, parse_kernel_id, read_only_session


def diff_cmd(
    a: Annotated[str, typer.Argument(metavar="A", help="The old kernel (12 or k12).")],
    b: Annotated[str, typer.Argument(metavar="B", help="The new kernel.")],
    db: DbOpt = DEFAULT_DB,
    context: Annotated[int, typer.Option("--context", "-U", min=0, help="Lines of context.")] = 3,
) -> None:
    """Unified diff of two kernels' code."""
    ids = (parse_kernel_id(a), parse_kernel_id(b))
    with read_only_session(db) as s:
        ks = []
        for kid in ids:
            k = q.get_kernel(s, kid)
            if k is None:
                fail(f"no kernel {kid} in {db}")
            ks.append(k)
        ideas = q.ideas_by_id(s, [k.idea_id for k in ks if k.idea_id is not None])
        names = {r.id: r.name for r in q.list_runs(s)}

    def label(k: Any) -> str:
        what = "seed" if k.idea_id is None else f"i{k.idea_id} “{fmt.one_line(ideas[k.idea_id].title, 60)}”" \
            if k.idea_id in ideas else f"i{k.idea_id}"
        return f"k{k.id} ({names.get(k.run_id, k.run_id)}, round {k.round}, {what})"

    ka, kb = ks
    code_a, code_b = shown_code(ka.code), shown_code(kb.code)   # a damaged row's code is a line saying so
    if code_a == code_b:
        typer.echo(f"k{ka.id} and k{kb.id} have identical code")
        return
    lines = list(difflib.unified_diff(code_a.splitlines(), code_b.splitlines(), fromfile=label(ka),
                                      tofile=label(kb), n=context, lineterm=""))
    paint = Paint(stdout_console())
    styled = []
    for ln in lines:
        if ln.startswith(("+++", "---")):
            styled.append(paint(ln, "bold"))
        elif ln.startswith("@@"):
            styled.append(paint(ln, "cyan"))
        elif ln.startswith("+"):
            styled.append(paint(ln, "green"))
        elif ln.startswith("-"):
            styled.append(paint(ln, "red"))
        else:
            styled.append(ln)
    sys.stdout.write("\n".join(styled) + "\n")



def compare_cmd(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Two runs side by side: best kernel per problem, evaluations, tokens, cost, time. Two batches (names given to
    `kernelsearch bench`): problem by problem, with each batch's fast_p."""
    with read_only_session(db) as s:
        if not all(q.get_run(s, n) for n in (run_a, run_b)):
            from kernelsearch.views.batch import batch_rows, compare_batches

            batches = [n for n in (run_a, run_b) if batch_rows(s, n)]
            if len(batches) == 2:
                compare_batches(s, (run_a, run_b))
                return
            if batches:
                missing = run_b if batches == [run_a] else run_a
                fail(f"{batches[0]!r} is a batch, but {missing!r} is no batch in {db}: compare two runs or two "
                     "batches")
        runs = [find_run(s, n, db) for n in (run_a, run_b)]
        stats = [q.run_stats(s, r.id) for r in runs]
    table = Table(title="compare", title_justify="left", header_style="bold")
    table.add_column("")
    for r in runs:
        table.add_column(r.name, justify="right")

    def row(label: str, *vals: str) -> None:
        table.add_row(label, *vals)

    row("problem", *(r.problem for r in runs))
    row("status", *(r.status + (f" ({r.stop_reason})" if r.stop_reason else "") for r in runs))
    row("device", *(r.device or "—" for r in runs))
    row("timing", *(", ".join(st.timing_kinds) or "—" for st in stats))
    row("best speedup (eager)", *(f"{fmt.x(st.best_speedup)} k{st.best_kernel_id}" if st.best_kernel_id else "—"
                                  for st in stats))
    row("best vs torch.compile", *(fmt.x(st.best_speedup_compile) for st in stats))
    row("best time", *(fmt.ms(st.best_time_ms) for st in stats))
    row("best roofline", *(fmt.pct(st.best_roofline_fraction) for st in stats))
    row("rounds", *(str(st.rounds) for st in stats))
    row("ideas", *(str(st.ideas) for st in stats))
    row("evaluations", *(str(st.evaluations) for st in stats))
    for status in [x for x in q.STATUSES if any(st.by_status.get(x) for st in stats)]:
        row(f"  {status}", *(str(st.by_status.get(status, 0)) for st in stats))
    if any(st.queued for st in stats):
        row("  queued", *(str(st.queued) for st in stats))
    row("correct rate", *(fmt.pct(st.correct / st.evaluations) if st.evaluations else "—" for st in stats))
    row("LLM calls (errors)", *(f"{st.llm_calls} ({st.llm_errors})" for st in stats))
    row("tokens in / out", *(f"{fmt.tokens(st.tokens_in)} / {fmt.tokens(st.tokens_out)}" for st in stats))
    row("cost", *(fmt.cost_of(st) for st in stats))
    row("wall time", *(fmt.dur(st.wall_s) for st in stats))
    row("evaluations / hour", *(f"{st.evaluations / st.wall_s * 3600:.0f}" if st.wall_s else "—" for st in stats))
    c = stdout_console()
    c.print(table)
    a, b = stats
    if runs[0].problem != runs[1].problem:
        c.print(f"different problems ({runs[0].problem} vs {runs[1].problem}): each run's best is for its own problem")
    elif a.timing_kinds != b.timing_kinds and (fmt.CPU_KIND in a.timing_kinds + b.timing_kinds):
        c.print(Text("timings not comparable: one run has CPU-interpreter timings, the other GPU timings",
                     style="yellow"))
    elif a.best_speedup and b.best_speedup:
        lead = runs[1].name if b.best_speedup > a.best_speedup else runs[0].name
        ratio = max(a.best_speedup, b.best_speedup) / min(a.best_speedup, b.best_speedup)
        c.print(f"{runs[0].problem}: {lead} is ahead by {ratio:.2f}× in best speedup")
