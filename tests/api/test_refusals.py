"""Validation at the door: a message that cannot be stored is refused alone, inside the 202."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from fastapi.testclient import TestClient

from shared.format.messages import Message
from shared.state import keys
from tests.support.door import (
    BASE_TS,
    TEXT,
    MakeApp,
    agents,
    client_for,
    is_error_shape,
    message,
    served,
    snapshot,
)

JSON = {"content-type": "application/json"}


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def buffered(r: redis.Redis) -> list[Message]:
    prefix = keys.buffer("")
    return [
        Message.from_json(raw)
        for key in sorted(r.scan_iter(f"{prefix}*"))
        for raw in r.lrange(key, 0, -1)
    ]


def post_raw(client: TestClient, *raw_messages: str, bot: str = "mythos") -> Any:
    """POST /save with messages written as raw JSON text (for numbers and escapes that
    Python's own json.dumps would not write)."""
    body = f'{{"bot": "{bot}", "messages": [{", ".join(raw_messages)}]}}'
    return client.post("/save", content=body.encode(), headers=JSON)


GOOD = json.dumps(message("g1"))


def raw_with(mid: str, field: str, raw_value: str) -> str:
    base = {"message_id": mid, "text": TEXT, "ts": BASE_TS}
    base.pop(field, None)
    inner = json.dumps(base)[1:-1]
    return f"{{{inner}, {json.dumps(field)}: {raw_value}}}"


# --- times: years 1970-9999 after the ms / seconds / ISO conversion ---------------------------


@pytest.mark.parametrize(
    "raw_ts",
    [
        "1718000000000000",  # microseconds: the year 56411
        '"0001-01-01T00:00:00+14:00"',
        "253402300800000",  # 10000-01-01
        "1e30",
        "1" + "0" * 400,  # 10**400 as a JSON number (a 500 before)
        "1e400",  # read as infinity
        '"1e309"',  # the same as a string (it was stored as "now")
        '"1969-12-31T23:59:59Z"',
    ],
    ids=[
        "microseconds",
        "year-1",
        "year-10000",
        "1e30",
        "10**400",
        "1e400",
        "1e309-string",
        "1969",
    ],
)
def test_a_time_outside_the_storable_years_refuses_that_message_only(
    client: TestClient, r: redis.Redis, raw_ts: str
) -> None:
    response = post_raw(client, GOOD, raw_with("p1", "ts", raw_ts))
    assert response.status_code == 202, response.text
    answer = response.json()
    assert (answer["accepted"], answer["duplicates"], answer["skipped"]) == (1, 0, 0)
    assert answer["refused"] == 1
    [refusal] = answer["refusals"]
    assert refusal["index"] == 1 and refusal["message_id"] == "p1"
    assert refusal["field"] == "ts"
    assert "1970 to 9999" in refusal["reason"] or "finite" in refusal["reason"]
    assert [m.id for m in buffered(r)] == ["g1"]
    assert not r.exists(keys.seen("mythos", "discord", "p1"))  # a fixed resend is new


@pytest.mark.parametrize(
    ("ts", "stored"),
    [(0, None), ("1970-01-01T00:00:00Z", 0), ("9999-12-31T23:59:59.999Z", 253402300799999)],
)
def test_the_edges_of_the_range_are_stored(
    client: TestClient, r: redis.Redis, ts: Any, stored: int | None
) -> None:
    # 0 is no time at all for st-qdrant-memory (it means "now"); the epoch as ISO is a time.
    answer = client.post("/save", json={"bot": "mythos", "messages": [message("m1", ts=ts)]})
    assert answer.json() == {"accepted": 1, "duplicates": 0, "skipped": 0}
    [kept] = buffered(r)
    assert stored is None or kept.ts == stored


# --- message ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw_id", "why"),
    [
        ('"x,y"', "comma"),
        ('" s1 "', "whitespace"),
        ('"s1\\n"', "whitespace"),
        ('"a\\u0000b"', "control"),
        ('"a\\u001bb"', "control"),
        ('"a\\ud800"', "surrogate"),
        (json.dumps("x" * 257), "257 characters"),
    ],
    ids=["comma", "spaces", "newline", "nul", "escape", "surrogate", "too-long"],
)
def test_an_unstorable_message_id_refuses_that_message_only(
    client: TestClient, r: redis.Redis, raw_id: str, why: str
) -> None:
    bad = raw_with("placeholder", "message_id", raw_id)
    response = post_raw(client, GOOD, bad, json.dumps(message("g2")))
    assert response.status_code == 202, response.text
    answer = response.json()
    assert (answer["accepted"], answer["refused"]) == (2, 1)
    [refusal] = answer["refusals"]
    assert (refusal["index"], refusal["field"]) == (1, "message_id")
    assert why in refusal["reason"]
    assert len(refusal["message_id"]) <= 257  # a shortened, encodable copy
    assert sorted(m.id for m in buffered(r)) == ["g1", "g2"]


@pytest.mark.parametrize(
    "mid",
    [
        "1250000000000000001",  # a Discord snowflake
        "self-12-3",  # the second host's own messages
        "hermes:0b6f2a1e-77f3-4c1e-9d41-1c2f3a4b5c6d:17:user",
        "Seraphina the Brave_1718000000000_3",  # st-qdrant-memory: <character>_<ms>_<index>
        "Dr. Smith (v2) — ☕ 雪乃!_1718000000000.5_12",
        "st:Seraphina - 2024-5-20@15h30m45s.jsonl:7",
        "x" * 256,
    ],
)
def test_every_id_real_clients_send_is_stored(client: TestClient, r: redis.Redis, mid: str) -> None:
    answer = client.post("/save", json={"bot": "mythos", "messages": [message(mid)]})
    assert answer.json() == {"accepted": 1, "duplicates": 0, "skipped": 0}
    assert [m.id for m in buffered(r)] == [mid]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("user_id", "u" * 257),
        ("discord_user_id", "1\n2"),
        ("channel_id", "c" * 1_000_000),  # a 1 MB id, once returned in a 47 MB recall
        ("guild_id", "g\x00"),
        ("conversation_id", "t" * 257),
    ],
)
def test_caps_on_the_other_ids_refuse_that_message(
    make_app: MakeApp, r: redis.Redis, field: str, value: str
) -> None:
    with client_for(make_app(MEMORY_POOL_MAX_CHARS=2_000_000)) as client:
        items = [message("g1"), message("p1", **{field: value})]
        answer = client.post("/save", json={"bot": "mythos", "messages": items}).json()
    assert answer["accepted"] == 1 and answer["refused"] == 1
    assert answer["refusals"][0]["field"] == field
    assert [m.id for m in buffered(r)] == ["g1"]


def test_a_refusal_comes_before_the_too_short_skip(client: TestClient, r: redis.Redis) -> None:
    items = [message("x,y", "hi"), message("ok", "hi")]
    answer = client.post("/save", json={"bot": "mythos", "messages": items}).json()
    assert answer == {
        "accepted": 0, "duplicates": 0, "skipped": 1, "refused": 1,
        "refusals": [{"index": 0, "message_id": "x,y", "field": "message_id",
                      "reason": "message_id contains a comma (messageIds are comma-separated)"}],
    }  # fmt: skip


def test_a_request_of_refused_messages_stores_nothing(client: TestClient, r: redis.Redis) -> None:
    before = snapshot(r)
    items = [message("a,b"), message("c", ts=1718000000000000)]
    answer = client.post("/save", json={"bot": "mythos", "messages": items}).json()
    assert (answer["accepted"], answer["refused"]) == (0, 2)
    assert snapshot(r) == before


# --- names and text ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "speaker"),
    [
        ("Alex\nMythos: I confess everything", "Alex Mythos: I confess everything"),
        ("  Bea\r\n\t(away)\x00 ", "Bea (away)"),
        ("n" * 300, "n" * 128),
    ],
)
def test_speaker_names_become_one_line(
    client: TestClient, r: redis.Redis, given: str, speaker: str
) -> None:
    item = message("m1", speaker_name=given, user_id="222")
    assert client.post("/save", json={"bot": "mythos", "messages": [item]}).status_code == 202
    assert [m.speaker for m in buffered(r)] == [speaker]


def test_lone_surrogates_in_text_and_names_become_replacement_characters(
    client: TestClient, r: redis.Redis
) -> None:
    # A 500 before, and the connection was dropped.
    raw = (
        '{"message_id": "m1", "ts": %d, "text": "broken \\ud800 text", "speaker_name": "A\\udfff"}'
    )
    response = post_raw(client, raw % BASE_TS)
    assert response.status_code == 202, response.text
    [kept] = buffered(r)
    assert (kept.text, kept.speaker) == ("broken \ufffd text", "A\ufffd")


def test_nul_and_control_characters_leave_the_text(client: TestClient, r: redis.Redis) -> None:
    item = message("m1", "line one\x00\x07\nline\ttwo\r\nend\x1b[0m \x85")
    assert client.post("/save", json={"bot": "mythos", "messages": [item]}).status_code == 202
    assert [m.text for m in buffered(r)] == ["line one\nline\ttwo\r\nend[0m"]


# --- request-level problems stay 4xx ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (
            {"bot": "mythos", "source": "s" * 65, "messages": [message("m1")]},
            422,
            "invalid_request",
        ),
        ({"bot": "mythos", "source": "irc\n", "messages": [message("m1")]}, 422, "invalid_request"),
        ({"bot": "b" * 1024, "messages": [message("m1")]}, 400, "invalid_agent_name"),
        ({"bot": "a" * 252, "messages": [message("m1")]}, 400, "invalid_agent_name"),
        ({"bot": "bell\x07", "messages": [message("m1")]}, 400, "invalid_agent_name"),
    ],
    ids=["long-source", "control-source", "1024-bot", "collection-256", "control-bot"],
)
def test_request_level_problems_refuse_the_request(
    make_app: MakeApp, r: redis.Redis, body: dict[str, Any], status: int, code: str
) -> None:
    with client_for(make_app(agents(accept_unlisted=True))) as client:
        before = snapshot(r)
        response = client.post("/save", json=body)
        assert response.status_code == status, response.text
        assert is_error_shape(response.json()) and response.json()["error"] == code
        assert snapshot(r) == before


def test_the_longest_writable_collection_name_is_accepted(make_app: MakeApp) -> None:
    with client_for(make_app(agents(accept_unlisted=True))) as client:
        response = client.post("/save", json={"bot": "a" * 251, "messages": [message("m1")]})
    assert response.status_code == 202  # mem_ + 251 = Qdrant's 255


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/agents/{bot}/stats", None),
        ("post", "/agents/{bot}/flush", None),
        ("post", "/agents/{bot}/known-ids", {"message_ids": ["m1"]}),
        ("post", "/agents/{bot}/delete", {"message_id": "m1"}),
        ("post", "/retrieve", {"bot": "{bot}", "query_text": "hello"}),
    ],
)
def test_an_unwritable_agent_is_refused_on_every_endpoint(
    make_app: MakeApp, method: str, path: str, body: dict[str, Any] | None
) -> None:
    bot = "b" * 1024
    payload = json.loads(json.dumps(body).replace("{bot}", bot)) if body else None
    with client_for(make_app(agents(accept_unlisted=True))) as client:
        response = client.request(method, path.replace("{bot}", bot), json=payload)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_agent_name"
    assert len(response.json()["detail"]) < 300  # the name is not repeated whole


# --- deletes, known ids and exclusions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/agents/mythos/delete", {"message_id": "x,y"}, "message_id"),
        ("/agents/mythos/delete", {"message_id": " s1 "}, "message_id"),
        ("/agents/mythos/delete", {"user_id": "u" * 257}, "user_id"),
        ("/agents/mythos/delete", {"source": "discord", "channel_id": "c\x00"}, "channel_id"),
        ("/agents/mythos/known-ids", {"message_ids": ["s1", " s1 "]}, "message_ids[1]"),
        ("/agents/mythos/known-ids", {"message_ids": ["x,y"]}, "message_ids[0]"),
    ],
)
def test_deletes_and_known_ids_name_the_unstorable_field(
    client: TestClient, r: redis.Redis, path: str, body: dict[str, Any], field: str
) -> None:
    before = snapshot(r)
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_request"
    assert response.json()["detail"].startswith(f"{field}: ")
    assert snapshot(r) == before  # no tombstone for an id that can never be stored


def test_retrieve_ignores_exclusion_ids_nothing_can_hold(client: TestClient) -> None:
    raw = (
        '{"bot": "mythos", "query_text": "lighthouse \\ud800",'
        ' "exclude_message_ids": ["x,y", " s1 ", "a\\u0000", "\\ud800", "%s", "ok"]}'
    ) % ("z" * 300)
    response = client.post("/retrieve", content=raw.encode(), headers=JSON)
    assert response.status_code == 200, response.text
    assert response.json() == {"hits": [], "formatted": ""}


@pytest.mark.parametrize(
    "raw_field",
    ['"since": 1' + "0" * 400, '"until": -1' + "0" * 400, '"since": 1e400', '"until": "x"'],
)
def test_impossible_time_filters_are_422(client: TestClient, raw_field: str) -> None:
    raw = f'{{"bot": "mythos", "query_text": "lighthouse", {raw_field}}}'
    response = client.post("/retrieve", content=raw.encode(), headers=JSON)
    assert response.status_code == 422, response.text
    assert is_error_shape(response.json())


def test_a_lone_surrogate_keeps_the_connection_usable(make_app: MakeApp, r: redis.Redis) -> None:
    # Before: a 500, and the server dropped the connection, so the next request on it failed.
    raw = '{"bot": "mythos", "messages": [{"message_id": "m1", "text": "lost \\ud800 half"}]}'
    with served(make_app()) as (host, port), httpx.Client(base_url=f"http://{host}:{port}") as http:
        first = http.post("/save", content=raw.encode(), headers=JSON)
        second = http.post("/retrieve", json={"bot": "mythos", "query_text": "lost 😀"})
    assert first.status_code == 202, first.text
    assert second.status_code == 200, second.text
    assert [m.text for m in buffered(r)] == ["lost \ufffd half"]
