"""Painting for the terminal views: the console they print on, ANSI styles, the colour of each status."""
from __future__ import annotations

import os
import sys
from typing import Optional

from rich.color import ColorSystem
from rich.console import Console
from rich.style import Style


def stdout_console() -> Console:
    """Wide when writing to a pipe or file (so lines stay whole), the terminal's width otherwise."""
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200
    return Console(width=width, highlight=False, soft_wrap=False, markup=False)   # store text is not markup


_COLOR_SYSTEMS = {"standard": ColorSystem.STANDARD, "256": ColorSystem.EIGHT_BIT,
                  "truecolor": ColorSystem.TRUECOLOR, "windows": ColorSystem.WINDOWS}


class Paint:
    """Styles text as ANSI strings directly: a 10,000-line tree costs milliseconds, not rich.Tree's seconds."""

    def __init__(self, console: Console):
        cs = console.color_system if console.is_terminal and not console.no_color else None
        self.cs = _COLOR_SYSTEMS.get(cs) if cs else None
        self._styles: dict[str, Style] = {}

    def __call__(self, text: str, style: Optional[str] = None) -> str:
        if not style or self.cs is None:
            return text
        st = self._styles.get(style)
        if st is None:
            st = self._styles[style] = Style.parse(style)
        return st.render(text, color_system=self.cs)


STATUS_STYLE = {"ok": "bold green", "queued": "blue", "incorrect": "red", "compile_error": "magenta",
                "timeout": "yellow", "crash": "red", "rejected": "bold red",
                "harness_error": "cyan",   # not the kernel's failure: the judge could not evaluate it
                "unverified": "cyan"}      # compiled where no GPU is, nothing ran: not the kernel's failure either
