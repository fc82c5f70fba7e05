"""Read-only views of the store: runs, tree, show (and, later, diff, compare, report, export-tsv)."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the read-only commands to the CLI."""
