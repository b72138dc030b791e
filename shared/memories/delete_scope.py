"""What a delete within one agent covers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeleteScope:
    """Exactly one of: a source; a conversation (source + channel or conversation id);
    a message id (any source); a user id; one point (a chunk) by its id."""

    source: str | None = None
    channel_id: str | None = None
    conversation_id: str | None = None
    message_id: str | None = None
    user_id: str | None = None
    point_id: str | None = None
