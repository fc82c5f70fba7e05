"""The worker's environment: an allow-list, so no API key, proxy or cloud credential can reach a candidate."""
from __future__ import annotations

import os
import re

_ALLOW = re.compile(
    r"^(PATH|HOME|USER|LOGNAME|LANG|LC_[A-Z]+|TZ|TMPDIR|TERM|SHELL|PYTHONPATH|PYTHONHASHSEED|VIRTUAL_ENV|"
    r"LD_LIBRARY_PATH|CUDA_[A-Z_]+|NVIDIA_[A-Z_]+|TRITON_[A-Z_]+|CC|CXX|CUDA_HOME|"
    r"OMP_NUM_THREADS|MKL_NUM_THREADS|TORCHINDUCTOR_CACHE_DIR|KERNELSEARCH_CACHE|XDG_CACHE_HOME|NCCL_[A-Z_]+|KS_CLOCK_[A-Z_]+)$")
_DENY = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION)", re.I)


def scrubbed_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    src = dict(os.environ if base is None else base)
    env = {k: v for k, v in src.items() if _ALLOW.match(k) and not _DENY.search(k)}
    env.update(extra or {})
    env.setdefault("PYTHONHASHSEED", "0")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env
