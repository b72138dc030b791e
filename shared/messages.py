"""A message as memory-pool keeps it between /save and its chunk: resolved, trimmed, timestamped."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pydantic_core


def _encode(record: dict[str, object]) -> str:
    # /save encodes every message of every request, the re-sent ones too: pydantic's Rust
    # encoder writes the same text as json.dumps(ensure_ascii=False, separators=(",", ":"))
    # (tests/shared/test_messages_json.py) in a quarter of the time.
    return pydantic_core.to_json(record).decode()


@dataclass(frozen=True, slots=True)
class Message:
    """One platform message, with its speaker already resolved by the agent's naming rules."""

    id: str
    text: str
    ts: int
    speaker: str
    user_id: str | None = None
    is_self: bool = False

    @property
    def size(self) -> int:
        """The chunker's size of a message: text plus speaker plus the "Speaker: " overhead."""
        return len(self.text) + len(self.speaker) + 4

    def to_json(self) -> str:
        # Short keys: a buffered message is the unit of Redis memory under a firehose.
        record: dict[str, object] = {"i": self.id, "t": self.text, "s": self.speaker, "ts": self.ts}
        # The chunker's size rides along so Redis scripts can keep the buffered-size hint exact.
        record["z"] = self.size
        if self.user_id is not None:
            record["u"] = self.user_id
        if self.is_self:
            record["me"] = 1
        return _encode(record)

    @classmethod
    def from_json(cls, raw: str | bytes) -> Message:
        record = json.loads(raw)
        return cls(
            id=record["i"],
            text=record["t"],
            ts=int(record["ts"]),
            speaker=record["s"],
            user_id=record.get("u"),
            is_self=bool(record.get("me")),
        )
