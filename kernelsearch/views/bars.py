"""The batch page's bar chart: each problem's best speedup, over eager and over torch.compile, as bars up or down
from 1x on a log2 scale (a batch spans 0.05x to 30x, which a linear axis would flatten). A problem with no correct
kernel is a cross on the 1x line, labelled with why (refused, pending, no correct kernel), so the chart shows every
problem fast_p counts."""
from __future__ import annotations

import html
import math
from typing import Optional

_E = html.escape
EAGER_FILL, COMPILE_FILL = "#1f5fbf", "#b7791f"


def _log2(v: float) -> float:
    return math.log2(max(v, 2.0 ** -10))


def _label(v: float) -> str:
    return f"{v:g}x" if v >= 1 else f"1/{1 / v:g}x"


def speedup_bars(rows: list, title: str = "best speedup per problem") -> str:
    """An inline SVG of `rows` (kernelsearch.bench.Row): per problem a bar for its best kernel's speedup over eager
    and, where measured, one over torch.compile; a cross where no kernel is correct."""
    vals = [_log2(v) for r in rows if r.correct for v in (r.best, r.best_compile) if v]
    lo = math.floor(min(vals + [-1.0]))
    hi = math.ceil(max(vals + [1.0]))
    slot = 30
    L, R, T, B = 56, 16, 30, 150
    pw, ph = max(len(rows) * slot, 240), 220
    W, H = L + pw + R, T + ph + B

    def y(lv: float) -> float:
        return T + ph * (hi - min(max(lv, lo), hi)) / (hi - lo)

    parts = [f'<svg class="plot" id="plot-bars" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
             f'aria-label="{_E(title)}"><text x="{L}" y="18" class="pt">{_E(title)}</text>']
    grid, labels = [], []
    for k in range(lo, hi + 1):
        grid.append(f"M{L} {y(k):.1f}H{L + pw}")
        labels.append(f'<text x="{L - 6}" y="{y(k) + 4:.1f}" text-anchor="end">{_label(2.0 ** k)}</text>')
    parts.append(f'<path class="grid" d="{"".join(grid)}"/>')
    parts.extend(labels)
    parts.append(f'<path class="axis" d="M{L} {T}V{T + ph}"/><path class="eager" d="M{L} {y(0):.1f}H{L + pw}"/>')
    bw = (slot - 8) / 2
    for i, r in enumerate(rows):
        x0 = L + i * slot + 4
        cx = x0 + slot / 2 - 4
        if r.correct:
            for j, (v, fill, what) in enumerate(((r.best, EAGER_FILL, "eager"), (r.best_compile, COMPILE_FILL,
                                                                                  "torch.compile"))):
                if not v:
                    continue
                top, bot = sorted((y(_log2(v)), y(0)))
                parts.append(f'<rect x="{x0 + j * bw:.1f}" y="{top:.1f}" width="{bw:.1f}" '
                             f'height="{max(bot - top, 1):.1f}" fill="{fill}"><title>{_E(r.problem)}: '
                             f'{v:.3g}x over {what}</title></rect>')
        else:
            why = _why(r)
            parts.append(f'<path class="fails" d="M{cx - 4:.1f} {y(0) - 4:.1f}l8 8m0 -8l-8 8" stroke-width="2">'
                         f'<title>{_E(r.problem)}: {_E(why)}</title></path>')
        parts.append(f'<text transform="translate({cx + 3:.1f} {T + ph + 8}) rotate(60)" class="al">'
                     f'{_E(r.problem[:24])}</text>')
    parts.append(f'<rect x="{L + pw - 190}" y="8" width="10" height="10" fill="{EAGER_FILL}"/>'
                 f'<text x="{L + pw - 176}" y="17">over eager</text>'
                 f'<rect x="{L + pw - 100}" y="8" width="10" height="10" fill="{COMPILE_FILL}"/>'
                 f'<text x="{L + pw - 86}" y="17">over compile</text>')
    parts.append("</svg>")
    return "".join(parts)


def _why(r) -> str:
    status: Optional[str] = r.status.split(" ")[0] if r.status else None
    if status == "refused":
        return f"refused: {r.refused}"
    if status in ("pending", "not"):
        return "not searched yet"
    return "no correct kernel"
