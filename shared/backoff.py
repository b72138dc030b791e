"""Retry policy as a pure function: exponential backoff with jitter, honouring Retry-After."""

from __future__ import annotations

import random


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
