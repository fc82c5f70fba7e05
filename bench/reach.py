"""Reachability of each family's tuned starter from its plainest kernel in the offline provider's idea graph (CPU,
no kernel runs): the fewest ideas (a move, coded as stated or with one tuning knob changed by a branch) from the
plain point to the kernel the space's DEFAULT renders, every point on the way feasible at the family's cases.
The walk: families/reach.py; the test that bounds it: tests/families/test_reach.py.

    python3 bench/reach.py                      # every family with a plain point
    python3 bench/reach.py softmax rmsnorm --depth 5

The plain points are bench/strategies_gpu.py's PLAIN (the GPU strategies bench starts there) and, for the other
families, PLAIN_MORE below: the simplest variant with untuned knobs.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from strategies_gpu import PLAIN  # noqa: E402

PLAIN_MORE = {
    "layernorm": {"variant": "two_pass", "BLOCK": 1024, "ROWS": 1, "num_warps": 4, "num_stages": 1,
                  "persistent": False, "cache_hints": False},
    "layernorm_crfm": {"variant": "two_pass", "BLOCK": 1024, "ROWS": 1, "num_warps": 4, "num_stages": 1,
                       "persistent": False, "cache_hints": False},
    "cross_entropy": {"variant": "two_sweep", "BLOCK": 1024, "num_warps": 4, "num_stages": 1, "persistent": False,
                      "exp2": False, "cache_hints": False},
    "softmax_crfm": {"variant": "three_pass", "BLOCK": 1024, "ROWS": 1, "num_warps": 4, "num_stages": 1,
                     "persistent": False, "exp2": False, "stats": "lane", "cache_hints": False},
    "reduce": {"variant": "chunked", "BLOCK": 512, "ROWS": 1, "num_warps": 4, "num_stages": 1,
               "cache_hints": False},
    "rotary_embedding": {"variant": "rows", "BLOCK_S": 1, "HEADS": 1, "num_warps": 4, "num_stages": 1,
                         "cache_hints": False},
    "flash_attention_causal": {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1,
                               "split_diagonal": False, "tma": False, "longest_first": False},
    "fused_mlp": {"variant": "separate", "gate_up_tile": "64x64x64", "gate_up_warps": 4, "gate_up_stages": 2,
                  "down_tile": "64x128x64", "down_warps": 4, "down_stages": 2, "GROUP_M": 1, "tma": False},
}
PLAINS = {**PLAIN, **PLAIN_MORE}


def space_of(family: str):
    return importlib.import_module(f"kernelsearch.families.{family}.space").SPACE


def main(argv: list[str] | None = None) -> int:
    from kernelsearch.families.reach import shortest_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*", default=list(PLAINS))
    ap.add_argument("--depth", type=int, default=5, help="look at most this many ideas deep")
    ap.add_argument("--stated", action="store_true",
                    help="ideas coded as stated only (one branch an idea: the sequential strategy)")
    ap.add_argument("--to", default=None, help="a target point as JSON over the default (one family only)")
    args = ap.parse_args(argv)
    rows = []
    for f in args.families:
        space = space_of(f)
        start = {**space.default, **PLAINS[f]}
        space.validate(start)
        target = {**space.default, **json.loads(args.to)} if args.to else dict(space.default)
        why = space.infeasible(start)
        if why:
            print(f"{f}: the plain point is infeasible: {why}")
            continue
        t0 = time.monotonic()
        r = shortest_path(space, start, target, max_depth=args.depth, branched=not args.stated)
        dt = time.monotonic() - t0
        got = f"{len(r.path)} ideas" if r.found else f"not within {r.depth}"
        print(f"\n== {f}: {'reachable' if r.found else 'NOT reachable'}, {got} "
              f"({r.explored} points walked, {dt:.1f} s)")
        for i, s in enumerate(r.path, 1):
            branch = f"  + branch {s.branch[0]}={s.branch[1]}" if s.branch else ""
            print(f"  {i}. {s.move}{branch}")
        if r.repeats:
            print(f"  (repeats {', '.join(r.repeats)}: the lineage rule would not propose it twice)")
        rows.append((f, r.found, len(r.path) if r.found else None))
    print(f"\n{'family':<24}{'reachable':>10}{'ideas':>7}")
    for f, found, n in rows:
        print(f"{f:<24}{'yes' if found else 'no':>10}{n if n is not None else '-':>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
