"""POST /save against a real Redis: the clients' bodies, counts, dedupe, refusals, OpenAPI."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, Agents
from shared.format.messages import Message
from shared.format.naming import collection_name
from shared.runtime import Runtime
from shared.state import keys
from tests.support.embedding_server import EmbeddingServer
from tests.support.marks import run_down
from tests.support.redis_server import RedisServer
from tests.support.stack import stack_settings

BASE_TS = 1_718_000_000_000  # 2024-06-10T06:13:20Z
DAY = 86_400
DEDUPE_TTL = 30 * DAY
TEXT = "the harbour lights were far away"

# What a write leaves in Redis; a refused request must leave none of it.
WRITE_PATTERNS = ("mp:buf:*", "mp:seen:*", "mp:conv:*", "mp:convs:*", "mp:due", "mp:names")

MakeClient = Callable[..., TestClient]


def listed_agents() -> Agents:
    return Agents(
        [
            AgentConfig(name="mythos", self_speaker="Mythos", speaker_aliases={"111": "Alex"}),
            AgentConfig(name="polaris", self_speaker="Polaris"),
        ],
        accept_unlisted=False,
    )


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def make_client(
    redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[MakeClient]:
    """Builds the API over the test Redis; each call gets its own data folder (local Qdrant)."""
    count = itertools.count()
    with ExitStack() as stack:

        def make(agents: Agents | None = None, **overrides: Any) -> TestClient:
            data_dir = tmp_path / f"app{next(count)}"
            values = {"REDIS_URL": redis_url, **overrides}
            settings = stack_settings(values.pop("REDIS_URL"), embeddings.url, data_dir, **values)
            runtime = Runtime.build(settings, agents=agents or listed_agents())
            stack.callback(runtime.close)
            return stack.enter_context(TestClient(create_app(settings, runtime=runtime)))

        yield make


@pytest.fixture
def client(make_client: MakeClient) -> TestClient:
    return make_client()


def message(mid: str, text: str = TEXT, **fields: Any) -> dict[str, Any]:
    return {"message_id": mid, "text": text, "ts": BASE_TS, **fields}


def save(client: TestClient, body: dict[str, Any]) -> dict[str, int]:
    response = client.post("/save", json=body)
    assert response.status_code == 202, response.text
    return response.json()


def conversation(agent: str, source: str, scope: str) -> str:
    """A conversation key: an agent's state is keyed by its collection."""
    return f"{keys.agent_key(collection_name(agent))}:{keys.part(source)}:{keys.part(scope)}"


def buffered(r: redis.Redis, conv: str) -> list[Message]:
    return [Message.from_json(raw) for raw in r.lrange(keys.buffer(conv), 0, -1)]


def all_buffered(r: redis.Redis) -> dict[str, list[Message]]:
    prefix = keys.buffer("")
    return {key.removeprefix(prefix): buffered(r, key.removeprefix(prefix))
            for key in r.scan_iter(f"{prefix}*")}  # fmt: skip


def write_keys(r: redis.Redis) -> list[str]:
    return sorted(key for pattern in WRITE_PATTERNS for key in r.scan_iter(pattern))


# --- the clients' bodies ---------------------------------------------------------------------


def test_discord_plugin_body_is_stored_unchanged(client: TestClient, r: redis.Redis) -> None:
    # clients.md §1, field for field: no source; speaker_name and guild_id absent where they are.
    body = {
        "bot": "mythos",
        "messages": [
            {"speaker_kind": "user", "discord_user_id": "111", "speaker_name": "alex_on_discord",
             "text": "<reply:@Mythos> did you see the harbour?",
             "message_id": "1250000000000000001", "ts": BASE_TS,
             "channel_id": "1240000000000000001", "guild_id": "1230000000000000001"},
            {"speaker_kind": "self", "discord_user_id": "999", "text": "  I did, it glowed.  ",
             "message_id": "1250000000000000002", "ts": BASE_TS + 60_000,
             "channel_id": "1240000000000000001", "guild_id": "1230000000000000001"},
            {"speaker_kind": "user", "discord_user_id": "222", "text": "a direct message here",
             "message_id": "1250000000000000003", "ts": BASE_TS + 120_000,
             "channel_id": "1240000000000000009"},
            {"speaker_kind": "user", "discord_user_id": "111", "speaker_name": "alex_on_discord",
             "text": "ok", "message_id": "1250000000000000004", "ts": BASE_TS + 180_000,
             "channel_id": "1240000000000000001", "guild_id": "1230000000000000001"},
        ],
    }  # fmt: skip
    response = client.post("/save", json=body)

    assert response.status_code == 202
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"accepted": 3, "duplicates": 0, "skipped": 1}
    channel = conversation("mythos", "discord", "chan=1240000000000000001")
    dm = conversation("mythos", "discord", "chan=1240000000000000009")
    assert all_buffered(r) == {
        channel: [
            Message("1250000000000000001", "<reply:@Mythos> did you see the harbour?", BASE_TS,
                    "Alex", user_id="111"),
            Message("1250000000000000002", "I did, it glowed.", BASE_TS + 60_000, "Mythos",
                    user_id="999", is_self=True),
        ],
        dm: [Message("1250000000000000003", "a direct message here", BASE_TS + 120_000, "222",
                     user_id="222")],
    }  # fmt: skip
    meta = r.hgetall(keys.meta(channel))
    assert (meta["agent"], meta["source"], meta["channel"], meta["guild"]) == (
        "mythos", "discord", "1240000000000000001", "1230000000000000001",
    )  # fmt: skip
    assert "guild" not in r.hgetall(keys.meta(dm))
    assert r.exists(keys.seen(collection_name("mythos"), "discord", "1250000000000000001"))
    assert not r.exists(
        keys.seen(collection_name("mythos"), "discord", "1250000000000000004")
    )  # skipped


def test_second_host_self_messages_with_made_up_ids(client: TestClient, r: redis.Redis) -> None:
    # clients.md §2: self messages carry only speaker_kind, text, message_id, ts (+ channel ids).
    channel = "discord:1230000000000000001:1240000000000000001"
    body = {
        "bot": "polaris",
        "messages": [
            {"speaker_kind": "self", "text": "Good morning, captain.", "message_id": "self-3-1",
             "ts": BASE_TS, "channel_id": channel, "guild_id": "1230000000000000001"},
            {"speaker_kind": "self", "text": "No channel on this one.", "message_id": "self-3-2",
             "ts": BASE_TS + 1},
        ],
    }  # fmt: skip
    assert save(client, body) == {"accepted": 2, "duplicates": 0, "skipped": 0}
    assert all_buffered(r) == {
        conversation("polaris", "discord", f"chan={channel}"): [
            Message("self-3-1", "Good morning, captain.", BASE_TS, "Polaris", is_self=True)
        ],
        conversation("polaris", "discord", "default"): [
            Message("self-3-2", "No channel on this one.", BASE_TS + 1, "Polaris", is_self=True)
        ],
    }
    assert save(client, body) == {"accepted": 0, "duplicates": 2, "skipped": 0}


# --- how each message is resolved ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "speaker", "user_id", "is_self"),
    [
        ({"speaker_kind": "self", "discord_user_id": "999", "speaker_name": "b"}, "Mythos", "999",
         True),
        ({"speaker_kind": "self"}, "Mythos", None, True),
        ({"discord_user_id": "111", "speaker_name": "alex_on_discord"}, "Alex", "111", False),
        ({"speaker_kind": "user", "user_id": "111"}, "Alex", "111", False),
        ({"user_id": "222", "discord_user_id": "111"}, "222", "222", False),
        ({"user_id": "222", "speaker_name": "  Bea  "}, "Bea", "222", False),
        ({"discord_user_id": "222"}, "222", "222", False),
        ({"discord_user_id": 222}, "222", "222", False),
        ({"discord_user_id": "222", "speaker_name": "   "}, "222", "222", False),
        ({"speaker_name": "Cy"}, "Cy", None, False),
        ({}, "User", None, False),
    ],
)  # fmt: skip
def test_speaker_is_resolved(
    client: TestClient,
    r: redis.Redis,
    fields: dict[str, Any],
    speaker: str,
    user_id: str | None,
    is_self: bool,
) -> None:
    save(client, {"bot": "mythos", "messages": [message("m1", **fields)]})
    stored = all_buffered(r)[conversation("mythos", "discord", "default")]
    assert stored == [Message("m1", TEXT, BASE_TS, speaker, user_id=user_id, is_self=is_self)]


NOW = object()  # the arrival time


@pytest.mark.parametrize(
    ("ts", "expected"),
    [
        (BASE_TS, BASE_TS),
        (BASE_TS + 0.9, BASE_TS),
        (1_718_000_000, BASE_TS),
        (1_718_000_000.25, BASE_TS + 250),
        ("1718000000000", BASE_TS),
        ("2024-06-10T06:13:20Z", BASE_TS),
        ("2024-06-10T06:13:20.500Z", BASE_TS + 500),
        ("2024-06-10T08:13:20+02:00", BASE_TS),
        ("2024-06-10T06:13:20", BASE_TS),
        ("2024-06-10", BASE_TS - (6 * 3600 + 13 * 60 + 20) * 1000),
        ("absent", NOW),
        (None, NOW),
        ("yesterday", NOW),
        (0, NOW),
        (True, NOW),
    ],
)
def test_timestamp_is_normalised_to_epoch_ms(
    client: TestClient, r: redis.Redis, ts: Any, expected: Any
) -> None:
    item = {"message_id": "m1", "text": TEXT}
    if ts != "absent":
        item["ts"] = ts
    before = int(time.time() * 1000)
    save(client, {"bot": "mythos", "messages": [item]})
    after = int(time.time() * 1000)
    [stored] = all_buffered(r)[conversation("mythos", "discord", "default")]
    assert isinstance(stored.ts, int)
    if expected is NOW:
        assert before <= stored.ts <= after
    else:
        assert stored.ts == expected


def test_empty_and_short_messages_are_skipped(client: TestClient, r: redis.Redis) -> None:
    texts = {"a": "", "b": "    ", "c": "abcd", "d": "  abcd \n", "e": None, "f": "abcde",
             "g": "  \tab cd  "}  # fmt: skip
    items = [{"message_id": mid, "text": text, "ts": BASE_TS} for mid, text in texts.items()]
    items.append({"message_id": "h", "ts": BASE_TS})  # no text at all

    assert save(client, {"bot": "mythos", "messages": items}) == {
        "accepted": 2, "duplicates": 0, "skipped": 6,
    }  # fmt: skip
    stored = all_buffered(r)[conversation("mythos", "discord", "default")]
    assert [(m.id, m.text) for m in stored] == [("f", "abcde"), ("g", "ab cd")]
    assert sorted(r.scan_iter("mp:seen:*")) == sorted(
        keys.seen(collection_name("mythos"), "discord", mid) for mid in "fg"
    )


def test_empty_message_list_is_accepted(client: TestClient, r: redis.Redis) -> None:
    assert save(client, {"bot": "mythos", "messages": []}) == {
        "accepted": 0, "duplicates": 0, "skipped": 0,
    }  # fmt: skip
    assert write_keys(r) == []


# --- source and conversation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "body_source", "source"),
    [
        ({}, None, "discord"),
        ({}, "hermes", "hermes"),
        ({"MEMORY_POOL_DEFAULT_SOURCE": "irc"}, None, "irc"),
        ({"MEMORY_POOL_DEFAULT_SOURCE": "irc"}, "hermes", "hermes"),
    ],
)
def test_source_is_the_body_s_else_the_configured_default(
    make_client: MakeClient,
    r: redis.Redis,
    overrides: dict[str, Any],
    body_source: str | None,
    source: str,
) -> None:
    body: dict[str, Any] = {"bot": "mythos", "messages": [message("m1", channel_id="c1")]}
    if body_source is not None:
        body["source"] = body_source
    save(make_client(**overrides), body)
    assert list(all_buffered(r)) == [conversation("mythos", source, "chan=c1")]
    assert r.hget(keys.meta(conversation("mythos", source, "chan=c1")), "source") == source
    assert write_keys(r).count(keys.seen(collection_name("mythos"), source, "m1")) == 1


@pytest.mark.parametrize(
    ("bot", "source", "fields", "conv"),
    [
        ("mythos", None, {"conversation_id": "t1", "channel_id": "c1"},
         ("mythos", "discord", "conv=t1")),
        ("mythos", None, {"channel_id": "c1", "guild_id": "g1"}, ("mythos", "discord", "chan=c1")),
        ("mythos", None, {"guild_id": "g1"}, ("mythos", "discord", "default")),
        ("mythos", "hermes", {"conversation_id": "t1"}, ("mythos", "hermes", "conv=t1")),
        ("mythos", "hermes", {}, ("mythos", "hermes", "default")),
        ("polaris", None, {"channel_id": "c1"}, ("polaris", "discord", "chan=c1")),
        ("MYTHOS", None, {"channel_id": "c1"}, ("mythos", "discord", "chan=c1")),
    ],
)  # fmt: skip
def test_conversation_is_agent_source_and_thread_or_channel(
    client: TestClient,
    r: redis.Redis,
    bot: str,
    source: str | None,
    fields: dict[str, Any],
    conv: tuple[str, str, str],
) -> None:
    body: dict[str, Any] = {"bot": bot, "messages": [message("m1", **fields)]}
    if source:
        body["source"] = source
    save(client, body)
    assert list(all_buffered(r)) == [conversation(*conv)]


def test_one_request_fills_several_conversations(client: TestClient, r: redis.Redis) -> None:
    items = [
        message("a", channel_id="c1"),
        message("b", conversation_id="c1"),
        message("c"),
        message("d", channel_id="c1"),
        message("e", conversation_id="c1"),
    ]
    assert save(client, {"bot": "mythos", "messages": items})["accepted"] == 5
    assert {conv: [m.id for m in ms] for conv, ms in all_buffered(r).items()} == {
        conversation("mythos", "discord", "chan=c1"): ["a", "d"],
        conversation("mythos", "discord", "conv=c1"): ["b", "e"],
        conversation("mythos", "discord", "default"): ["c"],
    }


# --- dedupe ----------------------------------------------------------------------------------


def test_resent_messages_are_duplicates(client: TestClient, r: redis.Redis) -> None:
    first = [message(f"m{n}", channel_id="c1") for n in range(3)]
    assert save(client, {"bot": "mythos", "messages": first}) == {
        "accepted": 3, "duplicates": 0, "skipped": 0,
    }  # fmt: skip
    again = [*first, message("m3", channel_id="c1"), message("m4", "hm"), message("m3")]
    assert save(client, {"bot": "mythos", "messages": again}) == {
        "accepted": 1, "duplicates": 4, "skipped": 1,
    }  # fmt: skip
    stored = all_buffered(r)[conversation("mythos", "discord", "chan=c1")]
    assert [m.id for m in stored] == ["m0", "m1", "m2", "m3"]


def test_seeing_an_id_again_refreshes_its_expiry(client: TestClient, r: redis.Redis) -> None:
    seen = keys.seen(collection_name("mythos"), "discord", "m1")
    save(client, {"bot": "mythos", "messages": [message("m1")]})
    assert DEDUPE_TTL - 5 <= r.ttl(seen) <= DEDUPE_TTL
    run_down(r, seen, 100_000, ttl_seconds=DEDUPE_TTL)
    assert save(client, {"bot": "mythos", "messages": [message("m1")]})["duplicates"] == 1
    assert DEDUPE_TTL - 5 <= r.ttl(seen) <= DEDUPE_TTL


def test_dedupe_ttl_is_configurable(make_client: MakeClient, r: redis.Redis) -> None:
    client = make_client(MEMORY_POOL_DEDUPE_TTL_DAYS=2)
    save(client, {"bot": "mythos", "messages": [message("m1")]})
    assert 2 * DAY - 5 <= r.ttl(keys.seen(collection_name("mythos"), "discord", "m1")) <= 2 * DAY


def test_same_id_under_another_source_or_agent_is_new(client: TestClient, r: redis.Redis) -> None:
    item = message("m1", channel_id="c1")
    assert save(client, {"bot": "mythos", "messages": [item]})["accepted"] == 1
    assert save(client, {"bot": "mythos", "source": "hermes", "messages": [item]})["accepted"] == 1
    assert save(client, {"bot": "polaris", "messages": [item]})["accepted"] == 1
    assert save(client, {"bot": "Mythos", "source": "discord", "messages": [item]}) == {
        "accepted": 0, "duplicates": 1, "skipped": 0,
    }  # fmt: skip
    assert sorted(all_buffered(r)) == sorted([
        conversation("mythos", "discord", "chan=c1"),
        conversation("mythos", "hermes", "chan=c1"),
        conversation("polaris", "discord", "chan=c1"),
    ])  # fmt: skip


def test_racing_requests_store_each_message_once(client: TestClient, r: redis.Redis) -> None:
    items = [message(f"m{n:02d}", channel_id=f"c{n % 3}") for n in range(30)]
    threads_count = 8
    barrier = threading.Barrier(threads_count)
    results: list[dict[str, int]] = []
    lock = threading.Lock()

    def post() -> None:
        barrier.wait()
        counts = save(client, {"bot": "mythos", "messages": items})
        with lock:
            results.append(counts)

    threads = [threading.Thread(target=post) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert len(results) == threads_count
    assert sum(c["accepted"] for c in results) == 30
    assert sum(c["duplicates"] for c in results) == threads_count * 30 - 30
    stored = all_buffered(r)
    assert sum(len(ms) for ms in stored.values()) == 30
    assert sorted(m.id for ms in stored.values() for m in ms) == [m["message_id"] for m in items]


# --- refusals: nothing of the request is stored -----------------------------------------------

GOOD = [message("g1", channel_id="c1"), message("g2", channel_id="c2")]
JSON = {"content-type": "application/json"}
NOT_JSON = "the request body is not JSON: send it with Content-Type: application/json"
EMPTY = "the request body is empty: send a JSON object with `bot` and `messages`"
LIMITS = {"MEMORY_POOL_MAX_MESSAGES": 3, "MEMORY_POOL_MAX_CHARS": 100}


@pytest.mark.parametrize(
    ("request_kwargs", "status", "code", "detail"),
    [
        ({"content": b'{"bot": "mythos", "messages": [', "headers": JSON},
         400, "invalid_json", "the request body is not valid JSON"),
        ({"content": b"bot=mythos", "headers": {"content-type": "text/plain"}},
         400, "invalid_json", NOT_JSON),
        ({"content": b'{"bot": "mythos", "messages": []}'},
         400, "invalid_json", NOT_JSON),
        ({"content": b"", "headers": JSON}, 400, "invalid_json", EMPTY),
        ({"json": ["mythos"]}, 422, "invalid_request",
         "body: Input should be a valid dictionary or object to extract fields from"),
        ({"json": {"messages": GOOD}}, 422, "invalid_request", "bot: Field required"),
        ({"json": {"bot": "", "messages": GOOD}}, 422, "invalid_request",
         "bot: String should have at least 1 character"),
        ({"json": {"bot": "mythos"}}, 422, "invalid_request", "messages: Field required"),
        ({"json": {"bot": "mythos", "messages": {"0": GOOD[0]}}}, 422, "invalid_request",
         "messages: Input should be a valid list"),
        ({"json": {"bot": "mythos", "messages": [*GOOD, {"text": TEXT, "ts": BASE_TS}]}},
         422, "invalid_request", "messages[2].message_id: Field required"),
        ({"json": {"bot": "mythos", "messages": [GOOD[0], message("")]}},
         422, "invalid_request", "messages[1].message_id: String should have at least 1 character"),
        ({"json": {"bot": "mythos", "messages": [GOOD[0], message("x", speaker_kind="bot")]}},
         422, "invalid_request", "messages[1].speaker_kind: Input should be 'user' or 'self'"),
        ({"json": {"bot": "mythos", "messages": [*GOOD, message("g3"), message("g4")]}},
         413, "request_too_large", "4 messages in one request; the limit is 3"),
        ({"json": {"bot": "mythos", "messages": [*GOOD, message("g3", "x" * 37)]}},
         413, "request_too_large", "101 characters of text in one request; the limit is 100"),
        ({"json": {"bot": "nobody", "messages": GOOD}}, 404, "unknown_agent",
         "unknown agent 'nobody': it is not in the agents file"),
    ],
    ids=["bad-json", "text-plain", "no-content-type", "empty", "array", "no-bot", "empty-bot",
         "no-messages", "messages-object", "no-message-id", "empty-message-id", "bad-kind",
         "too-many-messages", "too-many-chars", "unknown-agent"],
)  # fmt: skip
def test_structural_errors_are_refused_whole(
    make_client: MakeClient,
    r: redis.Redis,
    request_kwargs: dict[str, Any],
    status: int,
    code: str,
    detail: str,
) -> None:
    response = make_client(**LIMITS).post("/save", **request_kwargs)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": code, "detail": detail}
    assert write_keys(r) == []


def test_limits_are_inclusive(make_client: MakeClient, r: redis.Redis) -> None:
    client = make_client(**LIMITS)
    items = [*GOOD, message("g3", "x" * 36)]  # 3 messages, 32 + 32 + 36 = 100 characters
    assert save(client, {"bot": "mythos", "messages": items})["accepted"] == 3


def test_default_limit_is_500_messages(client: TestClient, r: redis.Redis) -> None:
    items = [message(f"m{n}", "hi") for n in range(501)]
    response = client.post("/save", json={"bot": "mythos", "messages": items})
    assert response.status_code == 413
    assert response.json()["detail"] == "501 messages in one request; the limit is 500"
    assert save(client, {"bot": "mythos", "messages": items[:500]})["skipped"] == 500


def test_unlisted_agents_when_accepted(make_client: MakeClient, r: redis.Redis) -> None:
    client = make_client(Agents([], accept_unlisted=True))
    assert save(client, {"bot": "Nova", "messages": [message("m1", speaker_kind="self")]}) == {
        "accepted": 1, "duplicates": 0, "skipped": 0,
    }  # fmt: skip
    [stored] = all_buffered(r)[conversation("nova", "discord", "default")]
    assert stored.speaker == "Nova"

    response = client.post("/save", json={"bot": "!!!", "messages": [message("m2")]})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_agent_name"
    assert "'!!!'" in response.json()["detail"]
    assert not list(r.scan_iter("mp:seen:*:m2"))


@pytest.mark.parametrize("bot", ["mythos", "MYTHOS"])
def test_blocked_agent_is_refused_with_the_reason(
    client: TestClient, r: redis.Redis, bot: str
) -> None:
    reason = "collection mem_mythos holds 3072-dimension vectors; the model makes 128"
    r.set(keys.blocked(collection_name("mythos")), reason)
    response = client.post("/save", json={"bot": bot, "messages": GOOD})
    assert response.status_code == 409
    assert response.json() == {"error": "agent_blocked", "detail": reason}
    assert write_keys(r) == []
    # Other agents are not held, and the agent is writable again once the flag goes.
    assert save(client, {"bot": "polaris", "messages": GOOD})["accepted"] == 2
    r.delete(keys.blocked(collection_name("mythos")))
    assert save(client, {"bot": bot, "messages": GOOD})["accepted"] == 2


def test_redis_down_is_503_and_nothing_acknowledged(
    embeddings: EmbeddingServer, tmp_path: Path
) -> None:
    with RedisServer(persistent=True) as server:
        settings = stack_settings(server.url, embeddings.url, tmp_path, MEMORY_POOL_REDIS_TIMEOUT=1)
        runtime = Runtime.build(settings, agents=listed_agents())
        try:
            with TestClient(create_app(settings, runtime=runtime)) as client:
                assert save(client, {"bot": "mythos", "messages": [message("m1")]})["accepted"] == 1
                server.stop()
                response = client.post("/save", json={"bot": "mythos", "messages": [message("m2")]})
                assert response.status_code == 503
                assert response.json()["error"] == "upstream_unavailable"
                assert response.json()["detail"].startswith("Redis is unavailable")
                server.start()

                check = redis.Redis.from_url(server.url, decode_responses=True)
                try:
                    assert sorted(check.scan_iter("mp:seen:*")) == [
                        keys.seen(collection_name("mythos"), "discord", "m1")
                    ]
                    default = conversation("mythos", "discord", "default")
                    assert [m.id for m in buffered(check, default)] == ["m1"]
                finally:
                    check.close()
                # Not acknowledged, so the client's resend is new.
                resend = {"bot": "mythos", "messages": [message("m1"), message("m2")]}
                assert save(client, resend) == {"accepted": 1, "duplicates": 1, "skipped": 0}
        finally:
            runtime.close()


# --- the published schema --------------------------------------------------------------------


def test_openapi_lists_save_with_its_answers(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    operation = schema["paths"]["/save"]["post"]
    body_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body_ref == "#/components/schemas/SaveRequest"
    responses = operation["responses"]
    assert sorted(responses) == ["202", "400", "401", "403", "404", "409", "413", "422", "503"]
    ok = responses["202"]["content"]["application/json"]["schema"]["$ref"]
    assert ok == "#/components/schemas/SaveResponse"
    for status in ["400", "404", "409", "413", "422", "503"]:
        error = responses[status]["content"]["application/json"]["schema"]["$ref"]
        assert error == "#/components/schemas/ErrorResponse", status
        assert responses[status]["description"]
    components = schema["components"]["schemas"]
    # refused and refusals are there only when a message was refused (tests/api/test_refusals.py)
    assert set(components["SaveResponse"]["properties"]) == {
        "accepted", "duplicates", "skipped", "edited", "stale", "refused", "refusals",
    }  # fmt: skip
    assert components["SaveResponse"]["required"] == ["accepted", "duplicates", "skipped"]
    assert set(components["ErrorResponse"]["required"]) == {"error", "detail"}
    assert components["SaveRequest"]["required"] == ["bot", "messages"]
    assert components["SaveMessage"]["required"] == ["message_id"]
    assert set(components["SaveMessage"]["properties"]) == {
        "message_id", "text", "ts", "speaker_kind", "user_id", "discord_user_id",
        "speaker_name", "channel_id", "guild_id", "conversation_id",
    }  # fmt: skip
