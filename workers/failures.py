"""What a flush does with a conversation that failed: a pure table from exception to action.

A flush writes many conversations together; whatever goes wrong with one of them is judged
here and applied to that conversation alone, so it never holds back the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import redis
from celery.exceptions import SoftTimeLimitExceeded
from qdrant_client.http.exceptions import UnexpectedResponse

from shared.errors import (
    CollectionMissing,
    DimensionMismatch,
    InputRejected,
    InvalidAgentName,
    InvalidInput,
    ModelMismatch,
    StoreRefused,
    UnknownAgent,
    UpstreamUnavailable,
)
from workers.backoff import compute_backoff

# An exception nobody foresaw may be passing (a bug meeting rare data, a flaky library):
# it is retried with backoff, and quarantined on its third failure in a row.
UNKNOWN_FAILURES_ALLOWED = 3
UNKNOWN_RETRY_BASE_SECONDS = 2.0
# Statuses with which Qdrant refuses a request for what it holds (a name, a point, a size),
# so sending the same request again is refused again.
QDRANT_REFUSALS = frozenset({400, 413, 422})
# Statuses with which Qdrant refuses the API key: a setting, retried with backoff like the
# embedding provider's 401/403, never the data's fault.
QDRANT_KEY_REFUSALS = frozenset({401, 403})


class Action(Enum):
    RETRY = "retry"  # something upstream is down: back off, as every flush always did
    HOLD = "hold"  # the collection or the agents file must change first; checked again later
    QUARANTINE = "quarantine"  # the data itself cannot be written: set aside at once
    COUNT = "count"  # unforeseen: retry with backoff, quarantine at the third in a row


@dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    reason: str


def describe(error: BaseException) -> str:
    """The reason shown to operators: the exception's class and message, one line."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def judge(error: BaseException) -> Verdict:
    """The action for one conversation's failure."""
    return Verdict(_action(error), describe(error))


def _action(error: BaseException) -> Action:
    # Redis unreachable or slow for a moment is an outage like any other, not this data's fault;
    # so is the task running out of time (Celery's soft limit, raised in whatever step runs).
    transient = (UpstreamUnavailable, CollectionMissing, redis.ConnectionError, redis.TimeoutError,
                 SoftTimeLimitExceeded)  # fmt: skip
    if isinstance(error, transient):
        return Action.RETRY
    if isinstance(error, DimensionMismatch | ModelMismatch | UnknownAgent):
        return Action.HOLD
    if isinstance(error, InvalidAgentName | InvalidInput | InputRejected | StoreRefused):
        return Action.QUARANTINE
    if isinstance(error, UnexpectedResponse) and error.status_code in QDRANT_KEY_REFUSALS:
        return Action.RETRY
    if isinstance(error, UnexpectedResponse):
        return Action.QUARANTINE if error.status_code in QDRANT_REFUSALS else Action.COUNT
    # Data that cannot be formatted or encoded (a date beyond year 9999, a broken buffered
    # record, text no encoder takes) fails the same way on every try.
    if isinstance(error, ValueError | OverflowError):
        return Action.QUARANTINE
    return Action.COUNT


def unknown_retry_delay(failures_so_far: int) -> float:
    """Seconds before another try after an unforeseen failure: never a hot loop."""
    return compute_backoff(failures_so_far, base=UNKNOWN_RETRY_BASE_SECONDS)
