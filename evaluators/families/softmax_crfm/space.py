"""Softmax (CRFM) search space: softmax's kernels and moves (see softmax/space.py), starting from the cooperative
variant, since a 65536-wide fp32 row (256 KB) is too wide for one program's registers.

At the timed 4096 x 65536 fp32 the floor is 2.1 GB (one read, one write: 0.51 ms at 4.2 TB/s). The online
variant reads each row twice. Measured on an H200, the second read is not served from L2 even with one
persistent program per SM (33 MB of rows in flight) and eviction hints: 0.73-0.77 ms, the time of three passes
over DRAM. `coop` reads each row once: SPLIT programs hold a quarter (say) of a row each in registers and
exchange their slice max and sum: 0.556-0.560 ms on an H200 (SPLIT 2 and 4 are one kernel at this width: a
part holds at most 16384 columns), 1.89x eager. The starter is `coop` with 16 warps per part (32 warps: 0.795,
one 1024-thread part per SM); the online kernel below is one structural move away.
"""
import dataclasses

from kernelsearch.evaluators.families.softmax.space import DEFAULT
from kernelsearch.evaluators.families.softmax.space import SPACE as _SOFTMAX

# measured on an H200 (fp32 4096 x 65536, bench --sweep): online 2 stages 0.815 ms, 4 stages with exp2 0.768;
# the whole row in registers (32 warps) 0.832; eager 1.05. 2026-12-03: one persistent program of 32 warps per
# SM, 16384-wide chunks, one exp per element, L2 hints 0.730; online 4096/8 warps 0.769; `coop` SPLIT 2 with 16
# warps (this, with the online knobs kept for the move back) 0.556
# a 65536-wide fp32 row is 256 KB: packing several whole rows into one program's registers is not a kernel
# (8 rows: 2 MB of registers; the H200 search's branch at ROWS 8 ran past its 60 s timeout compiling), so the
# moves that pack rows are not offered here, nor the pipelined variant (a row and the next in registers: 512 KB)
_MOVES = [m for m in _SOFTMAX.moves if m.changes.get("ROWS", 1) == 1 and m.changes.get("variant") != "pipelined"]
SPACE = dataclasses.replace(_SOFTMAX, moves=_MOVES,
                            params={**_SOFTMAX.params,
                                    "variant": [v for v in _SOFTMAX.params["variant"] if v != "pipelined"]},
                            default={**DEFAULT, "variant": "coop", "SPLIT": 2, "BLOCK": 16384, "num_warps": 16,
                                     "num_stages": 4, "exp2": True, "persistent": True, "programs_per_sm": 1,
                                     "stats": "chunk", "cache_hints": True})
