"""A batch of problems (`kernelsearch bench`) in the views: `compare A B` of two batches problem by problem, and the
batch page of `report`. A batch is not a table of its own: its runs are those bench named `<batch>-<problem stem>`
(kernelsearch/bench.py `batch_runs`), read with the same rows and fast_p as bench's own table."""
from __future__ import annotations

import html
from typing import Optional

from rich.table import Table
from rich.text import Text
from sqlmodel import Session

from kernelsearch.bench import Row, allowance_line, batch_runs, correct_cell, refused_lines, row_of, unjudged_line
from kernelsearch.search.bench import P_VALUES, ProblemScore, fast_p
from kernelsearch.views import fmt
from kernelsearch.views.bars import speedup_bars
from kernelsearch.views.page import CSS
from kernelsearch.views.paint import stdout_console

_E = html.escape


def batch_rows(session: Session, batch: str) -> list[Row]:
    """The table rows of a batch's runs, in KernelBench order; [] when the store has no such batch."""
    return [row_of(session, run) for run in batch_runs(session, batch)]


def fast_p_lines(rows: list[Row]) -> list[str]:
    """fast_p at P_VALUES over eager and over torch.compile, as bench prints them."""
    eager = [ProblemScore(r.correct, r.best) for r in rows]
    out = [f"fast_p over eager ({len(rows)} problems): "
           + ", ".join(f"fast_{p:g} {fast_p(eager, p):.3f}" for p in P_VALUES)]
    measured = sum(1 for r in rows if r.correct and r.best_compile is not None)
    comp = [ProblemScore(r.correct, r.best_compile) for r in rows]
    out.append(f"fast_p over torch.compile ({measured} of {len(rows)} problems measured; the others count as not "
               "faster): " + ", ".join(f"fast_{p:g} {fast_p(comp, p):.3f}" for p in P_VALUES if p > 0))
    if unjudged_line(rows):
        out.append(unjudged_line(rows))
    return out + refused_lines(rows)


def _ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{b / a:.2f}×" if a and b else "—"


def compare_batches(session: Session, names: tuple[str, str]) -> None:
    """Two batches problem by problem (matched by problem file stem): correct, best speedup over eager and
    torch.compile, evaluations; B's speedup over A's; then each batch's fast_p and allowance."""
    rows = [batch_rows(session, n) for n in names]
    by = [{r.problem: r for r in rs} for rs in rows]
    problems = list(dict.fromkeys([r.problem for r in rows[0]] + [r.problem for r in rows[1]]))
    table = Table(title=f"compare batches {names[0]} (A) and {names[1]} (B)", title_justify="left",
                  header_style="bold")
    table.add_column("problem")
    for tag in ("A", "B"):
        table.add_column(f"{tag} correct")
        table.add_column(f"{tag} eager", justify="right")
        table.add_column(f"{tag} compile", justify="right")
        table.add_column(f"{tag} evals", justify="right")
    table.add_column("B / A", justify="right")
    better = worse = 0
    for p in problems:
        cells = [p]
        pair = [b.get(p) for b in by]
        for r in pair:
            if r is None:
                cells += ["not in batch", "", "", ""]
            else:
                cells += [correct_cell(r), fmt.x(r.best) if r.correct else "—",
                          fmt.x(r.best_compile) if r.correct else "—", str(r.evaluations)]
        a, b = (r.best if r is not None and r.correct else None for r in pair)
        cells.append(_ratio(a, b))
        if a and b:
            better += b > a
            worse += b < a
        table.add_row(*cells)
    c = stdout_console()
    c.print(table)
    for tag, name, rs in zip("AB", names, rows):
        for line in fast_p_lines(rs) + [allowance_line(rs)]:
            c.print(f"{tag} {name}: {line}", markup=False, soft_wrap=True)
    common = [p for p in problems if all(p in b for b in by)]
    c.print(f"{len(common)} problems in both: B is faster on {better}, slower on {worse} (both correct); "
            f"correct in A only: {sum(1 for p in common if by[0][p].correct and not by[1][p].correct)}, "
            f"in B only: {sum(1 for p in common if by[1][p].correct and not by[0][p].correct)}", markup=False,
            soft_wrap=True)
    allow = [sorted({tuple(r.allowed) for r in rs}) for rs in rows]
    if allow[0] != allow[1]:
        c.print(Text("the batches allow different torch operations (evaluation.allow_torch): their scores are not "
                     "comparable as they stand", style="yellow"))


def build_batch_report(session: Session, batch: str) -> str:
    """The page of a batch: a table of its problems (status, correct, best speedups, evaluations, tokens, cost,
    the torch operations the best kernel calls), fast_p at P_VALUES over eager and torch.compile, the allowance."""
    rows = batch_rows(session, batch)
    body = []
    for r in rows:
        body.append(
            f"<tr><td class=l>{_E(r.problem)}</td><td class=l>{_E(r.run)}</td><td class=l>{_E(r.status)}</td>"
            f"<td>{correct_cell(r)}</td><td>{fmt.x(r.best) if r.correct else '—'}</td>"
            f"<td>{fmt.x(r.best_compile) if r.correct else '—'}</td><td>{r.evaluations}</td>"
            f"<td>{fmt.tokens(r.tokens)}</td><td>{fmt.cost(r.cost_usd)}</td>"
            f"<td class=l>{_E(r.torch_ops or '—') if r.correct else '—'}</td></tr>")
    table = ('<table class="stats"><thead><tr><th class=l>problem</th><th class=l>run</th><th class=l>status</th>'
             '<th>correct</th><th>best vs eager</th><th>best vs torch.compile</th><th>evaluations</th>'
             '<th>tokens</th><th>cost</th><th class=l>torch calls</th></tr></thead>'
             f'<tbody>{"".join(body)}</tbody></table>')
    eager = [ProblemScore(r.correct, r.best) for r in rows]
    comp = [ProblemScore(r.correct, r.best_compile) for r in rows]
    measured = sum(1 for r in rows if r.correct and r.best_compile is not None)
    fp = "".join(f"<tr><td class=l>{p:g}</td><td>{fast_p(eager, p):.3f}</td>"
                 f"<td>{fast_p(comp, p):.3f}</td></tr>" for p in P_VALUES) if rows else ""
    fp_table = ('<table class="stats"><thead><tr><th class=l>p</th><th>fast_p over eager</th>'
                f'<th>fast_p over torch.compile</th></tr></thead><tbody>{fp}</tbody></table>'
                f'<p class="dim">fast_p: the fraction of all {len(rows)} problems whose best kernel is correct and '
                f'faster than p × the baseline (p = 0: correct). torch.compile was measured for {measured} of them; '
                'the others count as not faster.</p>')
    title = f"kernelsearch · batch {batch}"
    return "".join([
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        '<meta name=viewport content="width=device-width,initial-scale=1">',
        f"<title>{_E(title)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{_E(title)}</h1><p class=meta>{len(rows)} problems, "
        f"{sum(r.correct for r in rows)} with a correct kernel</p>",
        f'<p class="note">{_E(allowance_line(rows))}</p></header>',
        '<section id="fast_p"><h2>fast_p</h2>', fp_table,
        f'<p class="note">{_E(unjudged_line(rows))}</p>' if unjudged_line(rows) else "", "</section>",
        '<section id="speedups"><h2>Speedups</h2><div class="scroll">', speedup_bars(rows), '</div>',
        f'<p class="note">{_E(" ".join(refused_lines(rows)))}</p>' if refused_lines(rows) else "", '</section>',
        '<section id="problems"><h2>Problems</h2><div class="scroll">', table,
        '</div><p class="dim">each run has a page of its own: kernelsearch report RUN</p></section>',
        '<footer class="dim">written by kernelsearch from the store.</footer></body></html>',
    ])
