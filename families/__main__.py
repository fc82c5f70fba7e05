"""Write each family's starter.py (and starter_cuda.py): its search space's default, rendered.

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


def rendered_starters(name: str) -> dict[str, str]:
    """Each starter file of a family and its space's default rendered: starter.py, and starter_cuda.py where the
    family has a CUDA C++ space (space_cuda.py)."""
    out = {"starter.py": rendered_starter(name)}
    if (FAMILIES_DIR / name / "space_cuda.py").is_file():
        space = importlib.import_module(f"kernelsearch.families.{name}.space_cuda").CUDA_SPACE
        out["starter_cuda.py"] = space.render(space.default)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelsearch.families", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a starter.py is out of date")
    args = ap.parse_args(argv)
    stale = []
    for name in family_names():
        for file, text in rendered_starters(name).items():
            path = FAMILIES_DIR / name / file
            if path.is_file() and path.read_text() == text:
                continue
            stale.append(f"{name}/{file}")
            if not args.check:
                path.write_text(text)
            print(f"{name}: {file} {'differs from' if args.check else 'written from'} its space's default")
    if not stale:
        print(f"all {len(family_names())} starters match their spaces")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
