"""A sha256 of every kernel the built-in families' search spaces render at the points a search can reach.

    python bench/render_hashes.py --save /tmp/render_hashes_before.json    # a baseline
    python bench/render_hashes.py --compare /tmp/render_hashes_before.json # after a refactor: every hash the same

The points of each family's space (its `space.py` SPACE): the default (the starter); every point one and two
moves away (SearchSpace.applicable, the moves the offline provider proposes); from the default and each
one-move point, every value of each tuning knob that the coder's branches vary (SearchSpace.branches, feasible
points only); and the default with each parameter set to each of its values (so every knob of every template is
rendered at least once, reachable or not). A refactor of the templates changes no kernel when every hash matches.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from pathlib import Path

from kernelsearch.judge.problem import FAMILIES_DIR


def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def points(space) -> list[dict]:
    """The points of `space` hashed, without repeats, in a fixed order."""
    found: dict[str, dict] = {}

    def add(p: dict) -> None:
        found.setdefault(_key(p), p)

    add(dict(space.default))
    one = [new for _, new in space.applicable(space.default)]
    for p in one:
        add(p)
        for _, new in space.applicable(p):
            add(new)
    for base in [dict(space.default), *one]:
        for k in space.tuning:
            for v in space.params[k]:
                cand = {**base, k: v}
                if space.feasible(cand):
                    add(cand)
    for k, values in space.params.items():
        for v in values:
            add({**space.default, k: v})
    return [found[k] for k in sorted(found)]


def hashes() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for family in sorted(p.name for p in FAMILIES_DIR.iterdir() if (p / "space.py").exists()):
        space = importlib.import_module(f"kernelsearch.families.{family}.space").SPACE
        out[family] = {_key(p): hashlib.sha256(space.render(p).encode()).hexdigest() for p in points(space)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--save", type=Path, help="write the hashes to this JSON file")
    ap.add_argument("--compare", type=Path, help="compare with the hashes saved in this JSON file")
    args = ap.parse_args(argv)
    now = hashes()
    for family, table in now.items():
        print(f"{family:24s} {len(table):5d} points")
    total = sum(len(t) for t in now.values())
    print(f"{'total':24s} {total:5d} points")
    if args.save:
        args.save.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"saved to {args.save}")
    if args.compare:
        before = json.loads(args.compare.read_text())
        changed = [(f, p) for f, t in before.items() for p, h in t.items() if now.get(f, {}).get(p) != h]
        added = [(f, p) for f, t in now.items() for p in t if p not in before.get(f, {})]
        for f, p in changed[:20]:
            print(f"DIFFERENT or missing: {f} {p}")
        for f, p in added[:20]:
            print(f"not in the baseline: {f} {p}")
        same = sum(len(t) for t in before.values()) - len(changed)
        print(f"{same} of {sum(len(t) for t in before.values())} baseline points identical; "
              f"{len(changed)} different or missing, {len(added)} new")
        return 1 if changed or added else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
