"""The command line: `kernelsearch run | resume | eval` here; the read-only views are in views.py."""
from __future__ import annotations

import typer

from kernelsearch import views

app = typer.Typer(add_completion=False, no_args_is_help=True, help="LLM-driven tree search for fast GPU kernels.")
views.register(app)


def main() -> None:
    app()
