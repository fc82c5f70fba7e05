"""The experiment page of `kernelsearch report` (an experiment's name in place of a run's): the table of
`kernelsearch experiment` and a plot of best speedup against evaluations, one line per strategy (the median over the
repeats) with its spread (min to max) shaded. An experiment is not a table of its own: its runs are those named
`<experiment>-<strategy>-b<budget>-r<repeat>` (kernelsearch/experiment.py), read from the store when the page is
made."""
from __future__ import annotations

import html
import statistics

from sqlmodel import Session

from kernelsearch.experiment import Cell, RunCurve, cells_of, experiment_runs
from kernelsearch.search.settings import STRATEGIES
from kernelsearch.views import fmt
from kernelsearch.views.page import CSS, svg_axes

_E = html.escape
COLORS = {"branching": "#1f5fbf", "sequential": "#b42318", "best_of_n": "#6b7480", "evolutionary": "#16794c"}


def curve_bands(curves: list[RunCurve]) -> dict[str, list[tuple[int, float, float, float]]]:
    """Per strategy: (n, median, min, max) of the best speedup within the first n evaluations, over the runs that
    reached n evaluations and had a correct kernel by then."""
    out: dict[str, list[tuple[int, float, float, float]]] = {}
    for s in STRATEGIES:
        runs = [c for c in curves if c.strategy == s and c.best]
        if not runs:
            continue
        band = []
        for n in range(1, max(len(c.best) for c in runs) + 1):
            vals = [c.best[n - 1] for c in runs if len(c.best) >= n and c.best[n - 1] is not None]
            if vals:
                band.append((n, statistics.median(vals), min(vals), max(vals)))
        out[s] = band
    return out


def _svg(bands: dict[str, list[tuple[int, float, float, float]]], budgets: list[int]) -> str:
    """Best speedup against evaluations: per strategy, the median as a line over its min-max band, and a legend."""
    x_top = max([n for b in bands.values() for n, *_ in b] + budgets + [1])
    y_top = max([hi for b in bands.values() for _, _, _, hi in b] or [1.0])
    title = "best speedup vs evaluations (median over repeats, min-max shaded)"
    # the budgets the table reads, dashed; the legend goes in the wide right margin
    f, parts = svg_axes((680, 360, 56, 130, 30, 44), x_top, y_top, title, "evaluations", "best speedup over eager",
                        dashed_x=budgets, eager_label=False, empty=None if bands else "no finished run yet")
    X, Y, L, T, pw = f.x, f.y, f.left, f.top, f.width
    for i, (s, band) in enumerate(bands.items()):
        color = COLORS.get(s, "#000")
        upper = " ".join(f"{X(n):.1f},{Y(hi):.1f}" for n, _, _, hi in band)
        lower = " ".join(f"{X(n):.1f},{Y(lo):.1f}" for n, _, lo, _ in reversed(band))
        parts.append(f'<polygon points="{upper} {lower}" fill="{color}" opacity="0.12" stroke="none"/>')
        line = " ".join(f"{X(n):.1f},{Y(med):.1f}" for n, med, _, _ in band)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2">'
                     f'<title>{_E(s)}</title></polyline>')
        ly = T + 14 + 18 * i
        parts.append(f'<path d="M{L + pw + 12} {ly - 4}h18" stroke="{color}" stroke-width="3"/>'
                     f'<text x="{L + pw + 36}" y="{ly}">{_E(s)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(cells: list[Cell]) -> str:
    rows = []
    for c in cells:
        lo, hi = c.spread
        frac = f"{c.correct_fraction:.0%}" if c.correct_fraction is not None else "—"
        if c.unjudged:   # harness_error: left out of the fraction
            frac += f" ({c.unjudged} not judged)"
        rows.append(f'<tr><td class="l">{_E(c.strategy)}</td><td>{c.budget}</td><td>{c.found}/{c.runs}</td>'
                    f"<td>{fmt.x(c.median)}</td><td>{fmt.x(lo)} – {fmt.x(hi)}</td><td>{frac}</td>"
                    f"<td>{c.short}</td></tr>")
    return ('<table class="stats"><tr><th class="l">strategy</th><th>budget</th><th>runs with a correct kernel</th>'
            "<th>median best</th><th>min – max</th><th>correct evaluations</th><th>short runs</th></tr>"
            + "".join(rows) + "</table>")


def _runs_list(curves: list[RunCurve]) -> str:
    items = []
    for c in sorted(curves, key=lambda c: (STRATEGIES.index(c.strategy), c.budget, c.repeat)):
        best = c.best[-1] if c.best else None
        items.append(f"<tr><td class='l'>{_E(c.name)}</td><td class='l'>{_E(c.status)}"
                     f"{' (' + _E(c.stop_reason) + ')' if c.stop_reason else ''}</td><td>{len(c.ok)}</td>"
                     f"<td>{fmt.x(best)}</td></tr>")
    return ('<table class="stats"><tr><th class="l">run</th><th class="l">status</th><th>evaluations</th>'
            "<th>best</th></tr>" + "".join(items) + "</table>")


def is_experiment(session: Session, name: str) -> bool:
    return bool(experiment_runs(session, name))


def build_experiment_report(session: Session, name: str) -> str:
    """The experiment's page, as a string."""
    curves = experiment_runs(session, name)
    strategies = [s for s in STRATEGIES if any(c.strategy == s for c in curves)]
    budgets = sorted({c.budget for c in curves})
    repeats = max((c.repeat for c in curves), default=-1) + 1
    cells = cells_of(curves, strategies, budgets, repeats)
    problems = sorted({c.problem for c in curves})
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>experiment {_E(name)}</title>'
            f"<style>{CSS}</style></head><body><h1>experiment {_E(name)}</h1>"
            f'<p class="meta">problem {_E(", ".join(problems))} · {len(curves)} runs · strategies '
            f'{_E(", ".join(strategies))} · budgets {", ".join(map(str, budgets))} · {repeats} repeats</p>'
            f'<h2>best speedup against evaluations</h2><div class="plots">{_svg(curve_bands(curves), budgets)}</div>'
            f"<h2>per strategy and budget</h2>{_table(cells)}<p class='dim'>Each budget B reads the runs made at B, "
            "else a longer run's first B evaluations (<code>--nested</code>). Correct evaluations: the fraction of "
            "the evaluations that were correct. Short runs stopped before the budget, for the reason listed below."
            f"</p><h2>runs</h2>{_runs_list(curves)}<footer class='dim'>kernelsearch report · each run has its own "
            "page: <code>kernelsearch report RUN</code></footer></body></html>")
