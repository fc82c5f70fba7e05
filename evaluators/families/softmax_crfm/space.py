"""Softmax (CRFM) search space: softmax's kernels and moves (see softmax/space.py), starting from the online
variant with wide chunks, since a 65536-wide fp32 row is 256 KB.

At the timed 4096 x 65536 fp32 the floor is 2.1 GB (one read, one write: 0.51 ms at 4.2 TB/s). The online
variant reads each row twice; with 132 SMs each working on a 256 KB row, the rows in flight (33 MB) fit the
60 MB L2, so the second read is mostly served from L2 and DRAM sees close to the floor.
"""
import dataclasses

from kernelsearch.evaluators.families.softmax.space import DEFAULT
from kernelsearch.evaluators.families.softmax.space import SPACE as _SOFTMAX

# measured on an H200 (fp32 4096 x 65536, bench --sweep): online 2 stages 0.815 ms, 4 stages with exp2 0.768;
# the whole row in registers (32 warps) 0.832; eager 1.05
SPACE = dataclasses.replace(_SOFTMAX, default={**DEFAULT, "variant": "online", "BLOCK": 4096, "num_warps": 8,
                                               "num_stages": 4, "exp2": True})
