"""The quarantine over the API: who may see and release it, and what each view shows.

Conversations enter the quarantine through the real scripts (claimed, then failed with the
lease), over the test Redis; the flush that puts them there is tested in tests/workers and
tests/e2e.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from shared.agents import ApiKey
from shared.state import keys
from shared.state.buffers import Buffers
from shared.state.quarantine import FailOutcome, Quarantine
from tests.support.door import agents, app_factory, client_for, is_error_shape
from tests.support.embedding_server import EmbeddingServer
from tests.support.legacy import BASE_TS, buffer_legacy, record

ALL = "all-agents-key-0123456789"
MYTHOS = "mythos-only-key-0123456789"
KEYS = [ApiKey(name="ops", key=ALL), ApiKey(name="bot", key=MYTHOS, agents=("mythos",))]
REASON = "ValueError: year 56411 is out of range"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def client(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[TestClient]:
    with (
        app_factory(redis_url, embeddings.url, tmp_path) as make,
        client_for(make(agents(api_keys=KEYS))) as test_client,
    ):
        yield test_client


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


def quarantine(r: redis.Redis, agent: str, channel: str) -> str:
    """A conversation of `agent` with two messages, claimed and quarantined at once."""
    records = [record(f"{channel}-1", BASE_TS), record(f"{channel}-2", BASE_TS + 1)]
    key = buffer_legacy(r, agent=agent, collection=f"mem_{agent}", channel=channel, records=records)
    buffers = Buffers(r, dedupe_ttl_seconds=60, lease_seconds=30)
    [claim] = [c for c in buffers.claim_due(100) if c.conversation == key]
    assert Quarantine(r).fail(claim, REASON, threshold=1, retry_in=1) is FailOutcome.QUARANTINED
    return key


def test_health_is_degraded_and_says_no_more_without_an_all_agents_key(
    client: TestClient, r: redis.Redis
) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    quarantine(r, "mythos", "c1")
    assert client.get("/health", headers=bearer(MYTHOS)).json() == {"status": "degraded"}
    full = client.get("/health", headers=bearer(ALL)).json()
    assert full["status"] == "degraded"
    assert full["redis"]["quarantined"] == 1
    assert full["agents"]["mythos"]["quarantined"] == 1
    assert full["agents"]["polaris"]["quarantined"] == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/quarantine"), ("POST", "/quarantine/release"), ("POST", "/quarantine/discard")],
)
def test_the_quarantine_endpoints_need_an_all_agents_key(
    client: TestClient, r: redis.Redis, method: str, path: str
) -> None:
    key = quarantine(r, "mythos", "c1")
    for headers, status in [({}, 401), (bearer(MYTHOS), 403), (bearer("x" * 20), 401)]:
        response = client.request(method, path, headers=headers, json={"conversation": key})
        assert response.status_code == status, response.text
        assert is_error_shape(response.json())
    assert [m for m, _ in Quarantine(r).members()] == [key]  # nothing released


def test_every_view_shows_the_reason_and_the_messages_kept(
    client: TestClient, r: redis.Redis
) -> None:
    key = quarantine(r, "mythos", "c1")
    quarantine(r, "polaris", "c2")
    [mine] = client.get("/agents/mythos/stats", headers=bearer(MYTHOS)).json()["quarantined"]
    assert mine == {
        "agent": "mythos", "collection": "mem_mythos", "conversation": key, "source": "discord",
        "reason": REASON, "since": mine["since"], "messages": 2, "failures": 1,
    }  # fmt: skip
    listing = client.get("/quarantine", headers=bearer(ALL)).json()
    assert listing["total"] == 2
    assert [e["agent"] for e in listing["entries"]] == ["mythos", "polaris"]
    only = client.get("/quarantine", params={"bot": "Polaris"}, headers=bearer(ALL)).json()
    assert [e["agent"] for e in only["entries"]] == ["polaris"]
    paged = client.get("/quarantine", params={"offset": 1}, headers=bearer(ALL)).json()
    assert paged["total"] == 2 and len(paged["entries"]) == 1
    letters = client.get("/dead-letters", headers=bearer(ALL)).json()
    assert letters["quarantined_total"] == 2
    assert letters["quarantined"] == listing["entries"]


def test_release_by_agent_by_conversation_or_through_a_replay(
    client: TestClient, r: redis.Redis
) -> None:
    mythos = quarantine(r, "mythos", "c1")
    polaris = quarantine(r, "polaris", "c2")
    other = quarantine(r, "polaris", "c3")
    ops = bearer(ALL)
    release = "/quarantine/release"
    assert client.post(release, json={"bot": "nobody"}, headers=ops).status_code == 404
    answer = client.post(release, json={"bot": "polaris", "conversation": mythos}, headers=ops)
    assert answer.json() == {"released": 0}  # that conversation is not polaris's
    assert client.post(release, json={"conversation": polaris}, headers=ops).json() == {
        "released": 1
    }
    assert r.zscore(keys.DUE, polaris) is not None  # due again at once
    assert r.hget(keys.meta(polaris), "quarantined") is None
    assert r.llen(keys.buffer(polaris)) == 2  # its messages, kept
    replay = client.post("/dead-letters/replay", json={"bot": "polaris"}, headers=ops)
    assert replay.json() == {"queued": 0, "released": 1}
    assert [m for m, _ in Quarantine(r).members()] == [mythos]
    assert r.zscore(keys.DUE, other) is not None
    assert client.post(release, headers=ops).json() == {"released": 1}
    assert Quarantine(r).members() == []


@pytest.mark.parametrize(
    "body", [{"convo": "typo"}, {"bot": ""}, {"bot": "polaris", "conversaton": "x"}]
)
def test_a_release_that_names_nothing_it_knows_releases_nothing(
    client: TestClient, r: redis.Redis, body: dict
) -> None:
    # Review: a misspelt field or an empty `bot` was ignored, so the request meant "release
    # every quarantined conversation" (a careless operator's typo released all of them).
    key = quarantine(r, "mythos", "c1")
    response = client.post("/quarantine/release", json=body, headers=bearer(ALL))
    assert response.status_code == 422, response.text
    assert is_error_shape(response.json())
    assert [m for m, _ in Quarantine(r).members()] == [key]
