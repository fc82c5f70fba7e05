"""The judge's seed derivation, shared by the stages (harness.py) and the clock (clock.py): every seed the judge
draws is `derive_seed(secret, what, ...)`, a hash, so the stages' inputs are independent of each other and none can
be told from another without the secret (which never leaves the judge's process)."""
from __future__ import annotations

import hashlib


def derive_seed(base: int, *parts) -> int:
    """A 48-bit seed from `base` and the parts naming what it is for (a case, a trial, a batch)."""
    h = hashlib.sha256(repr((base, *parts)).encode()).digest()
    return int.from_bytes(h[:6], "little")
