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


def message_size(text: str, speaker: str) -> int:
    """The chunker's size of a message: text plus speaker plus the "Speaker: " overhead."""
    return len(text) + len(speaker) + 4


def stored_json(
    message_id: str,
    text: str,
    ts: int,
    speaker: str,
    user_id: str | None = None,
    is_self: bool = False,
) -> str:
    """A message as a conversation's Redis buffer holds it (Message.to_json): /save writes one
    for each message it receives, so it is written without making a Message first."""
    # Short keys: a buffered message is the unit of Redis memory under a firehose.
    record: dict[str, object] = {"i": message_id, "t": text, "s": speaker, "ts": ts}
    # The chunker's size rides along so Redis scripts can keep the buffered-size hint exact.
    record["z"] = message_size(text, speaker)
    if user_id is not None:
        record["u"] = user_id
    if is_self:
        record["me"] = 1
    return _encode(record)


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
        return message_size(self.text, self.speaker)

    def to_json(self) -> str:
        return stored_json(self.id, self.text, self.ts, self.speaker, self.user_id, self.is_self)

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
