"""A re-timing group's one evaluation split into its candidates' results (sandbox/pool.py `retime_group`)."""
from __future__ import annotations

import json

from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.status import Status


def split_group(joint: EvalResult | None, size: int) -> list[EvalResult | None]:
    """One result per candidate from the group's evaluation: each its judge's result (judge/group.py) with the
    evaluation's device, wall time and lease wait. None for every candidate where the evaluation did not start;
    a harness_error naming the group for every one where it ended without the group's results (the judge died or
    timed out: the pool then re-times each alone)."""
    if joint is None:
        return [None] * size
    group = joint.detail.get("group")
    if not isinstance(group, list) or len(group) != size:
        why = f"re-timing group of {size}: {joint.status.value}: {joint.reason}; each is re-timed alone"
        return [EvalResult.failure(Status.harness_error, why, stage=joint.stage or "worker")
                for _ in range(size)]
    out = []
    for entry in group:
        r = EvalResult.from_json(json.dumps(entry))
        r.gpu_index, r.wall_s = joint.gpu_index, joint.wall_s
        r.detail["lease_wait_s"] = joint.detail.get("lease_wait_s")
        r.detail["output"] = joint.detail.get("output")
        out.append(r)
    return out
