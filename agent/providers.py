"""The provider factory: one line of config picks the provider."""
from __future__ import annotations

from kernelsearch.agent.base import Provider
from kernelsearch.agent.offline import OfflineProvider
from kernelsearch.agent.replay import ReplayProvider
from kernelsearch.agent.settings import LLMConfig


def make_provider(cfg: LLMConfig, *, seed: int = 0) -> Provider:
    if cfg.provider == "offline":
        return OfflineProvider(seed=seed)
    if cfg.provider == "replay":
        return ReplayProvider(cfg.replay_file)
    import random

    from kernelsearch.agent.network import make_network_provider

    return make_network_provider(cfg, rng=random.Random(seed))
