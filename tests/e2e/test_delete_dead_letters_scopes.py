"""Review, on both stores: deletes reach only the deleting agent's letters, by every scope
(message id across sources, user, a conversation by its id), and tombstone what they take."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.agents import AgentConfig, Agents
from shared.state import keys
from tests.e2e.test_edits import CLOCK, RAIN, msg, wait_for
from tests.support.embedding_server import EmbeddingServer
from tests.support.stack import Stack
from tests.support.store_stacks import stack_on
from tests.support.stores import KINDS

RULES: dict[str, Any] = {"idle_flush_seconds": 60, "chunk_max_chars": 1200,
                         "chunk_min_chars": 600}  # fmt: skip
AGENTS = Agents([AgentConfig(name="mythos", **RULES), AgentConfig(name="polaris", **RULES)],
                accept_unlisted=False)  # fmt: skip


@pytest.fixture(params=KINDS)
def stack(
    request: pytest.FixtureRequest, redis_url: str, embeddings: EmbeddingServer, tmp_path: Path
) -> Iterator[Stack]:
    with stack_on(request.param, redis_url, embeddings.url, tmp_path, AGENTS) as running:
        yield running


def tombstoned(stack: Stack, agent: str, source: str, message_id: str) -> bool:
    mark = stack.runtime.redis.get(keys.seen(f"mem_{agent}", source, message_id))
    return mark == keys.TOMBSTONE.encode()


def poisoned(stack: Stack, embeddings: EmbeddingServer) -> None:
    """The same two letters for mythos and polaris, from discord (channel c1) and from hermes
    (conversation s1), each [m1 by user 1 (the refused word), m2 by user 2]."""
    embeddings.reject_inputs_containing("POISON")
    for bot in ("mythos", "polaris"):
        pair = [msg("m1", f"POISON {CLOCK}", 1), msg("m2", RAIN, 2, user="2")]
        assert stack.save({"bot": bot, "messages": pair})["accepted"] == 2
        hermes = [{**m, "conversation_id": "s1", "channel_id": None} for m in pair]
        hermes = [{k: v for k, v in m.items() if v is not None} for m in hermes]
        body = {"bot": bot, "source": "hermes", "messages": hermes}
        assert stack.save(body)["accepted"] == 2
        stack.flush(bot)
    assert len(stack.client.get("/dead-letters").json()["entries"]) == 4


def ids_of(stack: Stack) -> list[tuple[str, list[str]]]:
    """(agent:source, message ids) of every letter, waiting or queued."""
    _, entries = stack.runtime.dead_letters.list()
    return sorted((f"{e.agent}:{e.payload['source']}", e.payload["messageIdList"])
                  for e in entries)  # fmt: skip


def delete(stack: Stack, body: dict[str, Any]) -> dict[str, Any]:
    response = stack.client.post("/agents/mythos/delete", json=body)
    assert response.status_code == 200, response.text
    return response.json()


UNTOUCHED = [("polaris:discord", ["m1", "m2"]), ("polaris:hermes", ["m1", "m2"])]


@pytest.mark.parametrize(
    ("scope", "changed", "mythos_left", "gone"),
    [
        ({"message_id": "m1"}, 2, [("mythos:discord", ["m2"]), ("mythos:hermes", ["m2"])],
         [("discord", "m1"), ("hermes", "m1")]),
        ({"user_id": "2"}, 2, [("mythos:discord", ["m1"]), ("mythos:hermes", ["m1"])],
         [("discord", "m2"), ("hermes", "m2")]),
        ({"source": "hermes", "conversation_id": "s1"}, 1, [("mythos:discord", ["m1", "m2"])],
         [("hermes", "m1"), ("hermes", "m2")]),
        ({"source": "hermes", "conversation_id": "s2"}, 0,
         [("mythos:discord", ["m1", "m2"]), ("mythos:hermes", ["m1", "m2"])], []),
    ],
    ids=["message-id", "user", "conversation", "another-conversation"],
)  # fmt: skip
def test_a_delete_reaches_its_own_agents_letters_only(
    stack: Stack,
    embeddings: EmbeddingServer,
    scope: dict[str, Any],
    changed: int,
    mythos_left: list[tuple[str, list[str]]],
    gone: list[tuple[str, str]],
) -> None:
    poisoned(stack, embeddings)
    result = delete(stack, scope)
    assert result["deleted_dead_letters"] == changed
    assert ids_of(stack) == sorted([*mythos_left, *UNTOUCHED])
    for source, mid in gone:
        assert tombstoned(stack, "mythos", source, mid)
    for source in ("discord", "hermes"):
        for mid in ("m1", "m2"):
            assert not tombstoned(stack, "polaris", source, mid)
            if (source, mid) not in gone:
                assert not tombstoned(stack, "mythos", source, mid)


def test_a_channel_delete_reaches_a_conversation_keyed_by_its_id(stack: Stack) -> None:
    """Review: messages sent with both a conversation id and a channel form the conversation
    of their id, and their chunks carry the channel. A delete of the channel removed those
    chunks, but not the conversation's buffered messages (looked for under the channel's key)
    nor its emptied ones: written later, they came back."""

    def sent(mid: str, text: str, n: int) -> dict[str, Any]:
        return {**msg(mid, text, n), "conversation_id": "s1"}

    body = {"bot": "mythos", "messages": [sent("m1", CLOCK, 1), sent("m2", RAIN, 2)]}
    assert stack.save(body)["accepted"] == 2
    stack.flush("mythos")  # one closed chunk, written
    body = {"bot": "mythos", "messages": [sent("m3", f"{CLOCK} again", 3)]}
    assert stack.save(body)["accepted"] == 1  # buffered
    assert stack.save({"bot": "mythos", "messages": [sent("m1", "ok", 1)]})["edited"] == 1
    wait_for(lambda: stack.runtime.redis.hlen(keys.edits("mem_mythos")) == 0)  # m1 emptied
    result = delete(stack, {"source": "discord", "channel_id": "c1"})
    assert (result["deleted_points"], result["deleted_buffered"]) == (1, 1), result
    back = stack.save({"bot": "mythos", "messages": [sent("m1", f"{RAIN} back", 1)]})
    assert "edited" not in back  # deleted: an edit back stores nothing
    stack.flush("mythos")
    assert list(stack.runtime.store.scroll_payloads("mem_mythos")) == []
    assert all(tombstoned(stack, "mythos", "discord", mid) for mid in ("m1", "m2", "m3"))
