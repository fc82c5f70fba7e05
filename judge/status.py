"""Evaluation statuses: failures are data (docs/design.md section 4)."""
from kernelsearch.store.status import Status

__all__ = ["Status", "CandidateFailure", "HarnessFailure"]


class CandidateFailure(Exception):
    """A stage failed: carries the status, a one-line reason and the longer text kept for the next prompt."""

    def __init__(self, status: Status, reason: str, text: str | None = None, stage: str | None = None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.text = text
        self.stage = stage


class HarnessFailure(CandidateFailure):
    """The judge's own work failed (out of memory building inputs, references or clones, or comparing): the result is
    `harness_error`, never charged to the candidate as a crash."""

    def __init__(self, reason: str, text: str | None = None, stage: str | None = None):
        super().__init__(Status.harness_error, reason, text, stage)
