"""The recall block (Format.md): how recalled chunks are shown to the model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

RECALL_HEADER = "\n[Past chat memories]\n\n"


def js_to_fixed_0(value: float) -> str:
    """JavaScript's `Number.prototype.toFixed(0)`: exact binary value, halves away from zero."""
    sign = "-" if value < 0 else ""
    # Decimal(value) is the double's exact value, as toFixed sees it (0.285*100 is just below 28.5).
    rounded = Decimal(abs(value)).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    return f"{sign}{int(rounded)}"


def score_percent(score: float) -> str:
    """A hit's score as st-qdrant-memory prints it: `(score * 100).toFixed(0)`."""
    return js_to_fixed_0(score * 100)


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One point returned by recall: its id, cosine score and payload as stored; a hybrid
    recall adds the fused score it ranked by."""

    id: str
    score: float
    payload: Mapping[str, Any]
    fused_score: float | None = None


def describe_hit(payload: Mapping[str, Any], legacy_user_label: str) -> str:
    """The part before the quoted text: a chunk's speakers, or an old single-message point's."""
    if payload.get("isChunk") or "speakers" in payload:
        return f"Conversation ({payload.get('speakers', '')})"
    # Points from st-qdrant-memory before it chunked hold one message and a `speaker` role.
    if payload.get("speaker") == "user":
        return f"{legacy_user_label} said"
    return "Character said"


def format_hit(hit: RecallHit, legacy_user_label: str) -> str:
    text = str(hit.payload.get("text", "")).replace("\n", " ")
    head = describe_hit(hit.payload, legacy_user_label)
    return f'• {head}: "{text}" (score: {score_percent(hit.score)}%)\n\n'


def recall_block(hits: Sequence[RecallHit], legacy_user_label: str = "User") -> str:
    """st-qdrant-memory's injected block, byte for byte; "" when nothing qualifies."""
    if not hits:
        return ""
    return RECALL_HEADER + "".join(format_hit(hit, legacy_user_label) for hit in hits)
