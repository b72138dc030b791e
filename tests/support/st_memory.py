"""st-qdrant-memory's shapes for tests: a Discord-shaped message, its chunk payload, and the recall
block exactly as its formatMemories writes it (written apart from shared.format.recall_block)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

BASE_TS = 1_718_000_000_000  # 2024-06-10T06:13:20Z

DAY = 86_400_000

HEADER = "\n[Past chat memories]\n\n"


def message(
    mid: str,
    text: str,
    ts: int,
    *,
    self_: bool = False,
    channel: str | None = None,
    guild: str | None = None,
    conversation: str | None = None,
) -> dict[str, Any]:
    """A /save message in the Discord plugin's shape: optional fields absent, never null."""
    body: dict[str, Any] = {
        "speaker_kind": "self" if self_ else "user",
        "discord_user_id": "999" if self_ else "111",
        "text": text,
        "message_id": mid,
        "ts": ts,
    }
    if not self_:
        body["speaker_name"] = "Alex"
    for key, value in (
        ("channel_id", channel),
        ("guild_id", guild),
        ("conversation_id", conversation),
    ):
        if value is not None:
            body[key] = value
    return body


def js_percent(score: float) -> str:
    """`(score * 100).toFixed(0)`: the double product, rounded exactly, halves up (score >= 0)."""
    product = score * 100
    assert product >= 0
    return str(math.floor(Fraction(product) + Fraction(1, 2)))


def expected_block(hits: Sequence[Mapping[str, Any]], legacy_user_label: str = "Alex") -> str:
    """st-qdrant-memory's formatMemories, written apart from shared.format.recall_block."""
    if not hits:
        return ""
    block = "\n[Past chat memories]\n\n"
    for hit in hits:
        payload = hit["payload"]
        if payload.get("isChunk"):
            label = f"Conversation ({payload['speakers']})"
        elif payload.get("speaker") == "user":
            label = f"{legacy_user_label} said"
        else:
            label = "Character said"
        text = payload["text"].replace("\n", " ")
        block += f'• {label}: "{text}" (score: {js_percent(hit["score"])}%)\n\n'
    return block


def st_chunk(ids: Sequence[str], ts: int, speakers: str = "Alex, Seraphina") -> dict[str, Any]:
    return {
        "speakers": speakers,
        "messageCount": len(ids),
        "timestamp": ts,
        "messageIds": ",".join(ids),
        "isChunk": True,
    }
