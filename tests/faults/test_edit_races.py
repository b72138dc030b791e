"""Edits racing a killed worker (#25): a message edited while the flush of its chunk is in
flight, or while the worker rewriting its written chunk is SIGKILLed, ends in exactly one point
with its last text, and no point keeps a text it no longer has.

The flush or the rewrite is caught inside its Qdrant upsert (held before or after the points
are applied: the embedding is done by then), so the test knows which worker to kill, and a
worker is started in its place. A dead rewriter keeps the agent's rewrite lock (120 s) and the
marker of its queued task (60 s) until they expire; these tests run both down, as if that time
had passed, instead of waiting for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from shared.format.naming import collection_name
from shared.state import keys
from tests.support.cluster import (
    START_TIMEOUT_S,
    Cluster,
    Proc,
    assert_exactly_once,
    discord_message,
    wait_until,
)

COUNT = 12  # about 100 characters each: closed chunks, then an open one
EDITED = 1  # in the first closed chunk
HANG = 30.0  # a held upsert outlasts the test; killing its worker ends it
EDITS_DONE = re.compile(r"Task memory_pool\.apply_edits\[[^]]+\] succeeded")
UPSERT = pytest.mark.parametrize(
    "before_apply", [True, False], ids=["before-upsert", "during-upsert"]
)


def text(n: int, version: str) -> str:
    return f"message {n} version {version}: the harbour lights were {n} miles away and the tide"


def old(n: int, version: str = "first") -> str:
    """A fragment only that version of message `n` has."""
    return f"message {n} version {version}:"


def message(n: int, version: str = "first", *, raw: str | None = None) -> dict[str, Any]:
    return discord_message(n, "c0", text=raw if raw is not None else text(n, version))


def mid(n: int) -> str:
    return str(message(n)["message_id"])


def ids(numbers: Iterable[int]) -> set[str]:
    return {mid(n) for n in numbers}


def save(cluster: Cluster, bot: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    response = cluster.api.post("/save", json={"bot": bot, "messages": messages})
    assert response.status_code == 202, response.text
    return dict(response.json())


def points(cluster: Cluster, bot: str) -> list[dict[str, Any]]:
    with cluster.qdrant.local() as client:
        if not client.collection_exists(collection_name(bot)):
            return []
        found, _ = client.scroll(collection_name(bot), limit=1000, with_payload=True)
    return [dict(point.payload or {}) for point in found]


def stored_ids(cluster: Cluster, bot: str) -> list[str]:
    return [str(i) for p in points(cluster, bot) for i in p["messageIdList"]]


def holders(cluster: Cluster, bot: str, message_id: str) -> list[dict[str, Any]]:
    return [p for p in points(cluster, bot) if message_id in p["messageIdList"]]


def record(chunk: dict[str, Any], message_id: str) -> dict[str, Any]:
    """The message as its point keeps it (what a rebuild reads)."""
    [found] = [r for r in chunk["chunkMessages"] if r["id"] == message_id]
    return dict(found)


def anywhere(cluster: Cluster, bot: str, fragment: str) -> bool:
    return any(fragment in p["text"] for p in points(cluster, bot))


def caught_in_upsert(cluster: Cluster, hung_before: int) -> Proc:
    """The worker whose upsert is the next one held."""
    assert cluster.qdrant.wait_for_hung_upserts(hung_before + 1, timeout=10)
    return cluster.worker_by_client_port(cluster.qdrant.faults.hung_clients[hung_before][1])


def applied(check: Callable[[], object], before_apply: bool) -> None:
    """What a held upsert writes: never there when held before it applies, there soon after
    the hold began otherwise (the hold is taken as the request arrives)."""
    if before_apply:
        assert not check()
    else:
        wait_until(check, 5, "the held upsert to be applied")


def restart(cluster: Cluster, victim: Proc) -> Proc:
    """SIGKILL `victim` (its held upsert never answers it) and start a worker in its place."""
    victim.kill()
    cluster.qdrant.clear_faults()
    fresh = cluster.start_worker()
    wait_until(lambda: "ready." in fresh.log() or not fresh.alive, START_TIMEOUT_S,
               f"{fresh.name} to start")  # fmt: skip
    assert fresh.alive, fresh.log()[-3000:]
    return fresh


def run_down_dead_rewriter(cluster: Cluster, bot: str) -> None:
    """The killed rewriter's lock and queued-task marker, as if their time had run out."""
    client = cluster.api.app.state.runtime.redis
    lock = keys.rewrites_lock(collection_name(bot))
    assert client.pttl(lock) > 0  # held by the dead worker: nobody else rewrites meanwhile
    for key in (lock, keys.edits_queued(collection_name(bot))):
        client.pexpire(key, 1)


def edits_waiting(cluster: Cluster, bot: str) -> int:
    return int(cluster.api.app.state.runtime.redis.hlen(keys.edits(collection_name(bot))))


def written(cluster: Cluster, bot: str) -> dict[str, Any]:
    """All messages saved and flushed (the open chunk too); the edited one's point."""
    save(cluster, bot, [message(n) for n in range(COUNT)])
    cluster.flush(bot, timeout=20)
    assert_exactly_once(stored_ids(cluster, bot), ids(range(COUNT)))
    [chunk] = holders(cluster, bot, mid(EDITED))
    return chunk


def assert_last_text_wins(cluster: Cluster, bot: str, last: str, *gone: str) -> dict[str, Any]:
    """Every message once, the edited one with `last`, no point with any of `gone`."""
    assert_exactly_once(stored_ids(cluster, bot), ids(range(COUNT)))
    [chunk] = holders(cluster, bot, mid(EDITED))
    assert last in chunk["text"], chunk["text"]
    assert record(chunk, mid(EDITED))["text"] == last
    for fragment in gone:
        assert not anywhere(cluster, bot, fragment), fragment
    return chunk


@UPSERT
def test_an_edit_racing_its_chunks_flush_under_a_killed_worker(
    cluster: Cluster, before_apply: bool
) -> None:
    bot = f"edit_in_flush_{'before' if before_apply else 'during'}"
    hung = cluster.qdrant.faults.hung
    cluster.qdrant.hang_upserts(HANG, before_apply=before_apply, times=1)
    save(cluster, bot, [message(n) for n in range(COUNT)])  # closed chunks are due at once
    victim = caught_in_upsert(cluster, hung)
    applied(lambda: anywhere(cluster, bot, old(EDITED)), before_apply)
    # The flush has embedded its chunks and is inside the upsert, its points noted as in
    # flight; the message is still buffered, so the edit changes it there.
    assert save(cluster, bot, [message(EDITED, "second")])["edited"] == 1
    restart(cluster, victim)

    cluster.flush(bot, timeout=25)  # after the dead worker's lease, another takes it over
    assert_last_text_wins(cluster, bot, text(EDITED, "second"), old(EDITED))
    survivors = cluster.flush_tasks_done()
    survivors.pop(victim.name)
    assert sum(survivors.values()) >= 1, survivors


def test_an_emptying_edit_of_an_open_chunks_first_message_during_a_killed_flush(
    cluster: Cluster,
) -> None:
    """A written open chunk's point id came from its first message. That message is edited
    to a too-short text while the flush that closes the chunk is held and its worker killed:
    the old point and the held one both go, and an edit back brings the message back once."""
    bot = "edit_open_first"
    more = COUNT + 6
    written(cluster, bot)
    [open_chunk] = holders(cluster, bot, mid(COUNT - 1))
    first = int(open_chunk["messageIdList"][0].split("-")[1])
    hung = cluster.qdrant.faults.hung
    cluster.qdrant.hang_upserts(HANG, before_apply=False, times=1)
    save(cluster, bot, [message(n) for n in range(COUNT, more)])  # the open chunk closes
    victim = caught_in_upsert(cluster, hung)
    applied(lambda: holders(cluster, bot, mid(COUNT)), before_apply=False)
    assert save(cluster, bot, [message(first, raw="ok")])["edited"] == 1
    restart(cluster, victim)

    cluster.flush(bot, timeout=25)
    assert_exactly_once(stored_ids(cluster, bot), ids(range(more)) - {mid(first)})
    assert not anywhere(cluster, bot, old(first))
    assert save(cluster, bot, [message(first, "back")])["edited"] == 1
    cluster.flush(bot, timeout=20)
    assert_exactly_once(stored_ids(cluster, bot), ids(range(more)))
    [chunk] = holders(cluster, bot, mid(first))
    assert record(chunk, mid(first))["text"] == text(first, "back")


@UPSERT
def test_an_edit_of_a_written_chunk_is_applied_after_its_rewriter_is_killed(
    cluster: Cluster, before_apply: bool
) -> None:
    bot = f"edit_rewrite_{'before' if before_apply else 'during'}"
    before = written(cluster, bot)
    hung = cluster.qdrant.faults.hung
    cluster.qdrant.hang_upserts(HANG, before_apply=before_apply, times=1)
    assert save(cluster, bot, [message(EDITED, "second")])["edited"] == 1
    victim = caught_in_upsert(cluster, hung)  # the apply-edits task, rewriting the chunk
    applied(lambda: anywhere(cluster, bot, old(EDITED, "second")), before_apply)
    assert edits_waiting(cluster, bot) == 1  # done only after the rewrite: still waiting
    fresh = restart(cluster, victim)
    run_down_dead_rewriter(cluster, bot)

    wait_until(lambda: edits_waiting(cluster, bot) == 0, 15, "the edit to be applied again")
    after = assert_last_text_wins(cluster, bot, text(EDITED, "second"), old(EDITED))
    assert after["messageIds"] == before["messageIds"]  # the same chunk, written again
    others = [w for w in cluster.workers if w is not victim and w.alive]
    assert any(EDITS_DONE.search(w.log_since_mark()) for w in [fresh, *others])


def test_two_quick_edits_under_killed_rewriters_end_with_the_last_text(cluster: Cluster) -> None:
    bot = "edit_twice_killed"
    written(cluster, bot)
    hung = cluster.qdrant.faults.hung
    cluster.qdrant.hang_upserts(HANG, before_apply=False, times=1)
    assert save(cluster, bot, [message(EDITED, "second")])["edited"] == 1
    victim = caught_in_upsert(cluster, hung)
    applied(lambda: anywhere(cluster, bot, old(EDITED, "second")), before_apply=False)
    # the next edit while "second" is written and not yet done; then its rewriter dies
    assert save(cluster, bot, [message(EDITED, "third")])["edited"] == 1
    restart(cluster, victim)
    cluster.qdrant.hang_upserts(HANG, before_apply=False, times=1)
    run_down_dead_rewriter(cluster, bot)
    victim = caught_in_upsert(cluster, hung + 1)  # the next rewriter dies too
    applied(lambda: anywhere(cluster, bot, old(EDITED, "third")), before_apply=False)
    restart(cluster, victim)
    run_down_dead_rewriter(cluster, bot)

    wait_until(lambda: edits_waiting(cluster, bot) == 0, 15, "the last edit to be applied")
    assert_last_text_wins(cluster, bot, text(EDITED, "third"), old(EDITED), old(EDITED, "second"))


@UPSERT
def test_an_edit_back_after_an_emptying_edit_whose_rewriter_died_brings_the_message_back(
    cluster: Cluster, before_apply: bool
) -> None:
    """A short edit takes the message out of its written chunk; its rewriter dies; an edit
    back to a long text brings it back, with its first version's speaker and time, once.

    during-upsert: the dead rewriter had taken the message out and never recorded it as
    emptied, so the edit back found no record and the message was lost. before-upsert: the
    chunk still holds it; the edit back must not also bring it back into the buffer."""
    bot = f"edit_empty_{'before' if before_apply else 'during'}"
    before = record(written(cluster, bot), mid(EDITED))
    hung = cluster.qdrant.faults.hung
    cluster.qdrant.hang_upserts(HANG, before_apply=before_apply, times=1)
    assert save(cluster, bot, [message(EDITED, raw="ok")])["edited"] == 1
    victim = caught_in_upsert(cluster, hung)
    applied(lambda: not holders(cluster, bot, mid(EDITED)), before_apply)
    restart(cluster, victim)
    assert save(cluster, bot, [message(EDITED, "third")])["edited"] == 1
    cluster.flush(bot, timeout=20)  # whatever is buffered is written before the rewrite
    run_down_dead_rewriter(cluster, bot)

    wait_until(lambda: edits_waiting(cluster, bot) == 0, 15, "the edits to be applied")
    cluster.flush(bot, timeout=20)  # a message brought back is buffered again
    chunk = assert_last_text_wins(cluster, bot, text(EDITED, "third"), old(EDITED))
    after = record(chunk, mid(EDITED))
    assert (after["speaker"], after["ts"]) == (before["speaker"], before["ts"])
