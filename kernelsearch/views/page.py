"""What the HTML pages of `kernelsearch report` share: the stylesheet, and the frame of an inline SVG plot (its
ranges rounded up to whole ticks, the grid, the axes and their labels, the dashed eager line) that each plot draws
its own data into."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Iterable, Optional

_E = html.escape


def nice_step(span: float, n: int = 5) -> float:
    """A tick step of 1, 2, 2.5 or 5 times a power of ten that cuts `span` into at most about `n` steps."""
    if span <= 0:
        return 1.0
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def fmt_tick(v: float) -> str:
    """A tick's label: a whole number as one, else two or three significant digits."""
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.2g}" if abs(v) < 1 else f"{v:.3g}"


@dataclass(frozen=True)
class Frame:
    """Where a plot's data goes: the plotting area (left edge, top edge, width and height in SVG units) and the data
    ranges it spans, x from 0 to xmax and y from 0 to ymax."""

    left: int
    top: int
    width: int
    height: int
    xmax: float
    ymax: float

    def x(self, v: float) -> float:
        """The SVG x of data x `v`."""
        return self.left + self.width * v / self.xmax

    def y(self, v: float) -> float:
        """The SVG y of data y `v` (a value past the top is drawn at the top)."""
        return self.top + self.height * (1 - min(v, self.ymax) / self.ymax)


def svg_axes(box: tuple[int, int, int, int, int, int], x_top: float, y_top: float, title: str, xlabel: str,
             ylabel: str, *, css_id: Optional[str] = None, dashed_x: Iterable[float] = (), eager_label: bool = True,
             empty: Optional[str] = None) -> tuple[Frame, list[str]]:
    """The opening of an inline SVG plot, as its frame and the SVG pieces so far: the title, a grid at whole ticks
    from 0 to past `x_top` and `y_top` (the data's largest x and y), the axes and their labels, a dashed vertical
    line at each of `dashed_x`, and y = 1 (eager) dashed, `eager_label` naming it. `box` is the width, the height,
    then the left, right, top and bottom margins; `css_id` gives the element the id `plot-<css_id>`; `empty` is a
    line written across the middle when there is no data to draw. The caller adds its data and the closing tag."""
    W, H, L, R, T, B = box
    pw, ph = W - L - R, H - T - B
    # y = 1 (eager) is in range unless every speedup is far below it (CPU-interpreter runs: 0.002x and such)
    ymax_data = y_top
    if ymax_data > 0.3:
        ymax_data = max(ymax_data, 1.0)
    ystep = nice_step(ymax_data * 1.1)
    ymax = ystep * math.ceil(ymax_data * 1.1 / ystep)
    xstep = nice_step(x_top)
    xmax = xstep * math.ceil(x_top / xstep)
    f = Frame(L, T, pw, ph, xmax, ymax)
    X, Y = f.x, f.y

    ident = f' id="plot-{css_id}"' if css_id else ""
    parts = [f'<svg class="plot"{ident} viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
             f'aria-label="{_E(title)}"><text x="{L}" y="18" class="pt">{_E(title)}</text>']
    grid, labels = [], []
    y = 0.0
    while y <= ymax + 1e-9:
        grid.append(f"M{L} {Y(y):.1f}H{L + pw}")
        labels.append(f'<text x="{L - 6}" y="{Y(y) + 4:.1f}" text-anchor="end">{fmt_tick(y)}</text>')
        y += ystep
    x = 0.0
    while x <= xmax + 1e-9:
        grid.append(f"M{X(x):.1f} {T}V{T + ph}")
        labels.append(f'<text x="{X(x):.1f}" y="{T + ph + 16}" text-anchor="middle">{fmt_tick(x)}</text>')
        x += xstep
    parts.append(f'<path class="grid" d="{"".join(grid)}"/>')
    parts.append(f'<path class="axis" d="M{L} {T}V{T + ph}H{L + pw}"/>')
    parts.extend(labels)
    for v in dashed_x:
        parts.append(f'<path class="eager" d="M{X(v):.1f} {T}V{T + ph}"/>')
    parts.append(f'<text x="{L + pw / 2}" y="{H - 6}" text-anchor="middle" class="al">{_E(xlabel)}</text>')
    parts.append(f'<text transform="translate(14 {T + ph / 2}) rotate(-90)" text-anchor="middle" class="al">'
                 f'{_E(ylabel)}</text>')
    if ymax >= 1.0:
        parts.append(f'<path class="eager" d="M{L} {Y(1.0):.1f}H{L + pw}"/>')
        if eager_label:
            parts.append(f'<text x="{L + pw - 2}" y="{Y(1.0) - 4:.1f}" text-anchor="end" class="el">eager</text>')
    if empty is not None:
        parts.append(f'<text x="{L + pw / 2}" y="{T + ph / 2}" text-anchor="middle" class="al">{_E(empty)}</text>')
    return f, parts


# The stylesheet of every page: a run's, a batch's, an experiment's and a model run's.
CSS = """
:root{--fg:#1d232a;--dim:#6b7480;--bg:#fff;--line:#d8dde3;--ok:#16794c;--bad:#b42318;--warn:#a15c00;--acc:#1f5fbf;
--path:#b7791f}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);
background:var(--bg);margin:0 auto;max-width:1240px;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);
padding-bottom:4px}
a{color:var(--acc)}.dim{color:var(--dim)}.meta{margin:4px 0}.note{color:var(--warn);margin:4px 0}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin-top:10px}.card{border:1px solid var(--line);border-radius:6px;
padding:8px 12px;min-width:130px}.card .lab{color:var(--dim);font-size:12px}.card .val{font-size:20px;font-weight:600}
.card .sub{color:var(--dim);font-size:12px;max-width:260px}
.plots{display:flex;flex-wrap:wrap;gap:16px}.plot{border:1px solid var(--line);border-radius:6px;background:#fff}
.plot text{font-size:11px;fill:var(--fg)}.plot .pt{font-size:13px;font-weight:600}.plot .al{fill:var(--dim)}
.plot .grid{stroke:#eef0f3;fill:none}.plot .axis{stroke:#8a939e;fill:none}.plot .eager{stroke:#8a939e;
stroke-dasharray:4 3;fill:none}.plot .el{fill:var(--dim)}.plot .dots{stroke:#9aa6b5;stroke-width:4;
stroke-linecap:round;fill:none;opacity:.7}.plot .fails{stroke:var(--bad);stroke-width:1;opacity:.5;fill:none}
.plot .best{stroke:var(--acc);stroke-width:2;fill:none}.plot .mark{fill:var(--path);stroke:#fff}
.plot .ml{font-weight:600;fill:var(--path)}
table.stats{border-collapse:collapse;font-variant-numeric:tabular-nums}table.stats th,table.stats td{
padding:3px 10px;border-bottom:1px solid var(--line);text-align:right}table.stats .l{text-align:left}
table.stats tr.tot td{font-weight:600}table.stats td{white-space:nowrap}.scroll{overflow-x:auto}
table.res{border-collapse:collapse;margin:6px 0;font-size:13px}table.res th{text-align:right;color:var(--dim);
font-weight:normal;padding:1px 10px 1px 0;vertical-align:top}table.res td{padding:1px 0}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:8px 10px;overflow:auto;
font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;max-height:560px}pre.err{color:var(--bad)}
pre.code:empty::before{content:"(code loads when opened)";color:var(--dim)}
.code .k{color:#8839ef;font-weight:600}.code .s{color:#0a7a3d}.code .c{color:#7a8490;font-style:italic}
.code .m{color:#b35900}.code .nd{color:#1f5fbf}.code .nb{color:#00739e}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:18px;border-left:1px dotted var(--line)}
ul.tree{padding-left:0;border:0}details>summary{cursor:pointer;padding:1px 0}details.k>summary .st{
font-weight:600}details.s-ok>summary .st{color:var(--ok)}details.k:not(.s-ok):not(.s-queued)>summary .st{
color:var(--bad)}details.s-queued>summary .st{color:var(--acc)}.why{color:var(--dim)}.x{font-weight:600}
details.path>summary{background:#fff7e0}details.best>summary{background:#ffe9b3}.star{color:var(--path)}
.iid{color:#00739e;font-weight:600}.idea .title{font-weight:600}.itext{white-space:pre-wrap;color:#36404a;
margin:2px 0 4px 18px;font-size:13px}details.res{margin:2px 0 6px 18px}details.res>summary{color:var(--dim);
font-size:12px}.ctl{margin:4px 0 10px}.ctl button{margin-right:6px}ol.lineage{margin:4px 0 8px}
footer{margin-top:32px;font-size:12px}
"""
