"""Bulk work gives way to recalls: on Qdrant Edge (serve's process) a backfill step waits for
running recalls and, while recalls come, takes at most BULK_SHARE of the time; idle, or on a
server (its recalls run in its own threads), it goes on at once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from shared.agents import AgentConfig
from shared.store import bm25_terms as bm25_store
from shared.store.edge import traffic
from shared.store.edge.engine import EdgeStore
from shared.store.edge.traffic import BULK_SHARE, RecallTraffic
from shared.store.interface import PointToWrite, Store
from tests.support.redis_server import RedisServer
from tests.support.stores import KINDS, open_store
from workers.backfill import backfill
from workers.collections import CollectionGuard

NAME = "mem_busy"
DIM = 8


class FixedEmbedder:
    model = "test-model"

    def dimensions(self) -> int:
        return DIM


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


def test_idle_bulk_work_goes_on_at_once() -> None:
    assert RecallTraffic().give_way(0.5) < 0.05


def test_a_step_waits_for_a_running_recall_then_leaves_recalls_the_most_time() -> None:
    recalls = RecallTraffic()
    started = threading.Event()

    def recall() -> None:
        with recalls.recall():
            started.set()
            time.sleep(0.3)

    thread = threading.Thread(target=recall)
    thread.start()
    started.wait()
    # a step of 0.05 s is at most BULK_SHARE of the time: the 0.3 s wait for the recall
    # counts toward the pause it owes
    waited = recalls.give_way(0.05)
    assert not recalls.running  # it went on only once the recall was done
    thread.join()
    owed = 0.05 * (1 / BULK_SHARE - 1)
    assert owed - 0.05 <= waited < owed + 0.5


def test_waits_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traffic, "MOST_WAIT_SECONDS", 0.2)
    recalls = RecallTraffic()
    with recalls.recall():  # a recall that never ends (this thread holds it)
        waited = recalls.give_way(10.0)
    assert 0.35 <= waited < 0.8  # the wait for it, then the pause, each at most 0.2 s


def test_after_a_recall_the_store_gives_way_on_edge_only(store: Store) -> None:
    store.ensure_collection(NAME, size=DIM, model="test-model")
    assert store.give_way(0.02) < 0.05  # no recall yet
    store.query(NAME, [1.0] * DIM, limit=3, score_threshold=None)
    waited = store.give_way(0.02)
    if isinstance(store, EdgeStore):
        assert waited >= 0.02 * (1 / BULK_SHARE - 1) - 0.02
    else:
        assert waited < 0.05


def test_a_backfill_while_recalls_come_works_a_share_of_the_time(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same backfill, idle and right after a recall: the time its steps took (each one
    handed to give_way) over the time it ran is at most about BULK_SHARE while asked."""
    client = redis.Redis.from_url(redis_server.url)
    agent = AgentConfig(name="busy")
    share = {}
    for mode in ("idle", "asked"):
        client.flushall()
        with open_store("edge", tmp_path / mode) as store:
            store.ensure_collection(NAME, size=DIM, model="test-model")
            store.upsert(NAME, [
                PointToWrite(str(uuid.uuid4()), [1.0] * DIM, {"text": f"Alex: river {i} " * 20})
                for i in range(5_000)
            ])  # fmt: skip
            guard = CollectionGuard(store, FixedEmbedder(), client)  # type: ignore[arg-type]
            steps: list[float] = []
            real = store.give_way
            monkeypatch.setattr(
                store, "give_way", lambda w, real=real, steps=steps: steps.append(w) or real(w)
            )
            if mode == "asked":
                store.query(NAME, [1.0] * DIM, limit=3, score_threshold=None)
            started = time.monotonic()
            report = backfill([agent], store=store, collections=guard, client=client,
                              budget_seconds=1.5)  # fmt: skip
            share[mode] = sum(steps) / (time.monotonic() - started)
            assert len(steps) >= 2 and not report.finished
            assert bm25_store.lacking_terms(store, NAME) == 5_000 - report.points
    client.close()
    # Twice the share, not 1.5x: the wall time around the steps moves with the machine's load
    # (0.0752 against 0.075 failed a loaded CI run); a backfill that never gave way is ~0.6.
    assert share["asked"] <= 2 * BULK_SHARE < 3 * BULK_SHARE < share["idle"], share
