"""/save's one Redis step, called synchronously: the same arguments (`save_call`) and the same
script as the API's AsyncSaver sends, for tests that buffer messages without an HTTP request."""

from __future__ import annotations

from collections.abc import Sequence

from shared.buffers import (
    AgentRef,
    Buffers,
    ConversationSettings,
    IncomingMessage,
    SaveCounts,
    save_call,
    save_counts,
)
from shared.redis_scripts import SOURCES


def buffer_save(
    buffers: Buffers,
    agent: AgentRef,
    incoming: Sequence[IncomingMessage],
    conv: ConversationSettings,
) -> SaveCounts:
    script = buffers.redis.register_script(SOURCES["save"])
    script_keys, args = save_call(agent, incoming, conv, buffers.dedupe_ttl)
    return save_counts(script(keys=script_keys, args=args))
