"""Evaluation statuses, the one list: failures are data (docs/design.md section 4). In the lowest room, so the store,
the views and the controller name statuses by this enum, and the judge (judge/status.py) produces them."""
from enum import Enum


class Status(str, Enum):
    ok = "ok"
    compile_error = "compile_error"
    incorrect = "incorrect"
    timeout = "timeout"
    crash = "crash"
    rejected = "rejected"   # anti-cheat
    harness_error = "harness_error"   # the judge failed in its own work (out of memory): not the candidate's
    # compiled where no GPU is (CUDA C++ for sm_90a, judge/cuda_check.py), and not run: correctness and timing need
    # a GPU. Not the kernel's failure, and never taken as a pass
    unverified = "unverified"
