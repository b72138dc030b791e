"""Redis state written by the previous version (layout 1, keyed by agent spelling) is re-keyed by
collection on the first start: nothing lost, doubled, resurrected or stranded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from shared.agents import Agents
from shared.state import keys
from shared.state.upgrade import LAYOUT, upgrade
from tests.support.embedding_server import EmbeddingServer
from tests.support.redis_dump import load_dump
from tests.support.stack import running_stack, stack_settings

# Written by memory-pool 8a7bf9d's own Buffers.save, claim/begin/renew and tombstone code.
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "redis_v1.json"


def load_layout_1(client: redis.Redis) -> dict[str, Any]:
    return load_dump(client, FIXTURE)


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def ids(r: redis.Redis, conversation: str) -> list[str]:
    return [json.loads(raw)["i"] for raw in r.lrange(keys.buffer(conversation), 0, -1)]


DR = "mem_dr_smith:discord:chan%3Dc1"
STREET = "mem_stra_e:discord:chan%3Dc9"
LEASED = "mem_lease_bot:discord:chan%3Dc2"
IMPORT = "mem_importer:sillytavern:default"


def test_layout_1_is_rekeyed_by_collection(r: redis.Redis) -> None:
    load_layout_1(r)
    report = upgrade(r, Agents([], accept_unlisted=True))
    assert report is not None and report.layout_before == 1
    assert r.get(keys.SCHEMA) == str(LAYOUT) and not r.exists(keys.LEGACY_AGENTS)
    # Two spellings of one collection: one conversation, every message once.
    assert ids(r, DR) == ["m100", "m101", "m200"]
    assert int(r.hget(keys.meta(DR), "chars")) == 37 + 32 + 29
    assert r.smembers(keys.conversations("mem_dr_smith")) == {DR}
    assert not list(r.scan_iter("mp:*dr%20smith*")) and not list(r.scan_iter("mp:*dr.%20smith*"))
    for mid in ("m100", "m101", "m200"):
        assert r.ttl(keys.seen("mem_dr_smith", "discord", mid)) > 29 * 86400
    assert r.ttl(keys.seen("mem_dr_smith", "discord", "m150")) == -1  # still a tombstone
    # straße and STRASSE shared a casefold key; the buffer was written to mem_stra_e, and the
    # dedupe marks hold for both collections, as they did.
    assert ids(r, STREET) == ["s1", "s2"]
    for collection in ("mem_stra_e", "mem_strasse"):
        assert (
            r.exists(keys.seen(collection, "discord", "s1"), keys.seen(collection, "discord", "s2"))
            == 2
        )
    # A live lease, its in-flight points and the due time come along.
    assert r.pttl(keys.lease(LEASED)) > 0
    assert json.loads(r.hget(keys.meta(LEASED), "inflight")) == [
        "11111111-1111-5111-8111-111111111111"
    ]
    assert r.zscore(keys.DUE, LEASED) is not None
    assert r.hget(keys.meta(IMPORT), "noidle") == "1"
    due = set(r.zrange(keys.DUE, 0, -1))
    assert due == {DR, STREET, LEASED, IMPORT}
    assert r.hgetall(keys.NAMES) == {
        "mem_dr_smith": "Dr. Smith", "mem_stra_e": "straße", "mem_strasse": "STRASSE",
        "mem_lease_bot": "Lease Bot", "mem_importer": "Importer",
    }  # fmt: skip
    assert upgrade(r, Agents([], accept_unlisted=True)) is None  # a second start does nothing


def test_after_the_upgrade_the_write_path_goes_on(
    r: redis.Redis, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> None:
    load_layout_1(r)
    settings = stack_settings(redis_url, embeddings.url, tmp_path)
    with running_stack(settings, Agents([], accept_unlisted=True)) as stack:
        stack.flush("Dr. Smith")
        [payload] = stack.payloads("mem_dr_smith")
        assert payload["messageIdList"] == ["m100", "m101", "m200"]
        again = {"bot": "dr smith", "messages": [
            {"message_id": m, "text": "sent again by the plugin", "ts": 1718000000000,
             "channel_id": "c1"} for m in ("m100", "m150", "m200")
        ]}  # fmt: skip
        answer = stack.save(again)
        assert (answer["accepted"], answer["duplicates"]) == (0, 3)
        stack.flush("STRASSE")
        stack.flush("straße")
        [street] = stack.payloads("mem_stra_e")
        assert street["messageIdList"] == ["s1", "s2"]
        assert stack.payloads("mem_strasse") == []
