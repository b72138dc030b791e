"""The emptied records' sweep: a record goes once its dedupe mark is gone, and only then."""

from __future__ import annotations

import redis

from shared.state import keys
from shared.state.edits import PendingEdits


def test_records_go_with_their_marks_and_only_theirs(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        pending = PendingEdits(client)
        for collection in ("mem_a", "mem_b:x"):  # a collection key with a ':' in it too
            client.hset(keys.NAMES, collection, collection[4:])  # its first save named it
            emptied = keys.emptied(collection)
            for n in range(300):  # more than a page
                client.hset(emptied, keys.edit_field("discord", f"m{n}"), '{"i":"m"}')
            for n in range(0, 300, 3):  # known (emptied, still remembered)
                client.set(keys.seen(collection, "discord", f"m{n}"), "=o 0 1 c", px=60_000)
            client.set(keys.seen(collection, "discord", "m1"), "deleted")  # the delete's
        assert pending.sweep_emptied(page=100) == 2 * 199
        for collection in ("mem_a", "mem_b:x"):
            left = {f.decode() for f in client.hkeys(keys.emptied(collection))}
            assert left == {"discord:m1", *(f"discord:m{n}" for n in range(0, 300, 3))}
        assert pending.sweep_emptied() == 0
    finally:
        client.close()
