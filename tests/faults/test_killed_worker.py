"""A worker SIGKILLed in the middle of a flush: another takes over once the lease runs out."""

from __future__ import annotations

import time

import pytest

from tests.support.cluster import LEASE_SECONDS, Cluster, Conversations, assert_exactly_once


@pytest.mark.parametrize("before_apply", [True, False], ids=["before-upsert", "during-upsert"])
def test_worker_killed_mid_flush_is_taken_over_and_nothing_doubles(
    cluster: Cluster, before_apply: bool
) -> None:
    bot = "killed_before" if before_apply else "killed_during"
    cluster.qdrant.hang_upserts(30, before_apply=before_apply, times=1)
    hung_before = cluster.qdrant.faults.hung
    chat = Conversations(bot, channels=1)
    for _ in range(24):  # about 1,700 characters: closed chunks are due at once
        chat.turn(cluster.api)

    assert cluster.qdrant.wait_for_hung_upserts(hung_before + 1, timeout=10)
    # The flush has embedded its chunks and is inside the upsert: kill the worker doing it.
    victim = cluster.worker_by_client_port(cluster.qdrant.faults.hung_clients[-1][1])
    victim.kill()
    killed_at = time.monotonic()
    cluster.qdrant.clear_faults()
    if before_apply:
        assert cluster.stored_ids(bot) == []  # the hung upsert never reached the points
    else:
        assert cluster.stored_ids(bot)  # its points are in; their flush never committed

    cluster.flush(bot, timeout=15)
    taken_over_in = time.monotonic() - killed_at
    assert taken_over_in < LEASE_SECONDS + 10, taken_over_in

    assert_exactly_once(cluster.stored_ids(bot), chat.sent)
    survivors = cluster.flush_tasks_done()
    survivors.pop(victim.name)
    assert sum(survivors.values()) >= 1, survivors  # the take-over ran in another process
