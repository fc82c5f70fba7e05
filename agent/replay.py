"""The replay provider: answers from a recorded file, for tests and for re-running a recorded session.

The file is JSON Lines, one reply per line: {"role": "ideas" | "code", "text": "...", "model": "...",
"tokens_in": 0, "tokens_out": 0, "finish_reason": "stop"}. Replies are given out in order, per role; when a
role's replies run out the call fails with a ProviderError (recorded; the run goes on). A record holds the reply
only: the request's typed task (agent/base.py) is neither read nor written, so a file answers whatever asks.
"""
from __future__ import annotations

import json
from collections import defaultdict, deque
from pathlib import Path

from kernelsearch.agent.base import ChatReply, ChatRequest
from kernelsearch.agent.errors import ProviderError


class ReplayProvider:
    name = "replay"

    def __init__(self, path: str | Path):
        p = Path(path)
        if not p.is_file():
            raise ProviderError(f"replay file not found: {p}")
        self._queues: dict[str, deque] = defaultdict(deque)
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                self._queues[rec["role"]].append(rec)
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ProviderError(f"{p}:{i}: not a replay record ({err})") from None

    async def complete(self, request: ChatRequest) -> ChatReply:
        q = self._queues[request.role]
        if not q:
            raise ProviderError(f"replay file has no more {request.role!r} replies")
        rec = q.popleft()
        return ChatReply(text=rec["text"], model=rec.get("model", "replay"), tokens_in=int(rec.get("tokens_in", 0)),
                         tokens_out=int(rec.get("tokens_out", 0)), finish_reason=rec.get("finish_reason", "stop"))
