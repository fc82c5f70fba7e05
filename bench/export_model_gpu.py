"""`kernelsearch export --model` checked where it is meant to run: a finished model run's export, loaded through
Hugging Face `kernels`, patched into a fresh instance of the model, gives the original's output at the model's
tolerance, calls the exported kernels, and runs at the speed the run's verify step measured.

    . bench/device_env.sh && python3 bench/model_gpu.py --db /tmp/m.db --name mg && \
        python3 bench/export_model_gpu.py --db /tmp/m.db --run mg                  # a GPU machine
    .venv/bin/python bench/export_model_gpu.py --db DB --run NAME                  # CPU: a model run made there

1. `export_model` (the code of `kernelsearch export --model`) writes the run's export into a temporary directory;
2. `kernels.get_local_kernel` loads it: on a CUDA machine the repository, as a user would (kernels picks the
   variant and checks its digest and arch); elsewhere its `build/torch-cuda` variant, named directly;
3. two instances of the model with the profile's weights (seed 0), one patched with `patch(model)`; fresh inputs;
   the outputs compared by relative L2 error at verify's tolerance for the output dtype, and each exported
   ModelNew's calls counted during one forward;
4. eager and patched timed call by call, alternating (CUDA events on a GPU, the host clock on the CPU), medians;
   their ratio set beside verify's end-to-end speedup.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _clock(device: str):
    """One call timed, in ms: CUDA events on a GPU, the host clock on the CPU."""
    if device == "cuda":
        from kernelsearch.judge.roofline import events_ms

        # no warm-up, no synchronize before the call: the caller warms both sides up, then alternates them
        return lambda fn: events_ms(fn, reps=1, warmup=0)

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    return timed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--run", required=True, help="a finished model run")
    ap.add_argument("--iters", type=int, default=20, help="timed forwards per side")
    ap.add_argument("--seed", type=int, default=1234, help="the fresh inputs' seed")
    args = ap.parse_args(argv)

    import torch

    from kernelsearch.export.model_layout import export_model
    from kernelsearch.model.profile import first_tensor, load_model, model_inputs
    from kernelsearch.model.verify import rel_error

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = Path(tempfile.mkdtemp(prefix="ks-export-model-")) / "export"
    done = export_model(Path(args.db), args.run, out)
    meta_path = out / "build" / "torch-cuda" / "metadata.json"
    meta = json.loads(meta_path.read_text())["kernelsearch"]
    verify = meta["model_speedup"]
    print(f"exported {len(done['kernels'])} kernel(s) of {args.run} to {out}: "
          + ", ".join(k["function"] for k in done["kernels"]))
    for x in done["left_out"]:
        print(f"  left out {x['key']}: {x['status']}: {x['reason']}")

    from kernels import get_local_kernel

    k = get_local_kernel(out if device == "cuda" else out / "build" / "torch-cuda")
    model_file = meta["model"]
    ref_model, module = load_model(model_file, device, 0)
    patched, _ = load_model(model_file, device, 0)
    inputs = model_inputs(module, device, args.seed)
    calls: dict[str, int] = {}
    originals = {}
    for key, mod in k._MODULES.items():
        originals[key] = mod.ModelNew.forward

        def counted(self, *a, _f=originals[key], _key=key, **kw):
            calls[_key] = calls.get(_key, 0) + 1
            return _f(self, *a, **kw)
        mod.ModelNew.forward = counted
    handle = k.patch(patched)
    with torch.no_grad():
        ref = first_tensor(ref_model(*inputs))
        got = first_tensor(patched(*inputs))
    for key, mod in k._MODULES.items():
        mod.ModelNew.forward = originals[key]
    tol = verify["tolerance"]
    err = rel_error(got, ref)
    print(f"device {torch.cuda.get_device_name() if device == 'cuda' else 'cpu (Triton interpreter)'}; "
          f"output rel. L2 error {err:.3g} (tolerance {tol}): {'ok' if err <= tol else 'FAILS'}")
    print("exported kernels called in one forward: " + ", ".join(f"{key} x{calls.get(key, 0)}" for key in k._MODULES))

    timed = _clock(device)
    eager, kern = [], []
    with torch.no_grad():
        for _ in range(3):   # warm-up (Triton compiles at the first launch)
            ref_model(*inputs)
            patched(*inputs)
        for i in range(args.iters):
            sides = [(eager, lambda: ref_model(*inputs)), (kern, lambda: patched(*inputs))]
            for times, fn in (sides if i % 2 == 0 else sides[::-1]):
                times.append(timed(fn))
    e, p = statistics.median(eager), statistics.median(kern)
    print(f"eager {e:.3f} ms | patched from the export {p:.3f} ms = {e / p:.3f}x over eager | verify measured "
          f"{(verify.get('speedup') or float('nan')):.3f}x (eager {verify.get('eager_ms') or float('nan'):.3f} ms, "
          f"with kernels {verify.get('kernels_ms') or float('nan'):.3f} ms)"
          + (" [CPU interpreter: not GPU timings]" if device == "cpu" else ""))
    handle.remove()
    return 0 if err <= tol and all(calls.get(key) for key in k._MODULES) else 1


if __name__ == "__main__":
    sys.exit(main())
