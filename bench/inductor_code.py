"""What torch.compile generates for a family's reference on its timed case: the Triton source and launch configs.

    python3 bench/inductor_code.py rotary_embedding reduce --out DIR

For each family: the reference `Model` is compiled and run once on the timed case's inputs; Inductor's generated
module (every Triton kernel with its heuristics decorator) goes to DIR/<family>.py, and the config each kernel
ran with (after Inductor's own autotuning, where it autotunes) is printed: block sizes, warps, stages. This is
how a gap to torch.compile gets a cause rather than a guess. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from kernelsearch.families import load_family


def _launch_configs(seen: set) -> list[str]:
    """Every Inductor Triton kernel loaded in this process and not in `seen`, with the config it launches with."""
    import gc

    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    lines = []
    for obj in gc.get_objects():
        try:
            if not isinstance(obj, CachingAutotuner) or id(obj) in seen:
                continue
        except ReferenceError:   # a weak proxy whose referent is gone
            continue
        seen.add(id(obj))
        name = getattr(obj.fn, "__name__", None) or (getattr(obj, "inductor_meta", None) or {}).get("kernel_name")
        for launcher in (getattr(obj, "launchers", None) or [])[:1]:
            cfg = launcher.config
            lines.append(f"{name}: {cfg.kwargs} num_warps={cfg.num_warps} num_stages={cfg.num_stages} "
                         f"(of {len(obj.configs or [])} configs)")
    return sorted(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="+")
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("inductor_code: needs a CUDA GPU", file=sys.stderr)
        return 2
    from torch._inductor.utils import run_and_get_code

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seen: set = set()
    for name in args.families:
        problem = load_family(name)
        case = problem.timed_case
        torch.manual_seed(0)
        model = problem.module.Model(*problem.build_init_inputs(case)).cuda()
        inputs = problem.build_inputs(case, 1234, "cuda")
        torch._dynamo.reset()
        with torch.no_grad():
            compiled = torch.compile(model)
            _, codes = run_and_get_code(compiled, *inputs)
        (out / f"{name}.py").write_text("\n\n# ---- next module ----\n\n".join(codes))
        print(f"{name} ({case.describe()}): {len(codes)} module(s) -> {out / (name + '.py')}")
        for line in _launch_configs(seen):
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
