"""Softmax (CRFM) search space: softmax's kernels and moves (see softmax/space.py), starting from the cooperative
variant, since a 65536-wide fp32 row (256 KB) is too wide for one program's registers.

At the timed 4096 x 65536 fp32 the floor is 2.1 GB (one read, one write: 0.51 ms at 4.2 TB/s). The online
variant reads each row twice, and on an H200 the second read is not served from L2 even with one persistent
program per SM and eviction hints. `coop` reads each row once: SPLIT programs hold a slice of a row each in
registers and exchange their slice max and sum. The starter is `coop` with 16 warps per part; the online kernel
below is one structural move away. How it was chosen, with the figures: NOTES.md.
"""
import dataclasses

from kernelsearch.families.softmax.space import DEFAULT
from kernelsearch.families.softmax.space import SPACE as _SOFTMAX
from kernelsearch.families.softmax_crfm.spec import CASES

# a 65536-wide fp32 row is 256 KB: packing several whole rows into one program's registers is not a kernel
# (8 rows: 2 MB of registers; the H200 search's branch at ROWS 8 ran past its 60 s timeout compiling), so the
# moves that pack rows are not offered here, nor the pipelined variant (a row and the next in registers: 512 KB)
_MOVES = [m for m in _SOFTMAX.moves if m.changes.get("ROWS", 1) == 1 and m.changes.get("variant") != "pipelined"]
# (the starter is the coop kernel at every shape: softmax's rule for other shapes starts from softmax's variants)
SPACE = dataclasses.replace(_SOFTMAX, moves=_MOVES, cases=CASES, shaped=None,
                            params={**_SOFTMAX.params,
                                    "variant": [v for v in _SOFTMAX.params["variant"] if v != "pipelined"]},
                            default={**DEFAULT, "variant": "coop", "SPLIT": 2, "BLOCK": 16384, "num_warps": 16,
                                     "num_stages": 4, "exp2": True, "persistent": True, "programs_per_sm": 1,
                                     "stats": "chunk", "cache_hints": True})
