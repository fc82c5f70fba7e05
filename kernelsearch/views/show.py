"""`kernelsearch show`: one kernel with its idea, its evaluation stage by stage, its lineage and its code."""
from __future__ import annotations

import json
import textwrap
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from kernelsearch.store import DEFAULT_DB
from kernelsearch.store import queries as q
from kernelsearch.store.integrity import shown_code
from kernelsearch.store.models import Run
from kernelsearch.store.status import Status
from kernelsearch.views import fmt
from kernelsearch.views.paint import STATUS_STYLE, stdout_console
from kernelsearch.views.session import DbOpt, fail, parse_kernel_id, read_only_session, warn_damaged


def _detail_lines(obj: Any, indent: int = 2, depth: int = 0) -> list[str]:
    pad = " " * indent
    if isinstance(obj, dict):
        out: list[str] = []
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v and depth < 4 and not _short(v):
                out.append(f"{pad}{k}:")
                out.extend(_detail_lines(v, indent + 2, depth + 1))
            else:
                out.append(f"{pad}{k}: {_scalar(v)}")
        return out
    if isinstance(obj, list):
        out = []
        for v in obj:
            if isinstance(v, dict) and depth < 4:
                sub = _detail_lines(v, indent + 2, depth + 1)
                out.append(f"{pad}- " + sub[0].strip() if sub else f"{pad}- {{}}")
                out.extend(sub[1:])
            else:
                out.append(f"{pad}- {_scalar(v)}")
        return out
    return [f"{pad}{_scalar(obj)}"]


def _short(v: Any) -> bool:
    return isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v) and len(json.dumps(v)) <= 100


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        return fmt.one_line(json.dumps(v), 160)
    return fmt.one_line(str(v), 400) if isinstance(v, str) else str(v)


def _kernel_brief(k: q.KernelRow) -> str:
    res = k.state
    if k.status == Status.ok:
        res += f" {fmt.x(k.speedup)} eager"
        if k.speedup_compile is not None:
            res += f", {fmt.x(k.speedup_compile)} compile"
    elif k.reason:
        res += f": {fmt.one_line(k.reason, 80)}"
    return f"k{k.id} ({res})"


def _group_note(r, key: str = "retime_group", who: str = "finalist") -> str:
    """How a timing was taken: side by side with other kernels in one timing stage (judge/group.py: finalists
    re-timed, `retime_group`; first evaluations in a group, `timing_group`), or alone (an evaluation of its own)."""
    try:
        size = json.loads(r.detail_json or "{}").get(key)
    except (ValueError, AttributeError):
        size = None
    if isinstance(size, int) and size > 1:
        return f"; side by side with {size - 1} other {who}{'s' if size > 2 else ''} in one timing stage"
    return "; timed alone"


def _clock_rows(grid: Table, row: q.KernelRow, ev, retimes: list) -> None:
    """The kernel's own time (the median of its timings), the run's reference figure and their ratio, then what
    its evaluation measured side by side, and its re-timings (store/clock.py)."""
    grid.add_row("time", f"{fmt.timed(row.time_ms, row.timings)}  (its own time: the median of its ok timings)")
    if row.ref_time_ms is not None:
        refs = [f"eager {fmt.ms(row.ref_time_ms)}"]
        if row.compile_ref_time_ms is not None:
            refs.append(f"torch.compile {fmt.ms(row.compile_ref_time_ms)}")
        grid.add_row("reference", f"{', '.join(refs)}  (the run's figure on this device: the median of "
                                  f"{row.ref_timings} evaluations' side-by-side timings)")
    if row.speedup is not None or row.speedup_compile is not None:
        grid.add_row("speedup", f"{fmt.x(row.speedup)} over eager · {fmt.x(row.speedup_compile)} over torch.compile")
    if ev.time_ms is not None:
        grouped = _group_note(ev, "timing_group", "kernel") if "timing_group" in (ev.detail_json or "") else ""
        grid.add_row("its evaluation", f"{fmt.ms(ev.time_ms)} against eager {fmt.ms(ev.ref_time_ms)} timed side by "
                                       f"side ({fmt.x(ev.speedup)}; not ranked by){grouped}")
    for n, r in enumerate(retimes, start=1):
        what = (f"{fmt.ms(r.time_ms)} against eager {fmt.ms(r.ref_time_ms)}" if r.status == Status.ok
                else f"{r.status}: {fmt.one_line(r.reason, 100)}")
        grid.add_row(f"re-timing {n}", f"{what}{_group_note(r)}  ({fmt.when(r.created_at)})")
    if row.retime_failed:
        grid.add_row("", Text(f"a re-timing was {row.retime_failed}: the kernel is not ranked", style="red"))


def show_cmd(
    kernel: Annotated[str, typer.Argument(metavar="KERNEL_ID", help="A kernel id as the tree prints it (12 or k12).")],
    db: DbOpt = DEFAULT_DB,
) -> None:
    """One kernel: its idea, every stage's evaluation result, its lineage up to the starter, and its code."""
    kid = parse_kernel_id(kernel)
    with read_only_session(db) as s:
        k = q.get_kernel(s, kid)
        if k is None:
            fail(f"no kernel {kid} in {db}")
        run = s.get(Run, k.run_id)
        if run is not None:
            warn_damaged(s, run, kernel_id=kid)
        ev = q.get_evaluation(s, kid)
        retimes = q.retimings(s, kid)
        chain = q.lineage(s, kid)
    row = chain[-1][0] if chain else None   # through the run's clock: its own time, the run's reference figure
    c = stdout_console()
    idea = chain[-1][1] if chain else None
    c.print(Text.assemble((f"kernel k{k.id}", "bold"), f" · run {run.name if run else k.run_id}"
                          f" ({run.problem if run else '?'}) · round {k.round} · "
                          + ("seed (the starter)" if k.idea_id is None else f"branch {k.branch} of idea i{k.idea_id}")
                          + f" · {k.language} · hash {k.code_hash[:12]} · written {fmt.when(k.created_at)}"))
    if idea is not None:
        c.print(Text.assemble(("\nidea ", "bold"), (f"i{idea.id}", "cyan"), f" (round {idea.round}, from "
                              f"k{idea.parent_kernel_id}): ", (idea.title, "bold cyan")))
        for para in (idea.text or "").strip().splitlines():
            c.print(Text(textwrap.fill(para, width=110, initial_indent="  ", subsequent_indent="  ")
                         if para.strip() else ""))
    c.print(Text("\nevaluation", style="bold"))
    if ev is None:
        c.print("  queued: not evaluated yet")
    else:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim", justify="right")
        grid.add_column()
        style = STATUS_STYLE.get(ev.status, "red")
        grid.add_row("status", Text.assemble((ev.status, style), f"  (last stage: {ev.stage or '—'})"))
        if ev.reason:
            grid.add_row("reason", ev.reason)
        kind = ev.timing_kind or "—"
        if ev.timing_kind == fmt.CPU_KIND:
            kind += " (CPU interpreter timing: not comparable with GPU timings)"
        grid.add_row("timing", kind)
        if row is not None and row.time_ms is not None:
            _clock_rows(grid, row, ev, retimes)
        if any(v is not None for v in (ev.gbps, ev.tflops, ev.roofline_fraction)):
            tp = []
            if ev.gbps is not None:
                tp.append(f"{ev.gbps:.1f} GB/s")
            if ev.tflops is not None:
                tp.append(f"{ev.tflops:.3f} TFLOP/s")
            if ev.roofline_fraction is not None:
                tp.append(f"{fmt.pct(ev.roofline_fraction)} of roofline")
            if ev.bottleneck:
                tp.append(f"{ev.bottleneck}-bound")
            grid.add_row("throughput", " · ".join(tp))
        dev = ev.device or "—"
        if ev.gpu_index is not None:
            dev += f" (gpu {ev.gpu_index})"
        grid.add_row("device", dev)
        if ev.wall_s is not None:
            grid.add_row("worker wall", fmt.dur(ev.wall_s))
        grid.add_row("evaluated", fmt.when(ev.created_at))
        c.print(grid)
        try:
            detail = json.loads(ev.detail_json or "{}")
        except (json.JSONDecodeError, TypeError):   # a damaged row (warned above): shown as it is
            raw = ev.detail_json
            detail = {"(unparsed detail)": raw if isinstance(raw, str) else repr(raw)[:500]}
        if not isinstance(detail, dict):
            detail = {"(detail that is not an object)": detail}
        if detail:
            c.print(Text("\ndetail (per stage)", style="bold"))
            lines = _detail_lines(detail)
            if len(lines) > 200:
                lines = lines[:200] + [f"  … {len(lines) - 200} more lines"]
            c.print(Text("\n".join(lines)), soft_wrap=True)
        if ev.error_text:
            c.print(Text("\nerror text", style="bold"))
            c.print(Text(textwrap.indent(ev.error_text.rstrip(), "  ")), soft_wrap=True)
    c.print(Text("\nlineage (starter → this kernel)", style="bold"))
    for n, (kr, ir) in enumerate(chain):
        lead = "  " + "   " * (n - 1) + "└─ " if n else "  "
        via = f"i{ir.id} r{ir.round} “{fmt.one_line(ir.title, 70)}” → " if ir else "seed "
        c.print(Text(lead + via + _kernel_brief(kr) + ("  ← this kernel" if kr.id == kid else "")), soft_wrap=True)
    from rich.syntax import Syntax  # pygments: imported only by the command that highlights

    code = shown_code(k.code).rstrip("\n")
    c.print(Text(f"\ncode ({k.language}, {code.count(chr(10)) + 1} lines)", style="bold"))
    c.print(Syntax(code, "python", line_numbers=True, word_wrap=False, theme="ansi_dark"), soft_wrap=True)
