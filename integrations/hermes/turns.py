"""Hermes turns as memory-pool /save messages: stable ids, speakers, what to re-send, and the
recall block kept out of them; and the facts the model keeps with its remember tool."""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SOURCE = "hermes"
# Each save re-sends the session's last few turns, as the Discord plugin re-sends its last 30
# messages: a turn lost while memory-pool was down arrives with the next one, and memory-pool
# counts the re-sent ids as duplicates.
RESEND_TURNS = 3
# The recall blocks prefetch returned lately, per session: a host that puts one into the user's
# message hands it back to sync_turn, and it must not be saved as what the user said.
RECALLED_BLOCKS = 4
FACTS_CONVERSATION = f"{SOURCE}:facts"

# Hermes fences what prefetch returns in <memory-context> (agent/memory_manager.py)
_FENCED = re.compile(r"<\s*memory-context\s*>[\s\S]*?</\s*memory-context\s*>", re.IGNORECASE)
# memory-pool's (st-qdrant-memory's) block: the header, then one line per hit (newlines in a
# hit's text are written as spaces), each ending in its score
_RECALL_BLOCK = re.compile(r"\[Past chat memories\]\n+(?:• [^\n]*\(score: -?\d+%\)(?:\n+|$))*")


def message_id(session_id: str, turn: int, role: str) -> str:
    """`hermes:<session>:<turn>:<role>`: the same turn always gets the same id."""
    return f"{SOURCE}:{session_id}:{turn}:{role}"


def strip_recall(text: str, recalled: Iterable[str] = ()) -> str:
    """`text` without a recall block injected into it: the blocks prefetch returned, Hermes'
    <memory-context> fence and any `[Past chat memories]` block; unchanged when it holds none."""
    if not text:
        return text
    cleaned = text
    for block in recalled:
        if block.strip():
            cleaned = cleaned.replace(block, "\n").replace(block.strip(), "\n")
    cleaned = _RECALL_BLOCK.sub("", _FENCED.sub("", cleaned))
    return text if cleaned == text else cleaned.strip()


def fact_message(fact: str, *, now_ms: int, user_id: str | None = None) -> dict[str, Any]:
    """A fact the model chose to keep, as the agent's own message: whitespace collapsed, in
    the facts conversation (the user's own when the host names the user), with an id made from
    both, so keeping the same fact again is a duplicate."""
    text = " ".join(fact.split())
    conversation = f"{FACTS_CONVERSATION}:{user_id}" if user_id else FACTS_CONVERSATION
    digest = hashlib.sha256(f"{conversation}\n{text}".encode()).hexdigest()[:24]
    message: dict[str, Any] = {
        "message_id": f"{SOURCE}:fact:{digest}",
        "text": text,
        "ts": now_ms,
        "speaker_kind": "self",
        "conversation_id": conversation,
    }
    if user_id:
        message["user_id"] = user_id  # a delete by user id forgets what was kept about them
    return message


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
    recalled: deque[str] = field(default_factory=lambda: deque(maxlen=RECALLED_BLOCKS))
    last_ms: int = 0  # the last turn's time (its assistant message's)

    def stamp(self, now_ms: int) -> int:
        """The turn's time: after the session's last turn's. Its user message is a millisecond
        before it, so two turns synced within two milliseconds (a fast host) had the second's
        question at or before the first's answer, and the chunk put them out of order."""
        self.last_ms = max(now_ms, self.last_ms + 2)
        return self.last_ms

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
