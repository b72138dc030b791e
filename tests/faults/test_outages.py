"""Qdrant or Redis gone for a while under load, then back: every accepted message once."""

from __future__ import annotations

from shared.format.naming import collection_name
from shared.state import keys
from tests.support.cluster import Cluster, Conversations, assert_exactly_once, wait_until


def _workers_logged(cluster: Cluster, text: str) -> bool:
    return any(text in worker.log_since_mark() for worker in cluster.workers)


def _all_logged(cluster: Cluster, text: str) -> bool:
    return all(text in proc.log_since_mark() for proc in cluster.processes())


def test_qdrant_down_for_a_while_loses_and_doubles_nothing(cluster: Cluster) -> None:
    chat = Conversations("qdrant_outage", channels=6)
    for _ in range(15):
        chat.turn(cluster.api)
    cluster.qdrant.stop()
    try:
        for _ in range(15):
            chat.turn(cluster.api)  # /save needs only Redis
        assert cluster.api.get("/health").json()["qdrant"]["ok"] is False
        wait_until(lambda: _workers_logged(cluster, "Qdrant cannot be reached"), 10,
                   "a flush to meet the outage")  # fmt: skip
    finally:
        cluster.qdrant.start()
    for _ in range(5):
        chat.turn(cluster.api)
    cluster.flush("qdrant_outage", timeout=30)

    assert chat.statuses == {202: 6 * 35}
    assert_exactly_once(cluster.stored_ids("qdrant_outage"), chat.sent)


def test_redis_killed_under_load_keeps_every_acknowledged_message(cluster: Cluster) -> None:
    chat = Conversations("redis_crash", channels=6)
    for _ in range(12):
        chat.turn(cluster.api)
    wait_until(lambda: cluster.stored_ids("redis_crash"), 10, "the workers to be writing")
    for _ in range(3):
        chat.turn(cluster.api)
    acked_before_crash = set(chat.acked)
    cluster.redis.stop(kill=True)  # SIGKILL in the middle of flushes: no shutdown, no rewrite
    try:
        for _ in range(3):
            chat.turn(cluster.api)
        assert chat.statuses[503] == 6 * 3  # /save refuses while Redis is down
        assert cluster.api.get("/health").json()["redis"]["ok"] is False
        wait_until(lambda: _all_logged(cluster, "Connection refused"), 10, "all to notice")
    finally:
        cluster.redis.start()  # same port, same folder: the AOF is replayed

    # Nothing acknowledged was lost: Redis still knows every id it answered 202 for.
    client = cluster.api.app.state.runtime.redis
    pipe = client.pipeline(transaction=False)
    for message_id in sorted(acked_before_crash):
        pipe.exists(keys.seen(collection_name("redis_crash"), "discord", message_id))
    assert all(pipe.execute())

    for _ in range(12):  # the plugin's windows re-send what was refused
        chat.turn(cluster.api)
    cluster.flush("redis_crash", timeout=30)

    assert chat.acked == chat.sent
    assert_exactly_once(cluster.stored_ids("redis_crash"), chat.sent)
    # Workers and the scheduler came back by themselves: new work still gets done.
    later = Conversations("after_crash", channels=2)
    for _ in range(10):
        later.turn(cluster.api)
    cluster.flush("after_crash", timeout=20)
    assert_exactly_once(cluster.stored_ids("after_crash"), later.sent)
    assert all(proc.alive for proc in cluster.processes())
    for worker in cluster.workers:  # each consumer re-established its broker connection
        wait_until(lambda w=worker: "Connected to redis" in w.log_since_mark(), 10, worker.name)
