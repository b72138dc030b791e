"""The dead-letter list in Redis: queueing for replay by agent (its collection), any spelling."""

from __future__ import annotations

import redis

from shared.format.naming import collection_name
from shared.state import keys
from shared.state.dead_letters import DeadLetter, DeadLetters


def letter(agent: str, point: str) -> DeadLetter:
    collection = collection_name(agent)
    return DeadLetter(agent=agent, collection=collection, conversation="c", point_id=point,
                      payload={"text": "t"}, reason="refused", at=1)  # fmt: skip


def test_queue_replay_by_agent_takes_every_spelling_of_its_collection(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        dead = DeadLetters(client)
        for agent, point in [("Élodie", "p1"), ("Mythos", "p2"), ("ÉLODIE", "p3")]:
            client.rpush(keys.DEAD_LETTERS, letter(agent, point).to_json())
        assert dead.queue_replay(collection_name("élodie")) == 2
        assert dead.queue_replay(collection_name("élodie")) == 0  # nothing is queued twice
        queued = [DeadLetter.from_json(raw).point_id for raw in client.lrange(keys.REPLAY, 0, -1)]
        assert queued == ["p1", "p3"]
        assert dead.list()[0] == 1
        assert dead.queue_replay() == 1
    finally:
        client.close()
