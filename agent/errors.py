"""The exception tree of kernelsearch's agent room, documented in one place.

AgentError
├── ProviderError            a provider call failed for good (after retries, or not retryable)
│   ├── AuthError            401/403: bad or missing key; never retried
│   └── BadRequestError      400: the request itself is wrong; never retried
└── ReplyError               the reply broke the contract (no code block, invalid JSON, too few ideas,
                             truncated, refused); recorded as data, the run goes on
"""


class AgentError(Exception):
    pass


class ProviderError(AgentError):
    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class AuthError(ProviderError):
    pass


class BadRequestError(ProviderError):
    pass


class ReplyError(AgentError):
    def __init__(self, message: str, *, kind: str):
        super().__init__(message)
        self.kind = kind  # malformed | truncated | refused | too_few
