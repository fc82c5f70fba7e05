"""CUDA C++ extensions built by the judge, once per content, and imported by the candidate's runner (GPU machines).

A candidate builds its extensions with load_inline at import: in its own runner, at every evaluation, under a HOME of
its own, so one extension was compiled again for every branch that changed only Python (tens of seconds each). Here
the judge builds each extension it can read from the file's text (judge/inline_ext.py: the main.cpp and cuda.cu
load_inline writes), with torch's own build (its ninja file and flags), into a folder named by the hash of what is
built, in a cache the workers share. Before the candidate loads, its runner wraps load_inline (`use_builds`): a call
whose arguments make an extension of a built hash imports that build; any other call builds as before.

Trust: the judge builds (ninja, nvcc and the host compiler run; no candidate code does) and owns the cache; the
candidate only reads it. The cache is used only where the candidate runs as a user of its own, who cannot write there
(a candidate of the judge's user could replace a build another candidate then imports), and only in a folder this
user owns that no one else may write. An extension whose options reach the compiler or the linker beyond the kept
code-generation flags (extra_cflags, extra_ldflags, include paths) is not built here. A failed build is no verdict:
the candidate's own load_inline then builds, and fails, as it would have.
"""
from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import torch

from kernelsearch.judge.inline_ext import KEPT_FLAGS, Extension, Unreadable, extensions, from_args

VERSION = 1


def cache_root() -> Path:
    """The builds' folder: $KERNELSEARCH_CACHE/cuda-builds, else /tmp/kernelsearch-<uid>/cuda-builds (outside a home
    the candidates' users cannot enter)."""
    base = os.environ.get("KERNELSEARCH_CACHE") or f"/tmp/kernelsearch-{os.getuid()}"
    return Path(base) / "cuda-builds"


def _safe(folder: Path) -> str | None:
    """Why `folder` cannot hold builds a candidate imports (another user owns it, or others may write it), or None."""
    st = folder.stat()
    if st.st_uid != os.getuid():
        return f"{folder} belongs to uid {st.st_uid}, not this judge's {os.getuid()}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{folder} is writable by others ({oct(st.st_mode & 0o777)})"
    return None


def _arch() -> str:
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return "list " + os.environ["TORCH_CUDA_ARCH_LIST"]
    if torch.cuda.is_available():
        return "sm %d.%d" % torch.cuda.get_device_capability()
    return "none"


def key(ext: Extension) -> str:
    """What a build is: the extension's two files and options, torch's and CUDA's versions, the target."""
    blob = json.dumps({"v": VERSION, "name": ext.name, "cpp": ext.cpp, "cuda": ext.cuda, "options": ext.options,
                       "torch": torch.__version__, "cuda_version": torch.version.cuda, "arch": _arch()},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def buildable(ext: Extension) -> str | None:
    """Why the judge does not build `ext` ahead, or None."""
    if ext.options == "unreadable":
        return "its build options are not literals"
    opts = json.loads(ext.options)
    if any(opts.get(k) for k in ("extra_cflags", "extra_ldflags", "extra_include_paths")):
        return "it gives the compiler or the linker options of its own"
    if opts.get("is_python_module") is False:
        return "it is not a Python module"
    flags = opts.get("extra_cuda_cflags") or []
    if isinstance(flags, str) or any(not KEPT_FLAGS.match(str(f).strip()) for f in flags):
        return "an extra_cuda_cflags flag beyond code generation"
    return None


def _build(ext: Extension, tmp: Path) -> None:
    from torch.utils import cpp_extension as ce

    sources = [tmp / "main.cpp"]
    sources[0].write_text(ext.cpp)
    if ext.cuda is not None:
        sources.append(tmp / "cuda.cu")
        sources[1].write_text(ext.cuda)
    args = {"name": ext.name, "sources": [str(s) for s in sources], "extra_cflags": [],
            "extra_cuda_cflags": list(json.loads(ext.options).get("extra_cuda_cflags") or []), "extra_sycl_cflags": [],
            "extra_ldflags": [], "extra_include_paths": [], "build_directory": str(tmp), "verbose": False,
            "with_cuda": ext.cuda is not None, "with_sycl": False, "is_standalone": False}
    params = inspect.signature(ce._write_ninja_file_and_build_library).parameters
    ce._write_ninja_file_and_build_library(**{k: v for k, v in args.items() if k in params})


def build(ext: Extension, root: Path) -> dict:
    """One extension built into root/<key>/ (or found there), under the key's lock: a second worker waits and finds
    the first one's build."""
    k = key(ext)
    out = {"name": ext.name, "key": k[:16]}
    why = buildable(ext)
    if why:
        return {**out, "status": "skipped", "why": why}
    folder = root / k
    with open(root / f"{k}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / f"{ext.name}.so").is_file():
            return {**out, "status": "ok", "cached": True}
        t0 = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f".{k}-", dir=root))
        try:
            _build(ext, tmp)
            for p in [tmp, *tmp.rglob("*")]:
                p.chmod(0o755 if p.is_dir() else 0o644)
            shutil.rmtree(folder, ignore_errors=True)   # a build left half-made by a killed judge
            tmp.rename(folder)
        except Exception as err:  # noqa: BLE001 - no verdict: the candidate's own load_inline builds
            shutil.rmtree(tmp, ignore_errors=True)
            return {**out, "status": "error", "error": f"{type(err).__name__}: {str(err)[-1500:]}",
                    "build_s": round(time.monotonic() - t0, 3)}
    return {**out, "status": "ok", "cached": False, "build_s": round(time.monotonic() - t0, 3)}


def build_ahead(source: str, detail: dict, shared: bool) -> str | None:
    """The judge's builds of the candidate's extensions (`detail["cuda_build"]`); the folder its runner imports them
    from, or None where it builds its own (`shared` False: it runs as the judge's user)."""
    t0 = time.monotonic()
    report: dict = {"extensions": []}
    detail["cuda_build"] = report
    if not shared:
        report["skipped"] = "the candidate runs as the judge's user: it builds its own extensions"
        return None
    root = cache_root()
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o755)
        unsafe = _safe(root) or _safe(root.parent)
        exts = extensions(source)
    except (OSError, Unreadable, SyntaxError) as err:
        report["skipped"] = f"{type(err).__name__}: {err}"
        return None
    if unsafe:
        report["skipped"] = unsafe
        return None
    for ext in exts:
        report["extensions"].append(build(ext, root))
    report["wall_s"] = round(time.monotonic() - t0, 3)
    return str(root)


def use_builds(root: str) -> None:
    """In the candidate's runner, before its code loads: load_inline imports the judge's build of an extension its
    arguments make, where there is one; otherwise it builds as torch's does."""
    from torch.utils import cpp_extension as ce

    original = ce.load_inline
    signature = inspect.signature(original)

    def load_inline(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
            ext = from_args(dict(bound.arguments))
            folder = Path(root) / key(ext)
            if buildable(ext) is None and (folder / f"{ext.name}.so").is_file():
                return ce._import_module_from_library(ext.name, str(folder), True)
        except Exception:  # noqa: BLE001, S110 - any doubt: torch's own build, as without the cache
            pass
        return original(*args, **kwargs)

    load_inline.__wrapped__ = original
    ce.load_inline = load_inline
