"""The dead-letter list: chunks the embedding provider refused for good, kept to replay later."""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import redis

from shared.state import keys
from shared.state.scripts import SOURCES

_MOVE = SOURCES["dead_letter_move"]
_REPLACE = SOURCES["dead_letter_replace"]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One refused chunk, with everything needed to write it once the cause is fixed."""

    agent: str
    collection: str
    conversation: str
    point_id: str
    payload: dict[str, Any]
    reason: str
    at: int

    @classmethod
    def from_json(cls, raw: str | bytes) -> DeadLetter:
        data = json.loads(raw)
        return cls(**{field: data[field] for field in cls.__dataclass_fields__})

    def to_json(self) -> str:
        record = {field: getattr(self, field) for field in self.__dataclass_fields__}
        return json.dumps(record, ensure_ascii=False)


class DeadLetters:
    """Listing, queueing for replay and taking back the dead letters in Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._move = client.register_script(_MOVE)
        self._replace = client.register_script(_REPLACE)

    def list(self, *, offset: int = 0, limit: int = 100) -> tuple[int, list[DeadLetter]]:
        pipe = self.redis.pipeline(transaction=False)
        pipe.llen(keys.DEAD_LETTERS)
        pipe.lrange(keys.DEAD_LETTERS, offset, offset + limit - 1)
        total, raw = pipe.execute()
        return int(total), [DeadLetter.from_json(entry) for entry in raw]

    def queue_replay(self, collection: str | None = None) -> int:
        """Move dead letters (of one agent's collection, or all) to the replay queue."""
        moved = 0
        for raw in self.redis.lrange(keys.DEAD_LETTERS, 0, -1):
            letter = DeadLetter.from_json(raw)
            if collection is not None and letter.collection != collection:
                continue
            # Moved only if still there: two replay requests never queue one letter twice.
            moved += int(self._move(keys=[keys.DEAD_LETTERS, keys.REPLAY], args=[raw]))
        return moved

    def remove_where(self, keep: Callable[[DeadLetter], bool]) -> int:
        """Drop dead letters (queued for replay or not) for which `keep` is False."""
        dropped = 0
        for key in (keys.DEAD_LETTERS, keys.REPLAY):
            for raw in self.redis.lrange(key, 0, -1):
                if not keep(DeadLetter.from_json(raw)):
                    dropped += int(self.redis.lrem(key, 1, raw))  # type: ignore[arg-type]
        return dropped

    def of_collection(self, collection: str) -> builtins.list[tuple[str, bytes, DeadLetter]]:
        """The collection's letters, waiting or queued for replay: (list key, raw, letter)."""
        found = []
        for key in (keys.DEAD_LETTERS, keys.REPLAY):
            raw_entries: list[bytes] = self.redis.lrange(key, 0, -1)  # type: ignore[assignment]
            for raw in raw_entries:
                letter = DeadLetter.from_json(raw)
                if letter.collection == collection:
                    found.append((key, raw, letter))
        return found

    def replace(self, key: str, raw: bytes, letter: DeadLetter | None) -> bool:
        """Put `letter` where `raw` was (None: drop it); False when `raw` is gone from `key`."""
        new = letter.to_json() if letter is not None else ""
        return int(self._replace(keys=[key], args=[raw, new])) == 1

    def total(self) -> int:
        """Letters waiting or queued for replay."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.llen(keys.DEAD_LETTERS)
        pipe.llen(keys.REPLAY)
        return sum(int(n) for n in pipe.execute())

    def pending_replays(self) -> int:
        return int(self.redis.llen(keys.REPLAY))

    def peek_replays(self, limit: int) -> builtins.list[tuple[bytes, DeadLetter]]:
        raw: list[bytes] = self.redis.lrange(keys.REPLAY, 0, limit - 1)  # type: ignore[assignment]
        return [(entry, DeadLetter.from_json(entry)) for entry in raw]

    def done(self, raw: bytes) -> None:
        """A replayed entry is stored (or dropped on purpose): take it off the queue."""
        # redis-py types the value as str; it sends bytes as they are, which is what is stored
        self.redis.lrem(keys.REPLAY, 1, raw)  # type: ignore[arg-type]

    def refused_again(self, raw: bytes, letter: DeadLetter, reason: str) -> None:
        """Still refused: back to the dead letters, with the new reason."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.lrem(keys.REPLAY, 1, raw)  # type: ignore[arg-type]
        pipe.rpush(keys.DEAD_LETTERS, replace(letter, reason=reason).to_json())
        pipe.execute()
