"""Write each family's starter.py: its search space's default, rendered.

    python -m kernelsearch.families            # rewrite the starters that differ from their space
    python -m kernelsearch.families --check    # only say which differ (exit 1 if any)

Run it after changing a template or a space's default: tests/families/test_starters.py fails until the files
and the spaces agree, and the file is what a search seeds round 0 with (problem.load_family reads it).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from kernelsearch.judge.problem import FAMILIES_DIR, family_names


def rendered_starter(name: str) -> str:
    space = importlib.import_module(f"kernelsearch.families.{name}.space").SPACE
    return space.render(space.default)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelsearch.families", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a starter.py is out of date")
    args = ap.parse_args(argv)
    stale = []
    for name in family_names():
        path = FAMILIES_DIR / name / "starter.py"
        text = rendered_starter(name)
        if path.is_file() and path.read_text() == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text)
        print(f"{name}: starter.py {'differs from' if args.check else 'written from'} its space's default")
    if not stale:
        print(f"all {len(family_names())} starters match their spaces")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
