"""Triton's CUDA driver stub, built once a pool and copied into every candidate runner's fresh cache.

Each candidate's runner has a Triton cache of its own (`runner/.t`, written by the candidate, so never shared with
another evaluation). Triton's first use in a process loads its CUDA utilities (`cuda_utils`, a C module compiled
with gcc from the driver.c Triton ships, keyed by that source's hash) from the cache, and a fresh cache builds it:
half a second to a second of gcc an evaluation, beside every other evaluation's work. The pool builds it once, in a
process of its own that runs no candidate code, into a folder only the pool writes, and each runner gets a copy of
that folder's files in its fresh cache (a copy: what a candidate does to its own cache reaches no other
evaluation). Best effort: where the build fails (no gcc, no libcuda), runners build it themselves as before.

    seed = TritonSeed()              # starts the build (GPU pools)
    seed.copy_into(cache_dir, uid)   # before the runner starts: the built files, if the build has finished
    seed.close()
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelsearch.sandbox.env import scrubbed_env

BUILD = "from triton.backends.nvidia.driver import CudaUtils; CudaUtils()"


class TritonSeed:
    def __init__(self, code: str = BUILD):
        self.dir = Path(tempfile.mkdtemp(prefix="ks-triton-seed-"))
        self.ok: bool | None = None   # None: building; True: built; False: failed (runners build their own)
        self.error = ""
        try:
            with open(self.dir / "build.log", "wb") as log:
                self._proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True,
                                              env=scrubbed_env({"TRITON_CACHE_DIR": str(self.dir / "cache"),
                                                                "HOME": str(self.dir), "TMPDIR": str(self.dir)}))
        except OSError as err:
            self._proc, self.ok, self.error = None, False, str(err)

    def ready(self) -> bool:
        """Whether the build has finished and left files to copy (never waits)."""
        if self.ok is None and self._proc is not None and self._proc.poll() is not None:
            err = (self.dir / "build.log").read_text(errors="replace")
            self.ok = self._proc.returncode == 0 and any((self.dir / "cache").rglob("*.so"))
            self.error = "" if self.ok else f"exit {self._proc.returncode}: {err[-300:]}"
        return bool(self.ok)

    def copy_into(self, cache_dir: Path, uid: int | None = None) -> bool:
        """The built files under `cache_dir` (a runner's fresh Triton cache), owned by `uid` where given, as files
        the runner made itself would be. False (nothing copied) while building or where the build failed."""
        if not self.ready():
            return False
        shutil.copytree(self.dir / "cache", cache_dir, dirs_exist_ok=True)
        if uid is not None:
            for root, dirs, files in os.walk(cache_dir):
                for name in [*dirs, *files]:
                    os.chown(os.path.join(root, name), uid, uid)
            os.chown(cache_dir, uid, uid)
        return True

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
