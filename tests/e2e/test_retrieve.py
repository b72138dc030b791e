"""End to end: POST /retrieve against chunks written through /save and by st-qdrant-memory.

One running stack serves the module; every scenario writes to its own agent (collection), so the
bag-of-words scores of one scenario never leak into another's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from shared.agents import AgentConfig, Agents
from shared.runtime import Runtime
from shared.store.interface import PointToWrite
from tests.support.embedding_server import EmbeddingServer, embed_text
from tests.support.redis_server import RedisServer
from tests.support.st_memory import BASE_TS, DAY, expected_block, js_percent, message, st_chunk
from tests.support.stack import Stack, running_stack, stack_settings
from tests.support.store_stacks import fresh_services

PICNIC_QUERY = "the orchard picnic with apples and the wooden ladder"
# label -> (source, channel_id, guild_id, conversation_id, day)
PICNIC_CHUNKS: dict[str, tuple[str, str | None, str | None, str | None, int]] = {
    "alpha": ("discord", "c1", "g1", None, 0),
    "bravo": ("discord", "c2", "g1", None, 1),
    "charlie": ("discord", "c3", "g2", None, 2),
    "delta": ("hermes", None, None, "h1", 3),
    "echo": ("discord", "c4", None, None, 4),  # a DM: no guild
}


# --------------------------------------------------------------------------- fixtures


def _agents(recall: str) -> Agents:
    return Agents(
        [
            AgentConfig(name=name, self_speaker="Mythos", legacy_user_label="Alex", recall=recall)
            for name in ("mythos", "places", "crowd", "tavern", "bells", "twins")
        ]
        + [AgentConfig(name="polaris", self_speaker="Polaris", recall=recall)],
        accept_unlisted=False,
    )


# Every rule of recall holds the same with the legs fused (hybrid, the default) and dense alone.
@pytest.fixture(scope="module", params=["hybrid", "dense"])
def stack(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    embedding_server: EmbeddingServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("retrieve")
    services = fresh_services(redis_server, embedding_server)
    settings = stack_settings(services.redis_url, services.embedding_url, folder)
    with running_stack(settings, _agents(request.param)) as running:
        yield running


@pytest.fixture(scope="module")
def picnic(stack: Stack) -> dict[str, tuple[str, dict[str, Any]]]:
    """Five two-message chunks of agent mythos, one per place/source/day: label -> (id, payload)."""
    for label, (source, channel, guild, conversation, day) in PICNIC_CHUNKS.items():
        ts = BASE_TS + day * DAY
        where = {"channel": channel, "guild": guild, "conversation": conversation}
        messages = [
            message(
                f"{label}-1",
                f"remember the orchard picnic with apples and the wooden ladder, part {label}",
                ts,
                **where,
            ),
            message(
                f"{label}-2",
                f"yes, that orchard picnic\nand the ladder story {label} still make me smile",
                ts + 60_000,
                self_=True,
                **where,
            ),
        ]
        body: dict[str, Any] = {"bot": "mythos", "messages": messages}
        if source != "discord":
            body["source"] = source
        assert stack.save(body)["accepted"] == 2
    stack.flush("mythos")
    stored = dict(stack.runtime.store.scroll_payloads("mem_mythos"))
    by_label = {p["messageIdList"][0].split("-")[0]: (pid, p) for pid, p in stored.items()}
    assert sorted(by_label) == sorted(PICNIC_CHUNKS)
    assert all(p["messageCount"] == 2 for _, p in by_label.values())
    return by_label


# --------------------------------------------------------------------------- helpers


def retrieve(stack: Stack, **body: Any) -> dict[str, Any]:
    response = stack.client.post("/retrieve", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == {"hits", "formatted"}
    for hit in answer["hits"]:
        assert set(hit) == {"id", "score", "payload", "fused_score"}
    hybrid = stack.runtime.agents.get(body["bot"]).recall == "hybrid"
    # hybrid hits come in fused order, each with its dense cosine as `score`; dense ones by score
    order = "fused_score" if hybrid else "score"
    scores = [hit[order] for hit in answer["hits"]]
    # time words put their window's hits first: two runs, each in that order (only the time
    # words tests send `now`)
    runs = 1 + sum(a < b for a, b in pairwise(scores))
    assert runs <= (2 if "now" in body else 1)
    fused = [hit["fused_score"] is not None for hit in answer["hits"]]
    assert all(fused) if hybrid else not any(fused)
    return answer


def labels(answer: Mapping[str, Any]) -> list[str]:
    return [hit["payload"]["messageIds"].split(",")[0].split("-")[0] for hit in answer["hits"]]


def message_ids(hit: Mapping[str, Any]) -> set[str]:
    return {part.strip() for part in hit["payload"]["messageIds"].split(",")}


def st_point(text: str, dims: int, **payload: Any) -> PointToWrite:
    """A point as st-qdrant-memory writes it: random UUID, its payload fields only."""
    return PointToWrite(
        id=str(uuid.uuid4()), vector=embed_text(text, dims), payload={"text": text, **payload}
    )


def ensure_collection(stack: Stack, name: str) -> int:
    dims = stack.runtime.embedder.dimensions()
    stack.runtime.store.ensure_collection(name, size=dims, model=stack.runtime.embedder.model)
    return dims


# --------------------------------------------------------------------------- the answer


def test_discord_plugin_body_gets_hits_and_the_exact_block(
    stack: Stack, picnic: dict[str, tuple[str, dict[str, Any]]]
) -> None:
    # The plugin's exact body: no limit, threshold or filters; an excluded id matches only the
    # second message of chunk bravo.
    response = stack.client.post(
        "/retrieve",
        json={
            "bot": "mythos",
            "query_text": PICNIC_QUERY,
            "exclude_message_ids": ["bravo-2", "123456789012345678"],
        },
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    answer = retrieve(
        stack,
        bot="mythos",
        query_text=PICNIC_QUERY,
        exclude_message_ids=["bravo-2", "123456789012345678"],
    )
    assert response.json() == answer

    assert sorted(labels(answer)) == ["alpha", "charlie", "delta", "echo"]
    stored = dict(picnic.values())
    for hit in answer["hits"]:
        assert hit["payload"] == stored[hit["id"]]  # the payload as stored, every field
        assert 0.3 <= hit["score"] <= 1.0
    assert answer["formatted"] == expected_block(answer["hits"])

    # One hit spelled out in full: newlines become spaces, speakers as stored.
    one = retrieve(stack, bot="mythos", query_text=PICNIC_QUERY, limit=1, channel_id="c1")
    (hit,) = one["hits"]
    assert one["formatted"] == (
        "\n[Past chat memories]\n\n"
        '• Conversation (Alex, Mythos): "[2024-06-10] '
        "Alex: remember the orchard picnic with apples and the wooden ladder, part alpha "
        "Mythos: yes, that orchard picnic and the ladder story alpha still make me smile"
        f'" (score: {js_percent(hit["score"])}%)\n\n'
    )


def test_limit_caps_the_hits(stack: Stack, picnic: dict[str, tuple[str, dict[str, Any]]]) -> None:
    everything = retrieve(stack, bot="mythos", query_text=PICNIC_QUERY, limit=10)
    assert sorted(labels(everything)) == sorted(PICNIC_CHUNKS)
    two = retrieve(stack, bot="mythos", query_text=PICNIC_QUERY, limit=2)
    assert [h["id"] for h in two["hits"]] == [h["id"] for h in everything["hits"][:2]]
    assert two["formatted"] == expected_block(two["hits"])
    assert two["formatted"].count("• Conversation") == 2


def test_score_threshold(stack: Stack, picnic: dict[str, tuple[str, dict[str, Any]]]) -> None:
    default = retrieve(stack, bot="mythos", query_text=PICNIC_QUERY)
    assert default["hits"]  # so the thresholds below are what empties the answer
    high = retrieve(stack, bot="mythos", query_text=PICNIC_QUERY, score_threshold=0.99)
    assert high == {"hits": [], "formatted": ""}
    # A threshold between the scores keeps exactly the hits at or above it.
    scores = [
        hit["score"] for hit in retrieve(stack, bot="mythos", query_text=PICNIC_QUERY)["hits"]
    ]
    assert scores[0] > scores[-1]
    middle = (scores[0] + scores[-1]) / 2
    kept = retrieve(stack, bot="mythos", query_text=PICNIC_QUERY, score_threshold=middle)
    assert [h["score"] for h in kept["hits"]] == [s for s in scores if s >= middle]
    assert 0 < len(kept["hits"]) < len(scores)
    # Unrelated words score below the default 0.3.
    assert retrieve(stack, bot="mythos", query_text="quantum tax spreadsheets") == {
        "hits": [],
        "formatted": "",
    }


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, ["alpha", "bravo", "charlie", "delta", "echo"]),
        ({"source": "hermes"}, ["delta"]),
        ({"source": "discord"}, ["alpha", "bravo", "charlie", "echo"]),
        ({"source": "telegram"}, []),
        ({"channel_id": "c2"}, ["bravo"]),
        ({"guild_id": "g1"}, ["alpha", "bravo"]),
        ({"guild_id": "g2"}, ["charlie"]),
        # inclusive bounds on the chunk's `timestamp` (its oldest message), in epoch ms
        ({"since": BASE_TS + DAY, "until": BASE_TS + 3 * DAY}, ["bravo", "charlie", "delta"]),
        ({"since": BASE_TS + DAY + 1, "until": BASE_TS + 3 * DAY - 1}, ["charlie"]),
        ({"since": BASE_TS + 3 * DAY}, ["delta", "echo"]),
        ({"until": BASE_TS}, ["alpha"]),
        ({"until": BASE_TS - 1}, []),
        ({"source": "discord", "guild_id": "g1", "since": BASE_TS + 1}, ["bravo"]),
    ],
)
def test_filters(
    stack: Stack,
    picnic: dict[str, tuple[str, dict[str, Any]]],
    filters: dict[str, Any],
    expected: list[str],
) -> None:
    answer = retrieve(stack, bot="mythos", query_text=PICNIC_QUERY, limit=10, **filters)
    assert sorted(labels(answer)) == expected
    assert answer["formatted"] == expected_block(answer["hits"])


def test_time_words_put_their_day_first(
    stack: Stack, picnic: dict[str, tuple[str, dict[str, Any]]]
) -> None:
    """bravo's day is 2024-06-11, last by its words; `now` a month later; filters still hold."""
    query, now = f"{PICNIC_QUERY} on June 11th", BASE_TS + 30 * DAY
    plain = retrieve(stack, bot="mythos", query_text=query, limit=10, now=now, time_words=False)
    assert labels(plain)[-1] == "bravo"
    timed = retrieve(stack, bot="mythos", query_text=query, limit=10, now=now)
    assert labels(timed) == ["bravo"] + [label for label in labels(plain) if label != "bravo"]
    assert timed["formatted"] == expected_block(timed["hits"])
    # without `now`, the server's clock: in its past June 11th is another year's
    assert labels(retrieve(stack, bot="mythos", query_text=query, limit=10)) == labels(plain)
    guild = retrieve(stack, bot="mythos", query_text=query, now=now, guild_id="g1")
    assert labels(guild)[0] == "bravo"
    assert sorted(labels(guild)) == ["alpha", "bravo"]
    one = retrieve(stack, bot="mythos", query_text=query, now=now, limit=1)
    assert labels(one) == ["bravo"]


def test_filters_take_numeric_ids(stack: Stack) -> None:
    # Guild and channel ids are strings in the payload; a client sending numbers still matches.
    stack.save(
        {
            "bot": "places",
            "messages": [
                message(
                    "foxtrot-1",
                    f"{PICNIC_QUERY}, foxtrot",
                    BASE_TS + 9 * DAY,
                    channel="42",
                    guild="77",
                )
            ],
        }
    )
    stack.flush("places")
    answer = retrieve(stack, bot="places", query_text=PICNIC_QUERY, channel_id=42, guild_id=77)
    assert labels(answer) == ["foxtrot"]
    assert answer["hits"][0]["payload"]["channelId"] == "42"


# --------------------------------------------------------------------------- exclusion


def test_excluded_top_hits_are_refilled_for_memory_pool_chunks(stack: Stack) -> None:
    lamp = "the lighthouse keeper polished the brass lamp before the storm"
    stack.save(
        {
            "bot": "crowd",
            "messages": [
                message(
                    f"lamp{n}-{k}",
                    f"{lamp}, night {n} part {k}",
                    BASE_TS + n * 1000 + k,
                    conversation=f"night{n}",
                )
                for n in range(30)
                for k in (1, 2)
            ],
        }
    )
    stack.flush("crowd")
    assert stack.runtime.store.count("mem_crowd") == 30

    ranked = retrieve(stack, bot="crowd", query_text=lamp, limit=30)
    assert len(ranked["hits"]) == 30
    top = ranked["hits"][:25]
    # Exclude one message of each top chunk (alternately the first and the second).
    excluded = [sorted(message_ids(hit))[i % 2] for i, hit in enumerate(top)]
    answer = retrieve(stack, bot="crowd", query_text=lamp, exclude_message_ids=excluded, limit=5)
    assert len(answer["hits"]) == 5
    assert [h["id"] for h in answer["hits"]] == [h["id"] for h in ranked["hits"][25:]]
    for hit in answer["hits"]:
        assert message_ids(hit).isdisjoint(excluded)
    assert answer["formatted"] == expected_block(answer["hits"])

    # Fewer eligible chunks than the limit: all of them, nothing excluded.
    all_but_two = [sorted(message_ids(hit))[0] for hit in ranked["hits"][:28]]
    rest = retrieve(stack, bot="crowd", query_text=lamp, exclude_message_ids=all_but_two)
    assert [h["id"] for h in rest["hits"]] == [h["id"] for h in ranked["hits"][28:]]


def test_st_qdrant_memory_points_are_recalled_formatted_and_excluded(stack: Stack) -> None:
    dims = ensure_collection(stack, "mem_tavern")
    kite = "Seraphina taught Alex to fly the red kite on the windy hill"
    chunks = []
    for n in range(30):
        day = f"2024-05-{n % 28 + 1:02d}"
        text = f"[{day}]\nAlex: {kite}, afternoon {n}\nSeraphina: again tomorrow {n}"
        ids = [f"Seraphina_{BASE_TS + n}_{n * 3 + i}" for i in range(3)]
        chunks.append(st_point(text, dims, **st_chunk(ids, BASE_TS - n * DAY)))
    legacy_user = st_point(
        f"{kite}, said the user long ago", dims, speaker="user", timestamp=BASE_TS
    )
    legacy_char = st_point(
        f"{kite}, said the character long ago", dims, speaker="character", timestamp=BASE_TS
    )
    stack.runtime.store.upsert("mem_tavern", [*chunks, legacy_user, legacy_char])
    written = {p.id: p.payload for p in [*chunks, legacy_user, legacy_char]}

    ranked = retrieve(stack, bot="tavern", query_text=kite, limit=40)
    assert sorted(h["id"] for h in ranked["hits"]) == sorted(written)
    for hit in ranked["hits"]:
        assert hit["payload"] == written[hit["id"]]  # only their own fields, nothing added
    assert ranked["formatted"] == expected_block(ranked["hits"])
    by_id = {h["id"]: h for h in ranked["hits"]}
    for point, label in ((legacy_user, "Alex said"), (legacy_char, "Character said")):
        hit = by_id[point.id]
        line = f'• {label}: "{point.payload["text"]}" (score: {js_percent(hit["score"])}%)\n\n'
        assert line in ranked["formatted"]

    # Exclude the top 25 chunks by one id each, taken from inside the comma-joined messageIds;
    # nothing server-side can drop them, so recall must over-fetch to fill the limit.
    chunk_hits = [h for h in ranked["hits"] if h["payload"].get("isChunk")]
    excluded = [h["payload"]["messageIds"].split(",")[1] for h in chunk_hits[:25]]
    excluded.append("Seraphina_1")  # a prefix of many ids: whole ids only, never substrings
    answer = retrieve(stack, bot="tavern", query_text=kite, exclude_message_ids=excluded)
    assert len(answer["hits"]) == 5
    eligible = [
        h["id"] for h in ranked["hits"] if h["id"] not in {c["id"] for c in chunk_hits[:25]}
    ]
    assert [h["id"] for h in answer["hits"]] == eligible[:5]
    for hit in answer["hits"]:
        if "messageIds" in hit["payload"]:
            assert message_ids(hit).isdisjoint(excluded)
    assert answer["formatted"] == expected_block(answer["hits"])


def test_mixed_collection_exclusion_covers_both_writers(stack: Stack) -> None:
    """memory-pool chunks and st-qdrant-memory chunks side by side in one collection."""
    bell = "the bronze bell of the mountain chapel rang at dawn"
    stack.save(
        {
            "bot": "bells",
            "messages": [
                message("bell-1", f"{bell} for the wedding", BASE_TS, channel="b1"),
                message(
                    "bell-2",
                    f"{bell} and the wedding guests sang",
                    BASE_TS + 1,
                    self_=True,
                    channel="b1",
                ),
            ],
        }
    )
    stack.flush("bells")
    dims = stack.runtime.embedder.dimensions()
    st_text = f"[2024-06-01]\nAlex: {bell} for the funeral\nSeraphina: quietly"
    st = st_point(st_text, dims, **st_chunk(["st-1", "st-2"], BASE_TS - DAY))
    stack.runtime.store.upsert("mem_bells", [st])

    both = retrieve(stack, bot="bells", query_text=bell)
    assert len(both["hits"]) == 2
    none = retrieve(stack, bot="bells", query_text=bell, exclude_message_ids=["bell-2", "st-2"])
    assert none == {"hits": [], "formatted": ""}
    only_st = retrieve(stack, bot="bells", query_text=bell, exclude_message_ids=["bell-1"])
    assert [h["id"] for h in only_st["hits"]] == [st.id]


def test_texts_differing_only_in_the_date_marker_are_recalled_once(stack: Stack) -> None:
    words = "Alex and Mythos argued about the violet umbrella in the tram"
    stack.save(
        {
            "bot": "twins",
            "messages": [
                message("umb-1", words, BASE_TS, conversation="u1"),
                message("umb-2", words, BASE_TS + 40 * DAY, conversation="u2"),
                message("umb-3", f"{words}, again", BASE_TS + 80 * DAY, conversation="u3"),
            ],
        }
    )
    stack.flush("twins")
    stored = [p for p in stack.payloads("mem_twins") if "umbrella" in p["text"]]
    texts = sorted(p["text"] for p in stored)
    assert texts == [
        f"[2024-06-10]\nAlex: {words}",
        f"[2024-07-20]\nAlex: {words}",
        f"[2024-08-29]\nAlex: {words}, again",
    ]

    answer = retrieve(stack, bot="twins", query_text=words, limit=10)
    umbrella = [h for h in answer["hits"] if "umbrella" in h["payload"]["text"]]
    assert len(umbrella) == 2
    assert sum(h["payload"]["text"].endswith(f"Alex: {words}") for h in umbrella) == 1
    assert answer["formatted"] == expected_block(answer["hits"])
    # The higher-scored twin is the one kept; excluding it lets the other one through.
    kept = next(h for h in umbrella if h["payload"]["text"].endswith(f"Alex: {words}"))
    other = retrieve(
        stack,
        bot="twins",
        query_text=words,
        limit=10,
        exclude_message_ids=[kept["payload"]["messageIds"]],
    )
    twin = [h for h in other["hits"] if h["payload"]["text"].endswith(f"Alex: {words}")]
    assert len(twin) == 1
    assert twin[0]["id"] != kept["id"]


# --------------------------------------------------------------------------- agents and errors


def test_known_agent_without_a_collection(stack: Stack) -> None:
    assert stack.runtime.store.collection("mem_polaris") is None
    answer = retrieve(stack, bot="polaris", query_text="anything at all", exclude_message_ids=["1"])
    assert answer == {"hits": [], "formatted": ""}


def test_unknown_agent_is_404(stack: Stack) -> None:
    response = stack.client.post("/retrieve", json={"bot": "nobody", "query_text": "hello there"})
    assert response.status_code == 404
    body = response.json()
    assert set(body) == {"error", "detail"}
    assert body["error"] == "unknown_agent"
    assert "nobody" in body["detail"]


def test_blank_query_recalls_nothing_but_the_agent_is_still_checked(
    stack: Stack, picnic: dict[str, tuple[str, dict[str, Any]]], embedding_server: EmbeddingServer
) -> None:
    embedding_server.reset_log()
    assert retrieve(stack, bot="mythos", query_text=" \n ") == {"hits": [], "formatted": ""}
    assert embedding_server.requests == []
    response = stack.client.post("/retrieve", json={"bot": "nobody", "query_text": "  "})
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_agent"


def test_a_query_the_provider_refuses_recalls_nothing(
    stack: Stack, picnic: dict[str, tuple[str, dict[str, Any]]], embeddings: EmbeddingServer
) -> None:
    # A content refusal (HTTP 400 about the input) is for good: no memories, not a 500.
    embeddings.reject_inputs_containing("FORBIDDEN")
    answer = retrieve(stack, bot="mythos", query_text=f"{PICNIC_QUERY} FORBIDDEN")
    assert answer == {"hits": [], "formatted": ""}
    assert [r.status for r in embeddings.requests] == [400]
    # An outage is not a refusal: 503, so a client can tell the two apart.
    embeddings.fail_next(500)
    response = stack.client.post("/retrieve", json={"bot": "mythos", "query_text": "fresh words"})
    assert response.status_code == 503
    assert response.json()["error"] == "upstream_unavailable"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"bot": "mythos"}, "query_text"),
        ({"bot": "mythos", "query_text": None}, "query_text"),
        ({"query_text": "hello"}, "bot"),
        ({"bot": "mythos", "query_text": "hi", "limit": 0}, "limit"),
        ({"bot": "mythos", "query_text": "hi", "score_threshold": 2}, "score_threshold"),
        ({"bot": "mythos", "query_text": "hi", "since": "yesterday"}, "since"),
        ({"bot": "mythos", "query_text": "hi", "now": "yesterday"}, "now"),
        ({"bot": "mythos", "query_text": "hi", "now": -1}, "now"),
        ({"bot": "mythos", "query_text": "hi", "now": 1e30}, "now"),
        ({"bot": "mythos", "query_text": "hi", "time_words": "sometimes"}, "time_words"),
    ],
)
def test_bad_bodies_are_422(stack: Stack, body: dict[str, Any], field: str) -> None:
    response = stack.client.post("/retrieve", json=body)
    assert response.status_code == 422, response.text
    answer = response.json()
    assert set(answer) == {"error", "detail"}
    assert answer["error"] == "invalid_request"
    assert field in answer["detail"]


# --------------------------------------------------------------------------- timing and cache


def test_the_query_embedding_is_cached(
    stack: Stack, picnic: dict[str, tuple[str, dict[str, Any]]], embedding_server: EmbeddingServer
) -> None:
    query = "which ladder did we carry to the orchard picnic"
    embedding_server.reset_log()
    first = retrieve(stack, bot="mythos", query_text=query)
    assert len(embedding_server.requests) == 1
    second = retrieve(stack, bot="mythos", query_text=query, limit=3)
    assert len(embedding_server.requests) == 1
    assert first["hits"]
    assert second["hits"] == first["hits"][:3]
    retrieve(stack, bot="mythos", query_text=query + " again")
    assert len(embedding_server.requests) == 2


def test_recall_timeout_is_503_quickly(
    redis_server: RedisServer, embeddings: EmbeddingServer, tmp_path: Path
) -> None:
    # The API alone: recall needs neither Redis nor a worker, and a second worker on the
    # session Redis would compete for the module stack's queue.
    settings = stack_settings(
        redis_server.url, embeddings.url, tmp_path, MEMORY_POOL_RECALL_TIMEOUT=0.5
    )
    runtime = Runtime.build(settings, agents=_agents("hybrid"))
    try:
        with TestClient(create_app(settings, runtime=runtime)) as client:
            embeddings.hang_next(2.0)
            started = time.monotonic()
            response = client.post("/retrieve", json={"bot": "mythos", "query_text": "hello there"})
            elapsed = time.monotonic() - started
            assert response.status_code == 503, response.text
            body = response.json()
            assert set(body) == {"error", "detail"}
            assert body["error"] == "recall_timeout"
            assert 0.4 <= elapsed < 1.5
            # Once the provider answers again, recall works (and the hung call is not stuck).
            time.sleep(max(0.0, 2.2 - (time.monotonic() - started)))
            later = client.post("/retrieve", json={"bot": "mythos", "query_text": "hello again"})
            assert later.status_code == 200, later.text
            assert later.json() == {"hits": [], "formatted": ""}
    finally:
        runtime.close()


# --------------------------------------------------------------------------- OpenAPI


def test_openapi_documents_retrieve(stack: Stack) -> None:
    schema = stack.client.get("/openapi.json").json()
    operation = schema["paths"]["/retrieve"]["post"]
    assert {"200", "404", "422", "503"} <= set(operation["responses"])
    for status in ("404", "422", "503"):
        ref = operation["responses"][status]["content"]["application/json"]["schema"]["$ref"]
        assert ref == "#/components/schemas/ErrorResponse"
    request_ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    request = schema["components"]["schemas"][request_ref.rsplit("/", 1)[1]]
    assert set(request["properties"]) == {
        "bot",
        "query_text",
        "exclude_message_ids",
        "limit",
        "score_threshold",
        "source",
        "channel_id",
        "guild_id",
        "since",
        "until",
        "recall",
        "fusion",
        "lexical_threshold",
        "lexical_weight",
        "time_words",
        "now",
    }
    assert sorted(request["required"]) == ["bot", "query_text"]
    # the lexical-only rule is documented where a client reads the threshold
    assert "lexical_threshold" in request["properties"]["score_threshold"]["description"]
    assert request["properties"]["limit"]["default"] == 5
    assert request["properties"]["score_threshold"]["default"] == 0.3
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    answer = schema["components"]["schemas"][ok.rsplit("/", 1)[1]]
    assert set(answer["properties"]) == {"hits", "formatted"}
    error = schema["components"]["schemas"]["ErrorResponse"]
    assert set(error["properties"]) == {"error", "detail"}
