"""The Hermes provider's model tools with arguments a model gets wrong: each is a tool result
that says what was wrong (never an exception, never an internal error's name), and nothing is
stored for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integrations.hermes_support import configure, initialized
from tests.integrations.test_hermes_tools import FACT, REMEMBER, SEARCH, call
from tests.support.live_server import Live
from tests.support.not_memory_pool import serving_not_memory_pool


@pytest.mark.parametrize("limit", [float("inf"), float("-inf"), float("nan"), 1e400, "1e999"])
def test_a_search_limit_that_is_no_number_is_a_bad_argument(
    live: Live, hermes_home: Path, limit: Any
) -> None:
    """JSON's 1e400 is Python's inf, and int(inf) raises OverflowError, which the handler
    turned into "memory-pool call failed (OverflowError…)": blaming memory-pool for the
    model's argument. It must read as a bad argument, as "lots" does."""
    configure(hermes_home, live.url)
    provider = initialized(hermes_home, "t-limit")
    try:
        error = call(provider, SEARCH, {"query": "bees", "limit": limit})["error"]
        assert "`limit` must be a whole number" in error, error
    finally:
        provider.shutdown()


@pytest.mark.parametrize(
    "args",
    [
        {"query": "bees", "limit": -5},
        {"query": "bees", "limit": 10**12},
        {"query": "bees", "limit": True},
        {"query": "bees", "limit": 2.7},
    ],
)
def test_an_odd_but_numeric_limit_still_searches(
    live: Live, hermes_home: Path, args: dict[str, Any]
) -> None:
    """A negative or huge limit is clamped into 1..20, not sent on to fail at memory-pool."""
    configure(hermes_home, live.url)
    provider = initialized(hermes_home, "t-clamp")
    try:
        answer = call(provider, SEARCH, args)
        assert "count" in answer, answer
    finally:
        provider.shutdown()


@pytest.mark.parametrize(
    "fact", [None, ["a list", "of facts"], {"a": "dict"}, "\x00\x01\x02 ", "y" * 100_000]
)
def test_a_fact_that_is_no_usable_text_is_refused(live: Live, hermes_home: Path, fact: Any) -> None:
    """Not a string, only control characters, or far too long: not stored, and said so."""
    configure(hermes_home, live.url)
    provider = initialized(hermes_home, "t-fact")
    try:
        answer = call(provider, REMEMBER, {"fact": fact})
        assert answer.get("stored") is not True, answer
        assert "error" in answer or "reason" in answer, answer
        assert "Traceback" not in str(answer)
    finally:
        provider.shutdown()


@pytest.mark.parametrize("body", [b"[]", b"{}", b'{"status": "ok"}', b"<html>a web UI</html>"])
def test_a_service_that_is_not_memory_pool_is_an_error(hermes_home: Path, body: bytes) -> None:
    """A wrong port where another API answers 200 with JSON: memory_pool_remember answered
    `{"stored": true}` for `{}` (no refusal, skip or duplicate counted: "kept"), and a search
    "No memory matched"; the model must read that memory-pool is not at that URL."""
    with serving_not_memory_pool("application/json", body) as url:
        configure(hermes_home, url, timeout="2")
        provider = initialized(hermes_home, "t-foreign")
        try:
            for tool, args in [(SEARCH, {"query": "bees"}), (REMEMBER, {"fact": FACT})]:
                answer = call(provider, tool, args)
                assert answer.get("stored") is not True, (tool, answer)
                assert f"{url} did not answer as memory-pool does" in answer["error"], answer
        finally:
            provider.shutdown()
