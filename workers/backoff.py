"""The retry policy as pure functions: exponential backoff with jitter, honouring Retry-After."""

from __future__ import annotations

import random

from shared.errors import UpstreamUnavailable


def compute_backoff(
    attempts: int,
    *,
    retry_after: float | None = None,
    base: float = 1.0,
    cap: float = 300.0,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before attempt `attempts + 1`.

    Full jitter on an exponential ceiling spreads many workers' retries apart; a provider's
    Retry-After is a floor, never shortened.
    """
    ceiling = min(cap, base * (2 ** max(0, attempts)))
    delay = (rng or random).uniform(ceiling / 2, ceiling)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return min(max(delay, 0.0), max(cap, retry_after or 0.0))


def retry_delay(attempts: int, error: BaseException) -> float:
    """The wait before a conversation given back after `error` is flushed again: backoff on
    its failed attempts so far, never shorter than an upstream's Retry-After."""
    retry_after = error.retry_after if isinstance(error, UpstreamUnavailable) else None
    return compute_backoff(attempts, retry_after=retry_after)
