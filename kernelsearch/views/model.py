"""A model run (kernelsearch/model/) in the views: the report's model page, and the child runs `runs` and
`export-tsv` walk. The page: the profile table, the Amdahl plan, the child runs, predicted against measured per
problem, and a bar chart of where the model's time went before and after the kernels."""
from __future__ import annotations

import html
import json
from typing import Optional

from sqlmodel import Session

from kernelsearch.store import Run
from kernelsearch.store import queries as q
from kernelsearch.store.model_queries import model_problems, model_run_of
from kernelsearch.views import fmt
from kernelsearch.views.page import CSS

_E = html.escape
_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]


def _pct(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:.1%}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th class=l>{_E(h)}</th>" if i < 2 else f"<th>{_E(h)}</th>" for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td class=l>{c}</td>" if i < 2 else f"<td>{c}</td>" for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="stats"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def time_bars(plan: dict, verify: dict) -> list[tuple[str, float, list[tuple[str, float]]]]:
    """(label, total ms, [(segment, ms)]) for the model before (eager: the plan's problems by their profiled share of
    the eager time, the rest as `other`) and after (each accepted kernel's segment is its time before less what
    swapping it in alone saved, measured; `other` takes what is left of the time with every kernel)."""
    eager = verify.get("eager_ms")
    if not eager:
        return []
    entries = [e for e in plan["entries"] if e["share"] >= 0.01]
    before = [(e["key"], e["share"] * eager) for e in entries]
    bars = [("eager", eager, before + [("other", max(0.0, eager - sum(v for _, v in before)))])]
    if "kernels_ms" in verify:
        alone = {r["key"]: r.get("alone_ms") for r in verify["problems"] if r.get("status") == "ok"}
        after = []
        for key, ms in before:
            if alone.get(key) is not None:
                ms = max(0.0, ms - (eager - alone[key]))
            after.append((key, ms))
        total = verify["kernels_ms"]
        bars.append(("with kernels", total, after + [("other", max(0.0, total - sum(v for _, v in after)))]))
    if "compile_ms" in verify:
        bars.append(("torch.compile", verify["compile_ms"], [("whole model", verify["compile_ms"])]))
    return bars


def _svg(bars) -> str:
    if not bars:
        return "<p class=dim>not timed</p>"
    width, row_h, left = 720, 26, 110
    scale = (width - left - 80) / max(total for _, total, _ in bars)
    keys = list(dict.fromkeys(k for _, _, segs in bars for k, _ in segs))
    color = {k: ("#bbb" if k == "other" else _COLORS[i % len(_COLORS)]) for i, k in enumerate(keys)}
    parts = []
    for i, (label, total, segs) in enumerate(bars):
        y, x = 10 + i * (row_h + 8), left
        parts.append(f'<text x="0" y="{y + 17}" font-size="12">{_E(label)}</text>')
        for k, ms in segs:
            w = ms * scale
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h}" fill="{color[k]}">'
                         f'<title>{_E(k)}: {ms:.3f} ms</title></rect>')
            x += w
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 17}" font-size="12">{total:.3f} ms</text>')
    legend_y = 10 + len(bars) * (row_h + 8) + 6
    for i, k in enumerate(keys):
        parts.append(f'<rect x="{(i % 3) * 240}" y="{legend_y + (i // 3) * 16}" width="10" height="10" '
                     f'fill="{color[k]}"/><text x="{(i % 3) * 240 + 14}" y="{legend_y + (i // 3) * 16 + 9}" '
                     f'font-size="11">{_E(k[:36])}</text>')
    height = legend_y + (len(keys) // 3 + 1) * 16 + 4
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="time before and after">'
            f'{"".join(parts)}</svg>')


def build_model_report(session: Session, run: Run) -> str:
    mr = model_run_of(session, run.id)
    prof = json.loads(mr.profile_json) if mr.profile_json else None
    plan = json.loads(mr.plan_json) if mr.plan_json else None
    verify = json.loads(mr.verify_json) if mr.verify_json else None
    sections = []
    if prof:
        clock = "CUDA time" if prof["clock"] == "cuda" else "CPU time (not GPU timings)"
        rows = [[_E(r["op"]), _E(r["module"]), _E(" · ".join("×".join(map(str, s)) for s in r["shapes"] if s)),
                 _E(next((d for d in r["dtypes"] if d.startswith(("float", "bfloat"))), "—")), f"{r['calls']:.0f}",
                 f"{r['time_ms']:.4f}", _pct(r["share"])] for r in prof["rows"][:30]]
        sections.append(f'<section id="profile"><h2>Profile</h2><p class=meta>one forward on '
                        f'{_E(prof.get("device_name", ""))}, {clock}: {prof["total_ms"]:.3f} ms in operators '
                        f'({len(prof["rows"])} groups, the top 30 here)</p>'
                        + _table(["operator", "module", "shapes", "dtype", "calls", "ms", "share"], rows)
                        + "</section>")
    children = {p.key: p for p in model_problems(session, mr.id)}
    if plan:
        rows = []
        for e in plan["entries"]:
            child = children.get(e["key"])
            best = "—"
            if child is not None and child.child_run_id is not None:
                st = q.run_stats(session, child.child_run_id)
                best = (f"{fmt.x(st.best_speedup)} ({st.evaluations} evals)" if st.best_speedup is not None
                        else f"none correct ({st.evaluations} evals)")
            why = (", ".join(f"{k} {v:g}" for k, v in e["budget"].items()) if e["selected"]
                   else f"not searched: {e['reason']}")
            rows.append([_E(e["key"]), _E(child.child_run or "—") if child else "—", _pct(e["share"]),
                         _pct(e["roofline_now"]), f"{e['speedup']:.2f}×", f"{1 + e['gain']:.3f}×", _E(why), best])
        sections.append('<section id="plan"><h2>Amdahl plan</h2><p class=meta>share f of the model, possible '
                        'speedup s from the roofline headroom, the model\'s speedup 1/((1−f)+f/s) if only it '
                        f'improves; predicted for every searched problem together: {plan["predicted"]:.3f}×</p>'
                        + _table(["problem", "child run", "share", "roofline now", "s", "model", "budget",
                                  "best found"], rows) + "</section>")
    if verify:
        if "error" in verify:
            sections.append(f'<section id="verify"><h2>Verify</h2><p class=note>{_E(verify["error"])}</p></section>')
        else:
            rows = []
            for r in verify["problems"]:
                ok = r.get("status") == "ok"
                rows.append([_E(r["key"]), _E(r.get("status", "")) if ok else
                             f"left out ({_E(r.get('status', ''))}): {_E(r.get('reason') or '')}",
                             f"{r['rel_error']:.2e}" if r.get("rel_error") is not None else "—",
                             fmt.x(r.get("problem_speedup")), f"{r['predicted']:.3f}×" if r.get("predicted") else "—",
                             f"{r['measured']:.3f}×" if r.get("measured") else "—"])
            head = (f"eager {verify['eager_ms']:.3f} ms"
                    + (f", with kernels {verify['kernels_ms']:.3f} ms: {verify['speedup']:.3f}× (predicted "
                       f"{verify['predicted']:.3f}×)" if "kernels_ms" in verify else ", no kernel accepted")
                    + (f", torch.compile {verify['compile_ms']:.3f} ms" if "compile_ms" in verify else "")
                    + f"; {verify['clock']}; output within relative L2 error {verify['tolerance']:g}")
            sections.append(f'<section id="verify"><h2>Verify: the whole model</h2><p class=meta>{_E(head)}</p>'
                            + _table(["problem", "in the model", "rel. error", "kernel alone", "model predicted",
                                      "model measured"], rows)
                            + "<h3>Where the time went</h3>" + _svg(time_bars(plan or {"entries": []}, verify))
                            + "</section>")
    title = f"kernelsearch · model run {run.name}"
    return "".join([
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        '<meta name=viewport content="width=device-width,initial-scale=1">',
        f"<title>{_E(title)}</title><style>{CSS}</style></head><body>",
        f"<header><h1>{_E(title)}</h1><p class=meta>model {_E(mr.model)} · {_E(run.status)}"
        f"{' (' + _E(run.stop_reason) + ')' if run.stop_reason else ''} · stage {_E(mr.stage)} · "
        f"device {_E(run.device or '')}</p></header>",
        *sections,
        '<footer class="dim">written by kernelsearch from the store; each child run has a page of its own: '
        "kernelsearch report CHILD</footer></body></html>",
    ])
