"""Every Redis key memory-pool uses, named in one place."""

from __future__ import annotations

from urllib.parse import quote

PREFIX = "mp:"

DUE = f"{PREFIX}due"  # ZSET conversation -> Unix ms when it next needs a flush
DEAD_LETTERS = f"{PREFIX}dead"  # LIST of JSON dead letters, oldest first
REPLAY = f"{PREFIX}replay"  # LIST of dead letters queued for another try
REPLAY_LOCK = f"{PREFIX}replay:lock"  # one replay at a time
AGENTS = f"{PREFIX}agents"  # SET of agent keys that have ever buffered a message


def part(value: str) -> str:
    """One key component; ':' and '%' are escaped so components can never run together."""
    if value.isascii() and value.isalnum():
        return value  # snowflakes and most ids: quote() would return them unchanged, slower
    return quote(value, safe="")


def agent_key(agent_name: str) -> str:
    """Agents are looked up case-insensitively, so their state is keyed the same way."""
    return part(agent_name.casefold())


def seen(agent: str, source: str, message_id: str) -> str:
    """Dedupe marker of one message id: with an expiry when seen, without one when deleted."""
    return f"{PREFIX}seen:{agent_key(agent)}:{part(source)}:{part(message_id)}"


def buffer(conversation: str) -> str:
    """LIST of a conversation's messages not yet in a stored closed chunk, in arrival order."""
    return f"{PREFIX}buf:{conversation}"


def meta(conversation: str) -> str:
    """HASH of a conversation's state: where it is, generation, what of it is written."""
    return f"{PREFIX}conv:{conversation}"


def lease(conversation: str) -> str:
    """A worker's lease on a conversation; it expires if the worker dies."""
    return f"{PREFIX}lease:{conversation}"


def conversations(agent: str) -> str:
    """SET of an agent's conversations (for flush-all, stats and deletes)."""
    return f"{PREFIX}convs:{agent_key(agent)}"


def blocked(agent: str) -> str:
    """Why an agent's writes are held (collection of another size or model); absent when fine."""
    return f"{PREFIX}blocked:{agent_key(agent)}"


def agent_stats(agent: str) -> str:
    """HASH of per-agent counters such as the last write time."""
    return f"{PREFIX}stats:{agent_key(agent)}"
