"""The harness's stability inputs on one family's kernels, with the numbers behind each verdict (GPU or CPU).

    python bench/stability_probe.py flash_attention                       # the starter
    python bench/stability_probe.py flash_attention '[{"BLOCK_M": 64}]'   # points of the search space

For each stability input (harness.stability_inputs) on the case the harness checks (the last case of the mode):
the candidate's and eager's verdict at the stability tolerance, their normwise errors against float64, and the
count of elements past the tolerance. The harness passes a candidate that misses the tolerance only where eager
misses it too and the candidate's normwise error is within EAGER_SLACK x eager's.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")   # before any kernel is defined

from kernelsearch.families import load_problem  # noqa: E402
from kernelsearch.judge.correctness import compare  # noqa: E402
from kernelsearch.judge.numerics import EAGER_SLACK, normwise_error, references, stability_inputs  # noqa: E402
from kernelsearch.judge.problem import load_source_module  # noqa: E402


def _off(got, want_hi, atol, rtol) -> int:
    g, h = got.double(), want_hi.to(got.device).double()
    return int((~((g - h).abs() <= atol + rtol * h.abs())).sum())


def main() -> None:
    fam = sys.argv[1]
    points = json.loads(sys.argv[2]) if len(sys.argv) > 2 else [{}]
    prob = load_problem({"builtin": fam})
    device = "cuda" if torch.cuda.is_available() else "cpu"
    case = prob.cases_for("gpu" if device == "cuda" else "cpu")[-1]
    atol, rtol = prob.stability_tolerance(case)
    space = prob.family.SPACE
    init = prob.build_init_inputs(case)
    ref = prob.module.Model(*init).to(device)
    cands = []
    for i, pt in enumerate(points):
        src = space.render({**space.default, **pt})
        path = f"{tempfile.mkdtemp()}/probe_{i}.py"
        with open(path, "w") as f:
            f.write(src)   # Triton reads a kernel's source from its file
        mod = load_source_module(src, f"probe_{i}", path)
        m = mod.ModelNew(*init).to(device)
        m.load_state_dict(ref.state_dict())
        cands.append((json.dumps(pt), m))
    print(f"{fam} on {case.describe()}: stability tolerance atol {atol:g} rtol {rtol:g}, slack {EAGER_SLACK:g}")
    for name in prob.stability:
        inputs = stability_inputs(name, prob.build_inputs(case, 7, device), case.dtype, 7)
        with torch.no_grad():
            want, want_hi = references(ref, inputs, torch.float64)
            e_ok = compare(want, want, want_hi, atol, rtol).ok
            e_err = normwise_error(want, want_hi)
            print(f"  {name:<6} eager    ok={e_ok!s:<5} normwise {e_err:.3g}  off {_off(want, want_hi, atol, rtol)}")
            for label, m in cands:
                got = m(*[t.clone() for t in inputs])
                c = compare(got, want, want_hi, atol, rtol)
                err = normwise_error(got, want_hi)
                print(f"  {name:<6} {label:<8} ok={c.ok!s:<5} normwise {err:.3g} ({err / max(e_err, 1e-300):.2f}x "
                      f"eager)  off {_off(got, want_hi, atol, rtol)}  max_abs {c.max_abs}")
            del want, want_hi


if __name__ == "__main__":
    main()
