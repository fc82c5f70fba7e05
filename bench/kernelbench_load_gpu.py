"""Every KernelBench problem of a folder evaluated once at its own size, on one GPU (issue 19): does the judge load it,
plan its memory and judge a kernel without running out of memory?

    . bench/device_env.sh
    python3 bench/kernelbench_load_gpu.py kb/level1 --concurrency 6 --deadline 500

For each file (KernelBench's order) one candidate is evaluated through the pool, all stages, at every case of the
problem (the derived smaller ones, then the problem's own):
- `offline`: the offline provider's first kernel (the matched space's default point), where the matcher knows the
  reference (generators/match.py);
- `library`: for a reference whose work is one torch convolution module (nn.Conv1d/2d/3d and the transposed ones,
  KernelBench's 34 conv problems): the reference's own class as `ModelNew`, its convolution allowed
  (`evaluation.allow_torch`: the same allowance a config can give), and a Triton kernel of its own that copies the
  convolution's output; an honest kernel in KernelBench's sense (library call plus own kernel), judged by the same
  judge, recorded with the operation it was allowed;
- `none`: no honest kernel here (named in the table, not evaluated).
Printed: per problem the candidate kind, status, reason (first line), the judge's memory plan (reference dtype),
seconds; then the counts by status. What the issue asks: no `harness_error` and no out-of-memory failure.
`--dry-run`: the CPU (interpreter; the interpreter-sized cases only), first --limit files.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

_CONV = {"Conv1d": "conv1d", "Conv2d": "conv2d", "Conv3d": "conv3d", "ConvTranspose1d": "conv_transpose1d",
         "ConvTranspose2d": "conv_transpose2d", "ConvTranspose3d": "conv_transpose3d"}

_COPY = '''import torch
import triton
import triton.language as tl


@triton.jit
def _own_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


'''

_FORWARD = '''

    def forward(self, *inputs):
        y = self._library_forward(*inputs).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        _own_copy[(triton.cdiv(n, 4096),)](y, out, n, BLOCK=4096, num_warps=8)
        return out
'''


def _say(*a) -> None:
    print(*a, flush=True)


def _number(p: Path) -> int:
    m = re.match(r"(\d+)", p.name)
    return int(m.group(1)) if m else 10**9


def library_candidate(source: str) -> tuple[str, list[str]] | None:
    """The reference's own class around its one convolution module, plus a copy kernel; None where the file's Model
    holds anything but one convolution module (or no class Model is found)."""
    mods = set(re.findall(r"nn\.(Conv(?:Transpose)?[123]d)\(", source))
    if len(mods) != 1 or "class Model(" not in source:
        return None
    body = source.split("class Model(", 1)[1]
    if re.search(r"torch\.\w+\(|F\.\w+\(", body.split("def get_inputs", 1)[0]):
        return None   # more torch work in the forward than the convolution
    lib = source.replace("class Model(", "class ModelNew(", 1).replace("super(Model, self)", "super()")
    head, cls = lib.split("class ModelNew(", 1)
    cls = re.sub(r"\ndef get_(init_)?inputs\(.*?(?=\n\S|\Z)", "", cls, flags=re.S)
    cls = re.sub(r"\n[A-Za-z_]\w* = [^\n]*", "", cls)   # the module-level sizes: the judge's, not the candidate's
    cls = re.sub(r"\n#[^\n]*", "", cls)
    if re.search(r"\n\S", cls.split("\n", 1)[1]):
        return None   # something other than the class after it
    cls = cls.replace("    def forward(self", "    def _library_forward(self", 1)
    return _COPY + head + "class ModelNew(" + cls.rstrip("\n") + _FORWARD, [_CONV[next(iter(mods))]]


def candidate_for(path: Path) -> tuple[str, str | None, list[str], str]:
    """(kind, source or None, allowed torch ops, what) for one problem file."""
    from kernelsearch.generators.match import Unmatched, match_problem
    from kernelsearch.judge.problem import describe_exception, load_file

    try:
        m = match_problem(load_file(path))
        return "offline", m.space.render(m.space.default), [], m.summary
    except Unmatched:
        pass
    except Exception as err:   # noqa: BLE001 - a file that does not load is a row of the table
        return "none", None, [], f"does not load: {describe_exception(err)}"
    lib = library_candidate(path.read_text())
    if lib is not None:
        return "library", lib[0], lib[1], f"the reference's {lib[1][0]} + an own copy kernel"
    return "none", None, [], "no kernel family matches and its work is not one convolution module"


async def _evaluate_all(items, mode: str, conc: int, deadline: float, timeout: float):
    from kernelsearch.judge.settings import EvalSettings
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

    pools: dict[tuple, EvaluatorPool] = {}
    sem = asyncio.Semaphore(conc)
    rows: dict[Path, dict] = {}

    def pool_for(allow: list[str]) -> EvaluatorPool:
        key = tuple(allow)
        if key not in pools:
            pools[key] = EvaluatorPool(PoolSettings(mode=mode, gpus=[0], concurrency=conc, evaluation=EvalSettings(
                timeout_s=timeout, allow_torch=allow, compare_compile=False)))
        return pools[key]

    async def one(path, kind, source, allow, what):
        async with sem:
            if time.monotonic() > deadline:
                rows[path] = {"status": "not run (deadline)", "reason": "", "plan": "", "s": 0.0}
                return
            t0 = time.monotonic()
            try:
                r = json.loads((await pool_for(allow).evaluate(source, {"file": str(path.resolve())})).to_json())
            except Exception as err:   # noqa: BLE001 - the pool's own failure is a row too
                r = {"status": "pool error", "reason": f"{type(err).__name__}: {err}"}
            cases = ((r.get("detail") or {}).get("memory_plan") or {}).get("cases") or [{}]
            ref = cases[-1].get("reference")   # the last planned case: the problem's own where it was reached
            rows[path] = {"status": r.get("status"), "reason": (r.get("reason") or "").splitlines()[0][:110]
                          if r.get("reason") else "", "plan": ref or "", "s": time.monotonic() - t0,
                          "speedup": r.get("speedup")}
            _say(f"  {path.stem[:44]:<44} {kind:<8} {rows[path]['status']:<14} {rows[path]['s']:5.1f}s "
                 f"{rows[path]['reason'][:70]}")

    try:
        await asyncio.gather(*(one(*it) for it in items))
    finally:
        for p in pools.values():
            p.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--deadline", type=float, default=500.0, help="seconds for the whole script")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds an evaluation")
    ap.add_argument("--limit", type=int, default=0, help="only the first N files (0: all)")
    ap.add_argument("--only", default="", help="comma-separated problem numbers")
    ap.add_argument("--dry-run", action="store_true", help="CPU, interpreter")
    args = ap.parse_args(argv)
    t_start = time.monotonic()
    if args.dry_run:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    files = sorted(args.folder.glob("*.py"), key=lambda p: (_number(p), p.name))
    if args.only:
        keep = {int(x) for x in args.only.split(",")}
        files = [f for f in files if _number(f) in keep]
    if args.limit:
        files = files[:args.limit]
    items, skipped = [], {}
    for f in files:
        kind, src, allow, what = candidate_for(f)
        if src is None:
            skipped[f] = what
        else:
            items.append((f, kind, src, allow, what))
    _say(f"{args.folder}: {len(files)} files; offline {sum(1 for i in items if i[1] == 'offline')}, library "
         f"{sum(1 for i in items if i[1] == 'library')}, no honest kernel here {len(skipped)} "
         f"[{time.monotonic() - t_start:.0f} s]")
    deadline = t_start + args.deadline - 20
    rows = asyncio.run(_evaluate_all(items, "cpu" if args.dry_run else "cuda", args.concurrency, deadline,
                                     args.timeout))
    _say(f"\n{'problem':<46} {'candidate':<9} {'status':<18} {'ref':<8} {'s':>6} {'speedup':>8}  reason")
    counts: dict[str, int] = {}
    for f in files:
        if f in skipped:
            _say(f"{f.stem[:46]:<46} {'none':<9} {'-':<18} {'':<8} {'':>6} {'':>8}  {skipped[f][:90]}")
            continue
        kind = next(i[1] for i in items if i[0] == f)
        r = rows.get(f, {"status": "not run", "reason": "", "plan": "", "s": 0.0})
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        sp = f"{r['speedup']:.3g}x" if r.get("speedup") else "-"
        _say(f"{f.stem[:46]:<46} {kind:<9} {str(r['status'])[:18]:<18} {str(r['plan'])[:8]:<8} {r['s']:6.1f} "
             f"{sp:>8}  {r['reason'][:90]}")
    oom = [f.stem for f in files if f in rows and "out of memory" in (rows[f]["reason"] or "").lower()]
    _say(f"\nby status: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; not evaluated (no honest kernel "
         f"here) {len(skipped)}; out of memory in a reason: {len(oom)} {oom[:10]}")
    _say(f"wall time of the script: {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
