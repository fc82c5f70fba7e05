"""Read-only views of the store: `runs`, `tree`, `show`, `diff`, `compare`, `report`, `export-tsv`.

Every command opens the store read-only (and, on top, sets SQLite's `query_only` on its connections), so none
of them can change it. A missing store, an unknown run or an unknown kernel is one line on stderr and exit
code 2. The queries live in `kernelsearch.store.queries`. Here: one module per command group (runs.py, tree.py,
show.py, compare.py for diff and compare, tsv.py, report.py for the HTML page, batch.py for a bench batch's
compare and page), opening the store in
session.py, terminal styles in paint.py, number formatting shared with the report in fmt.py, the HTML pages'
stylesheet and SVG plot axes in page.py.
"""
from __future__ import annotations

import typer

from kernelsearch.views.compare import compare_cmd, diff_cmd
from kernelsearch.views.report import report_cmd
from kernelsearch.views.runs import runs_cmd
from kernelsearch.views.show import show_cmd
from kernelsearch.views.tree import tree_cmd
from kernelsearch.views.tsv import export_tsv_cmd


def register(app: typer.Typer) -> None:
    """Add the read-only commands to the CLI."""
    app.command("runs")(runs_cmd)
    app.command("tree")(tree_cmd)
    app.command("show")(show_cmd)
    app.command("diff")(diff_cmd)
    app.command("compare")(compare_cmd)
    app.command("report")(report_cmd)
    app.command("export-tsv")(export_tsv_cmd)
