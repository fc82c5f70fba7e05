"""The one retry layer of the network providers (tenacity), and their rate limit (asyncio-throttle).

The vendor SDK clients are built with `max_retries=0`, so every HTTP attempt passes through here once:
- `TransientError` (429, 408/409, 5xx, a timeout, a dropped connection) is retried with exponential backoff
  and jitter, or after the server's Retry-After when it sent one; every wait is capped at `cap_s`; at most
  `max_retries` retries. When they run out, a `ProviderError` carrying the number of attempts is raised.
- Any other `ProviderError` (AuthError, BadRequestError) is raised at once, with `attempts` set.

`Limiter` bounds a provider's calls: a sliding-window Throttler for requests per minute (each HTTP attempt
counts, retries included) and a semaphore for calls in flight (held for a whole call, its backoff included,
so a struggling API is not handed more work).
"""
from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from asyncio_throttle import Throttler
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from kernelsearch.agent.errors import ProviderError

log = logging.getLogger(__name__)
T = TypeVar("T")


class TransientError(ProviderError):
    """One attempt failed in a way that a later attempt may not (raised by a provider, caught here)."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message, status=status)
        self.retry_after = retry_after


class _Wait:
    """Retry-After when the server sent one, else exponential backoff with jitter; both capped."""

    def __init__(self, cap_s: float, base_s: float):
        self.cap_s = cap_s
        self._backoff = wait_exponential_jitter(multiplier=base_s, max=cap_s, jitter=base_s)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = getattr(exc, "retry_after", None)
        if after is not None:
            return min(max(after, 0.0), self.cap_s)
        return min(self._backoff(state), self.cap_s)


async def with_retries(attempt: Callable[[], Awaitable[T]], *, max_retries: int, cap_s: float,
                       base_s: float = 1.0, what: str = "call",
                       before_attempt: Callable[[], Awaitable[None]] | None = None) -> tuple[T, int]:
    """Run `attempt` until it succeeds; return (its result, the number of attempts made).

    `before_attempt` runs before every attempt (the rate limiter). `what` names the call in log lines and
    in the final error; it must not hold a secret.
    """
    attempts = 0

    async def one() -> T:
        nonlocal attempts
        if before_attempt is not None:
            await before_attempt()
        attempts += 1
        return await attempt()

    def log_retry(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning("%s: attempt %d failed (%s); retrying in %.2f s", what, state.attempt_number, exc, wait)

    retrying = AsyncRetrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_after_attempt(max_retries + 1),
        wait=_Wait(cap_s, base_s),
        before_sleep=log_retry,
        reraise=True,
        sleep=asyncio.sleep,
    )
    try:
        result = await retrying(one)
    except TransientError as exc:
        raise ProviderError(f"{what}: gave up after {attempts} attempts: {exc}", status=exc.status,
                            attempts=attempts) from None
    except ProviderError as exc:
        exc.attempts = attempts
        raise
    return result, attempts


class Limiter:
    """Requests per minute (None: unlimited) and calls in flight, for one provider instance.

    The rate is enforced over a sliding window of `window_s` (a burst of up to rate * window_s / 60 requests
    is let through at once); a shorter window spreads the requests more evenly.

    The semaphore is made per event loop (an asyncio primitive belongs to the loop it first waited in), so a
    provider may be used from one `asyncio.run` and then another.
    """

    def __init__(self, requests_per_minute: float | None, max_in_flight: int, *, window_s: float = 60.0):
        self.max_in_flight = max_in_flight
        self.throttler: Throttler | None = None
        if requests_per_minute is not None:
            # Throttler admits whole requests per sliding window (a burst of up to n, then n per window).
            # Keep the rate exact for fractional values: 0.5/min -> 1 per 120 s, 90.5/min -> 90 per 59.67 s.
            n = max(1, math.floor(requests_per_minute * window_s / 60.0))
            self.throttler = Throttler(rate_limit=n, period=60.0 * n / requests_per_minute)
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def in_flight(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._loop is not loop:
            self._sem, self._loop = asyncio.Semaphore(self.max_in_flight), loop
        return self._sem

    async def before_request(self) -> None:
        if self.throttler is not None:
            await self.throttler.acquire()
