"""What the exact one-hot softmax costs flash attention: the starter beside the same kernel with the scale folded
into one multiply-add (the form it had until 2026-12-03, which fails the harness's stability check), and SDPA,
each timed twice in one process on the timed case. Needs a CUDA GPU.

    python3 bench/attn_exact_cost.py
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_families as bf  # noqa: E402

from kernelsearch.families import load_family  # noqa: E402

EXACT = ("        m_new = tl.maximum(m_i, tl.max(qk, axis=1))\n"
         "        p = tl.math.exp2((qk - m_new[:, None]) * qk_scale)\n"
         "        alpha = tl.math.exp2((m_i - m_new) * qk_scale)\n")
FOLDED = ("        m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)\n"
          "        p = tl.math.exp2(qk * qk_scale - m_new[:, None])\n"
          "        alpha = tl.math.exp2(m_i - m_new)\n")


def main() -> int:
    if not torch.cuda.is_available():
        print("attn_exact_cost: needs a CUDA GPU", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="attn_exact_"))
    for fam in ("flash_attention", "flash_attention_causal"):
        problem = load_family(fam)
        space = problem.family.SPACE
        source = space.render(space.default)
        if EXACT not in source:
            print(f"{fam}: the starter's softmax lines changed; update this script", file=sys.stderr)
            return 1
        times: dict[str, list[float]] = {}
        for rep in range(2):
            for tag, src in (("exact", source), ("folded", source.replace(EXACT, FOLDED))):
                ref, cand, inputs = bf.build(problem, problem.timed_case, src, workdir, f"{fam}_{tag}{rep}")
                with torch.no_grad():
                    times.setdefault(tag, []).append(bf.time_ms(lambda: cand(*inputs), 10, 3))
                    times.setdefault("sdpa", []).append(bf.time_ms(lambda: ref(*inputs), 10, 3))
                del ref, cand, inputs
                torch.cuda.empty_cache()
        print(fam, {k: [round(v, 3) for v in vs] for k, vs in times.items()}, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
