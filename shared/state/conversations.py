"""What a conversation is: agent (its collection) + source + conversation id, else channel."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from shared.state.keys import agent_key, part


@dataclass(frozen=True, slots=True)
class ConversationRef:
    """Identifies one conversation of one agent (its collection) seen through one interface."""

    collection: str
    source: str
    conversation_id: str | None = None
    channel_id: str | None = None

    @property
    def scope(self) -> str:
        # Conversation ids and channel ids live in different namespaces, so they are tagged.
        if self.conversation_id:
            return f"conv={self.conversation_id}"
        if self.channel_id:
            return f"chan={self.channel_id}"
        return "default"

    @property
    def key(self) -> str:
        """The conversation's name inside Redis keys and the due set."""
        return f"{agent_key(self.collection)}:{part(self.source)}:{part(self.scope)}"


def source_of(key: str) -> str:
    """The source part of a conversation key."""
    return unquote(key.split(":")[1])


def collection_of(key: str) -> str:
    """The agent part of a conversation key: its collection."""
    return unquote(key.split(":")[0])
