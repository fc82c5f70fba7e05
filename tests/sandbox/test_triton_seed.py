"""sandbox/triton_seed.py: what a pool builds once is copied into each runner's fresh Triton cache, a copy per
runner (what one runner does to its cache reaches no other), and a failed build leaves runners to build their own.
The build here writes stand-in files (Triton's CUDA utilities need gcc and libcuda: a GPU machine's)."""
from __future__ import annotations

import time

from kernelsearch.sandbox.triton_seed import TritonSeed

FAKE = ("import os, pathlib; p = pathlib.Path(os.environ['TRITON_CACHE_DIR']) / 'KEY'; p.mkdir(parents=True); "
        "(p / 'cuda_utils.so').write_bytes(b'built'); (p / '__grp__cuda_utils.json').write_text('{}')")


def _wait(seed: TritonSeed) -> None:
    t0 = time.monotonic()
    while seed.ok is None and time.monotonic() - t0 < 30:
        seed.ready()
        time.sleep(0.05)


def test_the_built_files_are_copied_into_each_runners_cache(tmp_path):
    seed = TritonSeed(FAKE)
    try:
        _wait(seed)
        assert seed.ok, seed.error
        a, b = tmp_path / "runner" / ".t", tmp_path / "runner1" / ".t"
        assert seed.copy_into(a) and seed.copy_into(b)
        assert (a / "KEY" / "cuda_utils.so").read_bytes() == b"built"
        (a / "KEY" / "cuda_utils.so").write_bytes(b"changed by its candidate")   # one runner's copy, its own
        assert (b / "KEY" / "cuda_utils.so").read_bytes() == b"built"
        assert (seed.dir / "cache" / "KEY" / "cuda_utils.so").read_bytes() == b"built"
    finally:
        seed.close()
    assert not seed.dir.exists()


def test_a_failed_build_copies_nothing_and_says_why(tmp_path):
    seed = TritonSeed("import sys; print('no gcc here'); sys.exit(3)")
    try:
        _wait(seed)
        assert seed.ok is False
        assert "exit 3" in seed.error and "no gcc here" in seed.error, seed.error
        assert not seed.copy_into(tmp_path / ".t")
        assert not (tmp_path / ".t").exists()
    finally:
        seed.close()


def test_nothing_is_copied_while_it_builds(tmp_path):
    seed = TritonSeed("import time; time.sleep(30)")
    try:
        assert not seed.copy_into(tmp_path / ".t") and seed.ok is None
    finally:
        seed.close()   # kills the build
    assert seed._proc.poll() is not None
