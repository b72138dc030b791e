"""What the delete tests store: Discord-shaped messages, st-qdrant-memory points, and reading back
the message ids a collection holds."""

from __future__ import annotations

import uuid
from typing import Any

from shared.store.interface import PointToWrite
from tests.support.embedding_server import EMBEDDING_DIMS, embed_text
from tests.support.st_memory import BASE_TS
from tests.support.stack import Stack


def msg(mid: str, user: str, *, channel: str = "c1", n: int = 0, **extra: Any) -> dict[str, Any]:
    return {"message_id": mid, "discord_user_id": user, "speaker_name": f"user{user}",
            "text": f"message {mid} says something worth remembering", "ts": BASE_TS + n,
            "channel_id": channel, **extra}  # fmt: skip


def st_point(text: str, ids: str) -> PointToWrite:
    """A point exactly as st-qdrant-memory writes it: uuid4 id, its payload only."""
    payload = {"text": text, "speakers": "Alex, Mythos", "messageCount": 2,
               "timestamp": BASE_TS, "messageIds": ids, "isChunk": True}  # fmt: skip
    return PointToWrite(str(uuid.uuid4()), embed_text(text, EMBEDDING_DIMS), payload)


def stored(stack: Stack, collection: str = "mem_mythos") -> list[str]:
    return sorted(i for p in stack.payloads(collection) for i in p.get("messageIdList", []))
