"""`kernelsearch report`: one self-contained HTML page of a run (no network needed to open it): the collapsible
tree, each kernel's code and results, inline SVG plots of best speedup against evaluations and wall time,
per-round statistics and cost."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from sqlmodel import Session

from kernelsearch.store import DEFAULT_DB
from kernelsearch.store import queries as q
from kernelsearch.store.integrity import shown_code
from kernelsearch.store.models import Run
from kernelsearch.store.status import Status
from kernelsearch.views import fmt
from kernelsearch.views.page import CSS, svg_axes
from kernelsearch.views.session import DbOpt, find_run, read_only_session, warn_damaged


def report_cmd(
    name: Annotated[str, typer.Argument(help="The run's name, or a batch's (kernelsearch bench), or an "
                                             "experiment's (kernelsearch experiment).")],
    db: DbOpt = DEFAULT_DB,
    out: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.")] = Path("report.html"),
) -> None:
    """One self-contained HTML page (no network needed): collapsible tree, code, results, progress plots,
    per-round statistics and cost. For a batch: its problems' table and fast_p. For an experiment: its table and
    best speedup against evaluations per strategy."""
    with read_only_session(db) as s:
        if q.get_run(s, name) is None:
            from kernelsearch.views.batch import batch_rows, build_batch_report

            if batch_rows(s, name):
                page = build_batch_report(s, name)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(page, encoding="utf-8")
                typer.echo(f"wrote {out} (batch {name}, {len(page.encode()) / 1e6:.2f} MB)")
                return
            from kernelsearch.views.experiment import build_experiment_report, is_experiment

            if is_experiment(s, name):   # `kernelsearch experiment`'s runs: its table and best-vs-evaluations plot
                page = build_experiment_report(s, name)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(page, encoding="utf-8")
                typer.echo(f"wrote {out} (experiment {name}, {len(page.encode()) / 1e6:.2f} MB)")
                return
        run = find_run(s, name, db)
        warn_damaged(s, run)
        from kernelsearch.store.model_queries import model_run_of

        if model_run_of(s, run.id) is not None:   # a model run: profile, plan, child runs, verify
            from kernelsearch.views.model import build_model_report

            page = build_model_report(s, run)
        else:
            page = build_report(s, run)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    typer.echo(f"wrote {out} ({len(page.encode()) / 1e6:.2f} MB)")


def build_report(session: Session, run: Run) -> str:
    """The report page of one run, as a string."""
    t = q.tree(session, run.id)
    st = q.run_stats(session, run.id)
    rounds = q.round_stats(session, run.id)
    points = q.progress(session, run.id)
    costs = q.cost_breakdown(session, run.id)
    hash_of, codes = q.kernel_codes(session, run.id)
    codes = {h: shown_code(c) for h, c in codes.items()}   # a damaged row's code is a line saying so
    errors = q.error_texts(session, run.id)
    return _Report(run, t, st, rounds, points, costs, hash_of, codes, errors).html()


_E = html.escape


class _Report:
    def __init__(self, run: Run, t: q.RunTree, st: q.RunStats, rounds: list[q.RoundStats],
                 points: list[q.ProgressPoint], costs: list[q.CostRow], hash_of: dict[int, str],
                 codes: dict[str, str], errors: dict[int, str]):
        self.run, self.t, self.st, self.rounds, self.points = run, t, st, rounds, points
        self.costs, self.hash_of, self.codes, self.errors = costs, hash_of, codes, errors
        top = t.best_kernel()
        self.best = top
        self.on_path = set(t.path_to(top.id)) if top else set()
        self.kinds = sorted({k.timing_kind for k in t.kernels.values() if k.timing_kind})
        self.cpu = self.kinds == [fmt.CPU_KIND]

    # pieces -------------------------------------------------------------------------------------------------
    def _summary(self) -> str:
        r, st = self.run, self.st
        cards = [
            ("best speedup", f"{fmt.x(st.best_speedup)}" + (" [cpu]" if self.cpu and st.best_speedup else ""),
             f'<a href="#k{st.best_kernel_id}">k{st.best_kernel_id}</a> · '
             f'{_E(fmt.timed(st.best_time_ms, st.best_timings))}' if st.best_kernel_id else "no correct kernel"),
            ("reference", fmt.ms(st.reference_ms),
             f"eager, median of {st.reference_timings} evaluations" if st.reference_ms is not None else "none timed"),
            ("vs torch.compile", fmt.x(st.best_speedup_compile), "best kernel"),
            ("roofline", fmt.pct(st.best_roofline_fraction), "best kernel"),
            ("evaluations", str(st.evaluations), _E(fmt.by_status(st.by_status, st.queued))),
            ("ideas", str(st.ideas), f"{st.rounds} rounds, {st.kernels} kernels"),
            ("tokens", fmt.tokens(st.tokens), f"{fmt.tokens(st.tokens_in)} in / {fmt.tokens(st.tokens_out)} out"),
            ("cost", fmt.cost_of(st), f"{st.llm_calls} LLM calls, {st.llm_errors} errors"),
            ("wall time", fmt.dur(st.wall_s), f"{fmt.when(r.started_at)} → {fmt.when(r.finished_at)}"),
        ]
        body = "".join(f'<div class="card"><div class="lab">{_E(a)}</div><div class="val">{_E(b)}</div>'
                       f'<div class="sub">{c}</div></div>' for a, b, c in cards)
        meta = (f"problem <b>{_E(r.problem)}</b> · status <b>{_E(r.status)}</b>"
                + (f" ({_E(r.stop_reason)})" if r.stop_reason else "")
                + (f" · device {_E(r.device)}" if r.device else ""))
        note = fmt.timing_note(self.kinds)
        note_html = f'<p class="note">{_E(note)}</p>' if note else ""
        ref = fmt.reference_line(st)
        note_html += f'<p class="note">{_E(ref)}</p>' if ref else ""
        return f'<p class="meta">{meta}</p>{note_html}<div class="cards">{body}</div>'

    def _plots(self) -> str:
        ok = [(p.n, p.t_s, p.speedup) for p in self.points if p.speedup is not None]
        fails_n = [p.n for p in self.points if p.status != Status.ok]
        fails_t = [p.t_s for p in self.points if p.status != Status.ok]
        steps_n = [(p.n, p.best_so_far) for p in self.points if p.best_so_far is not None]
        steps_t = [(p.t_s, p.best_so_far) for p in self.points if p.best_so_far is not None]
        ylabel = "speedup over eager" + (" (CPU interpreter)" if self.cpu else "")
        tmax = max((p.t_s for p in self.points), default=0.0)
        unit, div = ("h", 3600.0) if tmax > 3 * 3600 else ("min", 60.0) if tmax > 180 else ("s", 1.0)
        best = self.best
        best_n = next((p for p in self.points if best and p.kernel_id == best.id), None)
        mark_n = (best_n.n, best.speedup) if best_n and best else None
        mark_t = (best_n.t_s / div, best.speedup) if best_n and best else None
        a = _svg_plot([(n, y) for n, _, y in ok], fails_n, steps_n, mark_n, "best speedup vs evaluations",
                      "evaluations", ylabel, len(self.points), best.id if best else None, "by-evals")
        b = _svg_plot([(t / div, y) for _, t, y in ok], [x / div for x in fails_t],
                      [(x / div, y) for x, y in steps_t], mark_t, "best speedup vs wall time",
                      f"wall time ({unit})", ylabel, tmax / div, best.id if best else None, "by-time")
        return f'<div class="plots">{a}{b}</div>'

    def _rounds_table(self) -> str:
        rows = []
        for rs in self.rounds:
            failed = {s: n for s, n in rs.by_status.items() if s != Status.ok}
            rows.append(
                f"<tr><td>{rs.round}</td><td>{rs.ideas}</td><td>{rs.branches}</td><td>{rs.evaluated}</td>"
                f"<td>{rs.correct}</td><td class=l>{_E(fmt.by_status(failed)) if failed else '—'}</td>"
                f"<td>{fmt.x(rs.best_speedup)}</td><td>{fmt.x(rs.best_so_far)}</td><td>{fmt.tokens(rs.tokens)}</td>"
                f"<td>{'unpriced' if rs.calls and rs.unpriced == rs.calls else fmt.cost(rs.cost_usd)}</td></tr>")
        return ('<table class="stats"><thead><tr><th>round</th><th>ideas</th><th>branches</th><th>evaluated</th>'
                '<th>correct</th><th class=l>failed</th><th>best in round</th><th>best so far</th><th>tokens</th>'
                f'<th>cost</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')

    def _cost_table(self) -> str:
        if not self.costs:
            return '<p class="dim">no LLM calls recorded</p>'
        rows = [f"<tr><td class=l>{_E(c.role)}</td><td class=l>{_E(c.provider)}</td><td class=l>{_E(c.model)}</td>"
                f"<td>{c.calls}</td><td>{c.errors}</td><td>{c.tokens_in:,}</td><td>{c.tokens_out:,}</td>"
                f"<td>{_row_cost(c)}</td><td>{fmt.dur(c.latency_s)}</td></tr>" for c in self.costs]
        tot = self.st
        rows.append(f'<tr class="tot"><td class=l colspan=3>total</td><td>{tot.llm_calls}</td><td>{tot.llm_errors}'
                    f'</td><td>{tot.tokens_in:,}</td><td>{tot.tokens_out:,}</td><td>{_E(fmt.cost_of(tot))}</td>'
                    f'<td>{fmt.dur(sum(c.latency_s for c in self.costs))}</td></tr>')
        return ('<table class="stats"><thead><tr><th class=l>role</th><th class=l>provider</th><th class=l>model'
                '</th><th>calls</th><th>errors</th><th>tokens in</th><th>tokens out</th><th>cost</th>'
                f'<th>latency (sum)</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')

    def _kernel_data(self) -> dict[str, dict[str, Any]]:
        """Per kernel, the results the page renders when the kernel is opened (keys kept short: 10,000 kernels)."""
        data: dict[str, dict[str, Any]] = {}
        for k in self.t.kernels.values():
            d: dict[str, Any] = {"s": k.state, "R": k.round, "B": k.branch, "L": k.language, "h": k.code_hash}
            for key, v in (("g", k.stage), ("r", k.reason), ("t", k.time_ms), ("e", k.ref_time_ms),
                           ("c", k.compile_ref_time_ms), ("x", k.speedup), ("y", k.speedup_compile),
                           ("b", k.gbps), ("f", k.tflops), ("o", k.roofline_fraction), ("n", k.bottleneck),
                           ("j", k.timing_kind), ("d", k.device), ("N", k.ref_timings or None),
                           ("T", k.timings or None), ("u", k.eval_time_ms), ("v", k.eval_ref_time_ms),
                           ("w", k.eval_speedup), ("F", k.retime_failed)):
                if v is not None:
                    d[key] = v
            err = self.errors.get(k.id)
            if err:
                d["E"] = err if len(err) <= 4000 else err[:4000] + f"\n… ({len(err) - 4000} more characters)"
            data[str(k.id)] = d
        return data

    def _kernel(self, kid: int, out: list[str]) -> None:
        t, k = self.t, self.t.kernels[kid]
        cls = ["k", f"s-{k.state}"]
        if kid in self.on_path:
            cls.append("path")
        if self.best and kid == self.best.id:
            cls.append("best")
        badge = f'<span class="st">{_E(k.state)}</span>'
        if k.status == Status.ok:
            info = f'<span class="x">{fmt.x(k.speedup)}</span> eager · {_E(fmt.timed(k.time_ms, k.timings))}'
            if k.retime_failed:
                info += f' · <span class="why">re-timing {_E(k.retime_failed)}: not ranked</span>'
            if k.speedup_compile is not None:
                info += f" · {fmt.x(k.speedup_compile)} compile"
            if k.roofline_fraction is not None:
                info += f" · {fmt.pct(k.roofline_fraction)} roofline"
        else:
            info = f'<span class="why">{_E(fmt.one_line(k.reason, 140))}</span>'
        star = '<span class="star" title="on the path to the best kernel">★</span> ' if kid in self.on_path else ""
        role = "seed" if k.is_seed else f"b{k.branch}"
        is_open = " open" if kid in self.on_path else ""
        out.append(f'<li><details class="{" ".join(cls)}" id="k{kid}"{is_open}><summary>{star}<b>k{kid}</b> '
                   f'<span class="dim">{role}</span> {badge} {info}</summary>')
        out.append(f'<details class="res" data-k="{kid}"><summary>results &amp; code</summary></details>')
        ideas = t.ideas_of.get(kid, [])
        direct = t.direct_children.get(kid, [])
        if ideas or direct:
            out.append('<ul>')
            for iid in ideas:
                self._idea(iid, out)
            for c in direct:
                self._kernel(c, out)
            out.append('</ul>')
        out.append('</details></li>')

    def _idea(self, iid: int, out: list[str]) -> None:
        t, i = self.t, self.t.ideas[iid]
        ks = sorted(t.branches_of.get(iid, []), key=lambda k: (t.kernels[k].branch, k))
        ok = [t.kernels[k] for k in ks if t.kernels[k].status == Status.ok]
        best = max((k.speedup for k in ok if k.ranked and k.speedup is not None), default=None)
        on_path = any(k in self.on_path for k in ks)
        summ = f"{len(ok)}/{len(ks)} ok" + (f", best {fmt.x(best)}" if best is not None else "")
        out.append(f'<li><details class="idea{" path" if on_path else ""}" id="i{iid}"{" open" if on_path else ""}>'
                   f'<summary><span class="iid">i{iid}</span> <span class="dim">r{i.round}</span> '
                   f'<span class="title">{_E(fmt.one_line(i.title, 160))}</span> <span class="dim">({summ})</span>'
                   f'</summary><div class="itext">{_E(i.text or "")}</div><ul>')
        for kid in ks:
            self._kernel(kid, out)
        out.append('</ul></details></li>')

    def _tree(self) -> str:
        out: list[str] = ['<ul class="tree">']
        for kid in self.t.roots:
            self._kernel(kid, out)
        for iid in self.t.top_ideas:
            self._idea(iid, out)
        out.append('</ul>')
        if len(out) == 2:
            return '<p class="dim">the run has no kernels yet</p>'
        return "".join(out)

    def _best(self) -> str:
        b = self.best
        if b is None:
            return '<p class="dim">no correct kernel yet</p>'
        path = self.t.path_to(b.id)
        steps = []
        for kid in path:
            k = self.t.kernels[kid]
            idea = self.t.ideas.get(k.idea_id) if k.idea_id is not None else None
            via = f'<span class="iid">i{idea.id}</span> {_E(fmt.one_line(idea.title, 100))} → ' if idea else "seed → "
            steps.append(f'<li>{via}<a href="#k{kid}">k{kid}</a> {_E(k.state)} {fmt.x(k.speedup)}</li>')
        code = self.codes.get(self.hash_of.get(b.id, ""), "")
        return (f'<ol class="lineage">{"".join(steps)}</ol><div class="resbox" data-k="{b.id}"></div>'
                f'<pre class="code" data-h="{_E(self.hash_of.get(b.id, ""))}">{_E(code)}</pre>')

    def html(self) -> str:
        r = self.run
        data = _line_table(self.codes)
        data["k"] = self._kernel_data()
        data["cpu"] = fmt.CPU_KIND
        code_json = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
        code_json = code_json.replace("<", "\\u003c")   # no "</script>" or "<!--" can end the element early
        title = f"kernelsearch · {r.name}"
        return "".join([
            "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
            '<meta name=viewport content="width=device-width,initial-scale=1">',
            f"<title>{_E(title)}</title><style>{CSS}</style></head><body>",
            f'<header><h1>{_E(title)}</h1>{self._summary()}</header>',
            '<section id="progress"><h2>Progress</h2>', self._plots(), "</section>",
            '<section id="rounds"><h2>Rounds</h2><div class="scroll">', self._rounds_table(), "</div></section>",
            '<section id="cost"><h2>Cost</h2>', self._cost_table(), "</section>",
            '<section id="best"><h2>Best kernel', f" k{self.best.id}" if self.best else "", "</h2>",
            self._best(), "</section>",
            '<section id="tree"><h2>Idea tree</h2><div class="ctl"><button type=button data-act=open>expand all'
            '</button><button type=button data-act=close>collapse all</button><button type=button data-act=path>'
            'best path only</button> <span class="dim">★ the path from the starter to the best kernel · '
            f'{len(self.t.kernels)} kernels, {len(self.t.ideas)} ideas</span></div>',
            self._tree(), "</section>",
            f'<footer class="dim">written by kernelsearch from the store; run id {r.id}.</footer>',
            f'<script type="application/json" id="ks-code">{code_json}</script>',
            f"<script>{_JS}</script></body></html>",
        ])


def _line_table(codes: dict[str, str]) -> dict[str, Any]:
    """Each distinct source line once, each code as a list of line numbers into that table. Kernels of one run
    share most lines (10,000 variants of one kernel: 24 MB as text, about 3 MB this way)."""
    index: dict[str, int] = {}
    lines: list[str] = []
    out: dict[str, list[int]] = {}
    for h, code in codes.items():
        ids = []
        for ln in code.split("\n"):
            i = index.get(ln)
            if i is None:
                i = index[ln] = len(lines)
                lines.append(ln)
            ids.append(i)
        out[h] = ids
    return {"lines": lines, "codes": out}


def _row_cost(c: q.CostRow) -> str:
    if c.unpriced == c.calls:
        return "unpriced"
    return fmt.cost(c.cost_usd) + (f" +{c.unpriced} unpriced" if c.unpriced else "")


def _svg_plot(points: list[tuple[float, float]], fails: list[float], steps: list[tuple[float, float]],
              mark: Optional[tuple[float, float]], title: str, xlabel: str, ylabel: str, xmax: float,
              best_id: Optional[int], css_id: str) -> str:
    """An inline SVG: every correct evaluation as a dot, failures as ticks on the axis, the best-so-far as a
    step line, and y = 1 (eager) dashed. Dots and ticks are one path each, so 10,000 points stay small."""
    x_top = max(xmax, max((x for x, _ in points), default=0.0), max(fails, default=0.0), 1e-9)
    y_top = max([y for _, y in points] or [1.0])
    f, parts = svg_axes((560, 320, 56, 16, 30, 44), x_top, y_top, title, xlabel, ylabel, css_id=css_id,
                        empty="no evaluations yet" if not points and not fails else None)
    X, Y, L, T, pw, ph = f.x, f.y, f.left, f.top, f.width, f.height
    if fails:
        parts.append('<path class="fails" d="' + "".join(f"M{X(v):.1f} {T + ph}v-6" for v in fails) + '"/>')
    if points:
        parts.append('<path class="dots" d="' + "".join(f"M{X(a):.1f} {Y(b):.1f}h0" for a, b in points) + '"/>')
    if steps:
        d = [f"M{X(steps[0][0]):.1f} {Y(steps[0][1]):.1f}"]
        for (x0, y0), (x1, y1) in zip(steps, steps[1:]):
            if y1 != y0:
                d.append(f"H{X(x1):.1f}V{Y(y1):.1f}")
        d.append(f"H{X(f.xmax):.1f}")
        parts.append(f'<path class="best" d="{"".join(d)}"/>')
    if mark is not None:
        mx, my = X(mark[0]), Y(mark[1])
        anchor = "end" if mx > L + 0.8 * pw else "start" if mx < L + 0.2 * pw else "middle"
        parts.append(f'<circle class="mark" cx="{mx:.1f}" cy="{my:.1f}" r="5"><title>best: k{best_id}, '
                     f'{fmt.x(mark[1])}</title></circle><text x="{mx:.1f}" y="{max(my - 9, T - 2):.1f}" '
                     f'text-anchor="{anchor}" class="ml">{fmt.x(mark[1])} k{best_id}</text>')
    parts.append("</svg>")
    return "".join(parts)


# The page's only script: fills a kernel's code from the embedded JSON when its panel opens, highlights Python
# (a small tokenizer: keywords, strings, comments, numbers, decorators), and drives the tree buttons.
_JS = r"""
(function(){
"use strict";
var DATA=JSON.parse(document.getElementById("ks-code").textContent);
function codeOf(h){var ix=DATA.codes[h];return ix?ix.map(function(i){return DATA.lines[i];}).join("\n"):"";}
var KW=new Set(("False None True and as assert async await break class continue def del elif else except "+
"finally for from global if import in is lambda nonlocal not or pass raise return try while with yield").split(" "));
var NB=new Set(["tl","triton","torch","self","range","len","int","float","min","max"]);
var RE=/(#[^\n]*)|(\x22\x22\x22[\s\S]*?\x22\x22\x22|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(@[\w.]+)|\b(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\b|([A-Za-z_]\w*)/g;
function esc(s){return s.replace(/&/g,"&amp;").replace(/</g,"&lt;").replace(/>/g,"&gt;");}
function hl(code){
  var out=[],last=0,m;RE.lastIndex=0;
  while((m=RE.exec(code))!==null){
    out.push(esc(code.slice(last,m.index)));last=RE.lastIndex;
    var cls=m[1]?"c":m[2]?"s":m[3]?"nd":m[4]?"m":KW.has(m[5])?"k":NB.has(m[5])?"nb":null;
    out.push(cls?'<span class="'+cls+'">'+esc(m[0])+"</span>":esc(m[0]));
  }
  out.push(esc(code.slice(last)));return out.join("");
}
function fill(pre){
  if(pre.dataset.done)return;
  var code=pre.textContent||codeOf(pre.dataset.h);
  pre.innerHTML=hl(code);pre.dataset.done="1";
}
function ms(v){return v>=1000?(v/1000).toPrecision(3)+" s":v>=1?v.toPrecision(3)+" ms":(v*1000).toPrecision(3)+" \u00b5s";}
function x(v){return (v<0.1?v.toPrecision(2):v<100?v.toFixed(2):v.toFixed(0))+"\u00d7";}
function pct(v){return (v*100).toFixed(0)+"%";}
function results(kid){
  var d=DATA.k[kid];if(!d)return "";
  var rows=[["status",esc(d.s)+(d.g?" ("+esc(d.g)+")":"")+(d.r?" \u2014 "+esc(d.r):"")]];
  if(d.t!=null){var refs=d.e!=null?["eager "+ms(d.e)]:[];if(d.c!=null)refs.push("torch.compile "+ms(d.c));
    rows.push(["time",ms(d.t)+(d.T>1?" (median of "+d.T+" timings)":"")+(refs.length?" (the run\u2019s reference: "+
      refs.join(", ")+(d.N?", median of "+d.N+" evaluations":"")+")":"")]);}
  if(d.x!=null)rows.push(["speedup",x(d.x)+" over eager"+(d.y!=null?" \u00b7 "+x(d.y)+" over torch.compile":"")]);
  if(d.u!=null)rows.push(["its evaluation",ms(d.u)+(d.v!=null?" against eager "+ms(d.v)+" timed side by side"+
    (d.w!=null?": "+x(d.w):""):"")]);
  if(d.F)rows.push(["re-timing",esc(d.F)+": not ranked"]);
  var tp=[];if(d.b!=null)tp.push(d.b.toFixed(1)+" GB/s");if(d.f!=null)tp.push(d.f.toFixed(3)+" TFLOP/s");
  if(d.o!=null)tp.push(pct(d.o)+" of roofline");if(d.n)tp.push(esc(d.n)+"-bound");
  if(tp.length)rows.push(["throughput",tp.join(" \u00b7 ")]);
  if(d.j||d.d)rows.push(["timing",esc(d.j||"\u2014")+(d.j===DATA.cpu?" (not comparable with GPU timings)":"")+
    (d.d?" \u00b7 "+esc(d.d):"")]);
  rows.push(["kernel","round "+d.R+" \u00b7 branch "+d.B+" \u00b7 "+esc(d.L)+" \u00b7 "+esc(d.h)]);
  return '<table class="res">'+rows.map(function(r){return "<tr><th>"+r[0]+"</th><td>"+r[1]+"</td></tr>";}).join("")+
    "</table>"+(d.E?'<pre class="err">'+esc(d.E)+"</pre>":"");
}
function openRes(det){
  if(det.dataset.done)return;det.dataset.done="1";
  var kid=det.dataset.k,d=DATA.k[kid],box=document.createElement("div");
  box.innerHTML=results(kid);det.appendChild(box);
  var pre=document.createElement("pre");pre.className="code";pre.dataset.h=d?d.h:"";det.appendChild(pre);fill(pre);
}
window.ksOpen=openRes;
document.addEventListener("toggle",function(e){
  var d=e.target;if(d.open&&d.classList&&d.classList.contains("res"))openRes(d);
},true);
document.querySelectorAll(".resbox").forEach(function(b){b.innerHTML=results(b.dataset.k);});
document.querySelectorAll("#best pre.code").forEach(fill);
function openTo(id){
  var el=document.getElementById(id);
  for(var p=el;p;p=p.parentElement){if(p.tagName==="DETAILS")p.open=true;}
  if(el){var res=el.querySelector(":scope>details.res");if(res){res.open=true;openRes(res);}}
}
window.addEventListener("hashchange",function(){var h=location.hash.slice(1);if(h)openTo(h);});
if(location.hash.length>1&&document.getElementById(location.hash.slice(1)))openTo(location.hash.slice(1));
document.querySelectorAll(".ctl button").forEach(function(b){b.addEventListener("click",function(){
  var act=b.dataset.act;document.querySelectorAll("#tree details.k, #tree details.idea").forEach(function(d){
    d.open=act==="open"?true:act==="close"?false:d.classList.contains("path");});
});});
})();
"""  # noqa: E501  (the tokenizer's regular expression is one line)
