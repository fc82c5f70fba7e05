"""Cross-entropy of logits against class targets, mean over the targets not ignored (KernelBench format).

The timed case: bf16 logits of 8192 x 32000 (a Llama-2 vocabulary), int64 targets of which some are -100
(padding), ignored as torch's ignore_index does: they add nothing to the sum and are not counted in the mean.
The loss comes back in the logits' dtype, as torch returns it.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, ignore_index=self.ignore_index, reduction="mean")


ROWS, VOCAB = 8192, 32000


def get_inputs():
    logits = torch.randn(ROWS, VOCAB, dtype=torch.bfloat16) * 2
    targets = torch.randint(0, VOCAB, (ROWS,))
    targets[torch.rand(ROWS) < 0.1] = -100
    return [logits, targets]


def get_init_inputs():
    return [-100]
