"""Test setup. TRITON_INTERPRET must be set before any @triton.jit runs, so it is set here, at the top."""
import os
import sys

if "TRITON_INTERPRET" not in os.environ:
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        has_gpu = False
    if not has_gpu:
        os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; this machine has none (CPU machines run the interpreter)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
