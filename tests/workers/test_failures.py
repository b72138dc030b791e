"""The failure table: what a flush does with one conversation's exception (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest
import redis
from qdrant_client.http.exceptions import UnexpectedResponse

from shared.errors import (
    CollectionMissing,
    DimensionMismatch,
    InputRejected,
    InvalidAgentName,
    ModelMismatch,
    UnknownAgent,
    UpstreamUnavailable,
)
from workers.failures import Action, describe, judge, unknown_retry_delay


def qdrant(status: int) -> UnexpectedResponse:
    return UnexpectedResponse(
        status, "refused", b'{"status":{"error":"Wrong input"}}', httpx.Headers()
    )


def year_56411() -> ValueError:
    try:
        datetime.fromtimestamp(1_718_000_000_000, tz=UTC)
    except ValueError as exc:
        return exc
    raise AssertionError("no error")


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (UpstreamUnavailable("Qdrant cannot be reached"), Action.RETRY),
        (CollectionMissing("gone"), Action.RETRY),
        (redis.ConnectionError("reset"), Action.RETRY),
        (redis.TimeoutError("slow"), Action.RETRY),
        (DimensionMismatch("384 vs 1536"), Action.HOLD),
        (ModelMismatch("other model"), Action.HOLD),
        (UnknownAgent("not in the agents file"), Action.HOLD),
        (InvalidAgentName("1024 characters"), Action.QUARANTINE),
        (InputRejected("too long"), Action.QUARANTINE),
        (year_56411(), Action.QUARANTINE),
        (OverflowError("timestamp out of range for platform time_t"), Action.QUARANTINE),
        (json.JSONDecodeError("Expecting value", "{", 0), Action.QUARANTINE),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), Action.QUARANTINE),
        (qdrant(400), Action.QUARANTINE),
        (qdrant(413), Action.QUARANTINE),
        (qdrant(422), Action.QUARANTINE),
        (qdrant(403), Action.COUNT),
        (KeyError("ts"), Action.COUNT),
        (TypeError("object of type 'float' has no len()"), Action.COUNT),
        (RuntimeError("anything else"), Action.COUNT),
    ],
)
def test_each_failure_has_its_action(error: Exception, action: Action) -> None:
    assert judge(error).action is action


def test_the_reason_is_the_class_and_one_line() -> None:
    assert describe(year_56411()) == "ValueError: year 56411 is out of range"
    assert describe(RuntimeError("two\n  lines")) == "RuntimeError: two lines"
    assert describe(KeyError()) == "KeyError"


def test_unforeseen_failures_back_off_never_in_a_hot_loop() -> None:
    delays = [unknown_retry_delay(n) for n in range(3)]
    assert 1.0 <= delays[0] <= 2.0 and 2.0 <= delays[1] <= 4.0 and 4.0 <= delays[2] <= 8.0
