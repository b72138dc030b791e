"""Hermes turns as memory-pool /save messages: stable ids, speakers, and what to re-send."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SOURCE = "hermes"
# Each save re-sends the session's last few turns, as the Discord plugin re-sends its last 30
# messages: a turn lost while memory-pool was down arrives with the next one, and memory-pool
# counts the re-sent ids as duplicates.
RESEND_TURNS = 3


def message_id(session_id: str, turn: int, role: str) -> str:
    """`hermes:<session>:<turn>:<role>`: the same turn always gets the same id."""
    return f"{SOURCE}:{session_id}:{turn}:{role}"


def user_turns(messages: Iterable[Any] | None) -> int:
    """How many user messages an OpenAI-style transcript holds (0 without one)."""
    if not messages:
        return 0
    return sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "user")


def turn_messages(
    session_id: str,
    turn: int,
    user_text: str,
    assistant_text: str,
    *,
    now_ms: int,
    user_id: str | None = None,
    user_name: str | None = None,
) -> list[dict[str, Any]]:
    """The turn's user and assistant messages; optional fields absent, never null."""
    user: dict[str, Any] = {
        "message_id": message_id(session_id, turn, "user"),
        "text": user_text,
        "ts": now_ms - 1,  # the question came first
        "speaker_kind": "user",
        "conversation_id": session_id,
    }
    if user_id:
        user["user_id"] = user_id
    if user_name:
        user["speaker_name"] = user_name
    assistant = {
        "message_id": message_id(session_id, turn, "assistant"),
        "text": assistant_text,
        "ts": now_ms,
        "speaker_kind": "self",
        "conversation_id": session_id,
    }
    return [user, assistant]


@dataclass
class SessionTurns:
    """One session's turn counter and its last turns' messages."""

    session_id: str
    turn: int = 0
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=2 * RESEND_TURNS))

    def next_turn(self, messages: Iterable[Any] | None) -> int:
        """The transcript's count of user messages (so a restarted provider continues where
        the session is), never below the last turn + 1 (so a rewound transcript cannot reuse
        an id memory-pool already holds)."""
        self.turn = max(user_turns(messages), self.turn + 1)
        return self.turn

    def add(self, turn_body: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Remember a turn; returns every recent message, to be sent together."""
        self.recent.extend(turn_body)
        return list(self.recent)

    def recent_ids(self) -> list[str]:
        return [m["message_id"] for m in self.recent]
