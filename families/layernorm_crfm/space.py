"""LayerNorm (CRFM) search space: layernorm's kernels behind the KernelBench interface (ModelNew(normalized_shape)
with ln.weight and ln.bias), starting from the split variant, since 16 rows of 4M elements need many programs
per row; the `single` variant (a row in registers) cannot hold a 4M-element row and is left out. See
layernorm/space.py for the variants and their bytes.

At the timed (16, 64, 256, 256) fp32 the split kernels move 3 x 268 MB of x and y plus 33 MB of weight and
bias (0.2 ms at 4.2 TB/s): the statistics pass reads x, the apply pass reads it again and writes y. The
starter's figures, and the `coop` variant's (timed slower): NOTES.md.
"""
from kernelsearch.families.layernorm.space import DEFAULT, make_space
from kernelsearch.families.layernorm_crfm.spec import CASES

SPACE = make_space("crfm", {**DEFAULT, "variant": "split", "BLOCK": 2048, "num_warps": 8, "num_stages": 2,
                            "SPLIT_CHUNK": 16384, "APPLY_ROWS": 16},
                   variants=["split", "coop", "welford", "two_pass"], cases=CASES)
