"""GET /agents/{bot}/export and POST /agents/{bot}/import: the keys of other per-agent
endpoints, buffered messages written first (or a 409 saying how many stay), and bad input as
a 4xx JSON error that changes nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.agents import AgentConfig, Agents, ApiKey
from shared.embedding.bm25 import document_terms, encoding_of
from shared.state import keys
from shared.store.bm25_terms import lacking_terms
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack, running_stack, stack_settings

ALL = "key-for-everything-0001"
MYTHOS = "key-for-mythos-00001"
OTHER = "key-for-other-000001"


@pytest.fixture
def stack(redis_url: str, embeddings: EmbeddingServer, tmp_path: Path) -> Iterator[Stack]:
    agents = Agents(
        [
            AgentConfig(name="mythos", require_key=True),
            AgentConfig(name="other", require_key=True, language="german"),
        ],
        accept_unlisted=False,
        api_keys=[
            ApiKey(name="ops", key=ALL),
            ApiKey(name="bot", key=MYTHOS, agents=("mythos",)),
            ApiKey(name="other", key=OTHER, agents=("other",)),
        ],
    )
    with running_stack(stack_settings(redis_url, embeddings.url, tmp_path), agents) as running:
        running.client.headers["Authorization"] = f"Bearer {MYTHOS}"
        yield running


def message(mid: str, channel: str = "c1") -> dict[str, Any]:
    return {"message_id": mid, "discord_user_id": "1", "speaker_name": "Alex",
            "text": f"message {mid} about the harbour and its whales",
            "ts": 1718000000000 + int(mid), "channel_id": channel}  # fmt: skip


def save(stack: Stack, *mids: str) -> None:
    stack.save({"bot": "mythos", "messages": [message(m, f"c{m}") for m in mids]})


def export(stack: Stack, **params: str) -> list[str]:
    response = stack.client.get("/agents/mythos/export", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return response.text.splitlines()


def import_as_ops(stack: Stack, body: bytes, **params: str) -> Any:
    """POST /agents/mythos/import with the key for every agent (which may name a collection)."""
    return stack.client.post(
        "/agents/mythos/import", params=params, content=body,
        headers={"Authorization": f"Bearer {ALL}"},
    )  # fmt: skip


def error(response: Any, status: int, code: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"}
    if code:
        assert body["error"] == code, body
    return str(body["detail"])


def test_export_writes_buffered_messages_first_then_imports_back(stack: Stack) -> None:
    save(stack, "1", "2")  # both still buffered (open chunks)
    lines = export(stack)
    header = json.loads(lines[0])
    assert header["counts"]["points"] == 2 and header["counts"]["dedupe"] == 2
    ids = {i for line in lines[1:3] for i in json.loads(line)["payload"]["messageIdList"]}
    assert ids == {"1", "2"}
    # into a new collection (a key for every agent may name one): the same pool
    body = ("\n".join(lines) + "\n").encode()
    response = import_as_ops(stack, body, collection="mem_copy")
    assert response.status_code == 200, response.text
    assert response.json() == {"collection": "mem_copy", "points": 2, "reembedded": 0,
                               "refused": 0, "tombstones": 0, "dedupe": 2}  # fmt: skip
    assert stack.runtime.store.count("mem_copy") == 2
    # another collection is not listed as an agent of its own (nothing names it yet)
    assert stack.runtime.redis.hget(keys.NAMES, "mem_copy") is None


def test_an_import_gives_every_point_the_terms_of_its_collections_agent(stack: Stack) -> None:
    """An export without vectors (nor terms) leaves no point to the backfill: each is written
    with terms in the language of the agent whose collection it goes into."""
    save(stack, "1", "2", "3")
    stack.flush("mythos")
    body = ("\n".join(export(stack, vectors="false")) + "\n").encode()
    response = import_as_ops(stack, body, collection="mem_other")
    assert response.status_code == 200 and response.json()["points"] == 3, response.text
    store = stack.runtime.store
    assert lacking_terms(store, "mem_other") == 0
    state = store.collection("mem_other")
    assert state is not None and state.bm25_encoding == encoding_of("german")
    for point in store.iter_points("mem_other"):
        assert point.sparse is not None
        terms = document_terms(str(point.payload["text"]), "german")
        assert sorted(point.sparse[0]) == sorted(terms.indices)


def test_messages_that_cannot_be_written_are_told(
    stack: Stack, embeddings: EmbeddingServer
) -> None:
    save(stack, "1")
    stack.flush("mythos")
    embeddings.fail_next(500, times=1000)
    save(stack, "2")
    response = stack.client.get("/agents/mythos/export", params={"timeout": "1"})
    assert "1 messages are still buffered" in error(response, 409, "messages_buffered")
    lines = export(stack, timeout="1", force="true")
    assert json.loads(lines[0])["counts"]["points"] == 1
    embeddings.clear_faults()


@pytest.mark.parametrize(
    ("method", "key", "status"),
    [("get", None, 401), ("get", OTHER, 403), ("get", "wrong", 401),
     ("post", None, 401), ("post", OTHER, 403)],
)  # fmt: skip
def test_keys_are_those_of_the_agent(
    stack: Stack, method: str, key: str | None, status: int
) -> None:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    stack.client.headers.pop("Authorization")
    if method == "get":
        response = stack.client.get("/agents/mythos/export", headers=headers)
    else:
        response = stack.client.post("/agents/mythos/import", content=b"{}", headers=headers)
    error(response, status)


def test_another_collection_needs_a_key_for_every_agent(stack: Stack) -> None:
    save(stack, "1")
    lines = export(stack)
    body = ("\n".join(lines) + "\n").encode()
    response = stack.client.post(
        "/agents/mythos/import", params={"collection": "mem_other"}, content=body
    )
    error(response, 403)
    assert stack.runtime.store.collection("mem_other") is None


@pytest.mark.parametrize(
    ("body", "params", "says"),
    [
        (b"", {}, "empty"),
        (b"{oops\n", {}, "not JSON"),
        (b"\xff\xfe\n", {}, "UTF-8"),
        (b'{"kind":"tombstone"}\n', {}, "no header"),
        (b"HEADER\n{\"kind\":\"point\",\"id\":\"not-a-uuid\",\"payload\":{}}\n", {}, "UUID"),
        (b"HEADER\n{\"kind\":\"bogus\"}\n", {}, "unknown kind"),
        (b"HEADER\n", {"collection": "bad/name"}, "bad/name"),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_that_changes_nothing(
    stack: Stack, body: bytes, params: dict[str, str], says: str
) -> None:
    save(stack, "1")
    header = export(stack)[0]
    before = stack.runtime.store.count("mem_mythos")
    response = import_as_ops(stack, body.replace(b"HEADER", header.encode()), **params)
    assert says in error(response, 400)
    assert stack.runtime.store.count("mem_mythos") == before


@pytest.mark.parametrize(
    ("member", "value"),
    [("sparse", {"indices": [2**32], "values": [1.0]}),
     ("sparse", {"indices": [5, 5], "values": [1.0, 2.0]}),
     ("sparse", {"indices": [5], "values": [float("nan")]}),
     ("payload", {"text": "x", "deep": [[[[[[[[[[1]]]]]]]]]]}),
     ("payload", {"text": "x", "n": float("nan")})],
    ids=["index-beyond-u32", "repeated-index", "nan-weight", "deep-nesting", "nan-in-payload"],
)  # fmt: skip
def test_junk_in_a_whole_point_line_is_a_400_not_a_500(
    stack: Stack, member: str, value: Any
) -> None:
    """A point with a good vector and junk no store holds reached the store: stored as it was
    on Qdrant Edge (the index 2**32, a repeated index, a NaN weight), a store's error mid-import
    elsewhere (a server's 400, Edge's OverflowError at 2**40), or a 500 (a RecursionError)."""
    save(stack, "1")
    header, line = export(stack)[:2]
    junk = json.dumps({**json.loads(line), member: value})
    if member == "payload":
        junk = junk.replace("[" * 10, "[" * 100_000).replace("]" * 10, "]" * 100_000)
    end = '{"kind":"end","points":1,"tombstones":0,"dedupe":0}'
    body = f"{header}\n{junk}\n{end}\n".encode()
    response = import_as_ops(stack, body, collection="mem_junk")
    assert error(response, 400).startswith("not a memory-pool export: line 2: ")
    assert stack.runtime.store.count("mem_junk") == 0


def test_lone_surrogates_in_a_payload_are_imported_as_replacement_characters(
    stack: Stack,
) -> None:
    save(stack, "1")
    header, line = export(stack)[:2]
    point = json.loads(line)
    broken = json.dumps({**point, "payload": {**point["payload"], "text": "cut \ud83d"}})
    end = '{"kind":"end","points":1,"tombstones":0,"dedupe":0}'
    response = import_as_ops(stack, f"{header}\n{broken}\n{end}\n".encode(),
                             collection="mem_cut")  # fmt: skip
    assert response.status_code == 200, response.text
    [(_, payload)] = stack.runtime.store.scroll_payloads("mem_cut")
    assert payload["text"] == "cut \ufffd"
    assert lacking_terms(stack.runtime.store, "mem_cut") == 0


def test_any_collection_name_a_server_takes_is_imported_into(stack: Stack) -> None:
    """`import points --collection "bad name!"` into serve was a 500: the embedded engine
    refused names that are no plain folder name, though Qdrant takes them."""
    save(stack, "1")
    body = ("\n".join(export(stack)) + "\n").encode()
    response = import_as_ops(stack, body, collection="bad name!")
    assert response.status_code == 200, response.text
    assert stack.runtime.store.count("bad name!") == 1


@pytest.mark.parametrize(
    "body",
    [b'HEADER\n{"kind":"point","id":"0000', b"HEADER\n", b"HEADER\n{oops\n"],
)
def test_a_file_broken_from_its_first_record_leaves_no_collection(
    stack: Stack, body: bytes
) -> None:
    """An import into a new collection whose first record was cut short left an empty
    collection behind (an agent that /health then lists), though nothing was imported."""
    save(stack, "1")
    header = export(stack)[0]
    response = import_as_ops(stack, body.replace(b"HEADER", header.encode()), collection="mem_new")
    error(response, 400)
    assert stack.runtime.store.collection("mem_new") is None


def test_a_collection_of_another_size_is_a_409(stack: Stack) -> None:
    save(stack, "1")
    lines = export(stack)
    stack.runtime.store.ensure_collection("mem_small", size=8, model="text-embedding-3-small")
    response = import_as_ops(stack, ("\n".join(lines) + "\n").encode(), collection="mem_small")
    assert "size 8" in error(response, 409, "import_refused")
    assert stack.runtime.store.count("mem_small") == 0


def test_an_agent_without_a_collection_is_a_404(stack: Stack) -> None:
    response = stack.client.get("/agents/mythos/export")
    error(response, 404, "no_collection")


def test_a_quarantined_conversation_is_told_at_once(stack: Stack) -> None:
    save(stack, "1")
    [conversation] = stack.runtime.buffers.conversations_of("mem_mythos")
    # as a failed flush leaves it: in the quarantine set, which flushes pass by
    stack.runtime.redis.zadd(keys.QUARANTINE, {conversation: int(time.time() * 1000)})
    started = time.monotonic()
    response = stack.client.get("/agents/mythos/export")
    assert "1 messages are still buffered" in error(response, 409, "messages_buffered")
    assert time.monotonic() - started < 10  # not the 60 s the flush may take
