"""Several worker processes on one firehose: every accepted message ends in exactly one chunk."""

from __future__ import annotations

from tests.support.cluster import Cluster, Conversations, assert_exactly_once


def test_three_workers_share_a_firehose_and_store_each_message_once(cluster: Cluster) -> None:
    chat = Conversations("firehose", channels=20)
    for _ in range(60):
        chat.turn(cluster.api)
    cluster.flush("firehose")

    assert chat.statuses == {202: 20 * 60}
    assert chat.acked == chat.sent
    assert_exactly_once(cluster.stored_ids("firehose"), chat.sent)
    done = cluster.flush_tasks_done()
    assert sum(1 for count in done.values() if count) > 1, done
