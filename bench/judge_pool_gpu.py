"""Through the pool on a GPU (issue 18): the softmax starter and chosen fixtures, with the user each candidate's
runner ran as. `python3 bench/judge_pool_gpu.py tests/fixtures/cheats/judge/store_forgery.py ...`"""
import asyncio
import sys
import time

from kernelsearch.families.softmax import STARTER
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings


def main() -> None:
    pool = EvaluatorPool(PoolSettings(mode="cuda", gpus=[0], concurrency=4,
                                      evaluation=EvalSettings(trials=1, timeout_s=200)))
    print("isolates candidates:", pool.isolates_candidates, flush=True)
    items = [("starter", STARTER)] + [(p, open(p).read()) for p in sys.argv[1:]]

    async def go():
        return await asyncio.gather(*(pool.evaluate(src, {"builtin": "softmax"}) for _, src in items))
    t0 = time.monotonic()
    results = asyncio.run(go())
    print(f"{len(items)} evaluations in {time.monotonic() - t0:.1f} s", flush=True)
    for (name, _), r in zip(items, results):
        print(f"{name}: {r.status.value} x{r.speedup} user {r.detail.get('candidate_user')} [{r.stage}] "
              f"{(r.reason or '')[:300]} | {r.detail.get('output', '')[-300:]!r}", flush=True)
    pool.close()


if __name__ == "__main__":
    main()
