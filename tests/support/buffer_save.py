"""/save's one Redis step, called synchronously: the same arguments (`save_call`) and the same
script as the API's AsyncSaver sends, for tests that buffer messages without an HTTP request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.format.messages import Message
from shared.state.buffers import (
    AgentRef,
    Buffers,
    ConversationSettings,
    SaveBatches,
    SaveCounts,
    save_call,
    save_counts,
)
from shared.state.conversations import ConversationRef
from shared.state.scripts import SOURCES


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """A test's shorthand for one message and its conversation; grouped as /save groups them."""

    conversation: ConversationRef
    message: Message
    guild_id: str | None = None


def buffer_save(
    buffers: Buffers,
    agent: AgentRef,
    incoming: Sequence[IncomingMessage],
    conv: ConversationSettings,
) -> SaveCounts:
    batches = SaveBatches()
    for item in incoming:
        batches.add(item.conversation, item.message, item.guild_id)
    script = buffers.redis.register_script(SOURCES["save"])
    script_keys, args = save_call(agent, batches, conv, buffers.dedupe_ttl)
    return save_counts(script(keys=script_keys, args=args))
