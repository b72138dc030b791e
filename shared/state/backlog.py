"""The backlog, read from Redis when Prometheus scrapes: is the write path keeping up?

Two pipelined round trips (the totals, each agent's conversations), then the buffers read by a
short read-only script per 200 conversations, so a scrape never holds Redis (and /save) for
long. BENCHMARKS.md times it with 1,000 buffered conversations.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import redis
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from shared.state import keys
from shared.state.scripts import SOURCES
from shared.state.text import as_text

log = logging.getLogger(__name__)

CELERY_QUEUE = "celery"  # Celery's default queue: a LIST in the broker (api/health.py reads it)
# One short script per this many conversations: Redis answers other clients (/save) between
# calls, and each call holds it about a millisecond. (A pipeline of 3,000 commands instead cost
# the scrape 3x the time in redis-py's packing and parsing.)
CONVERSATIONS_PER_CALL = 200

# ARGV: buffer key prefix, meta key prefix, conversation... Returns, per conversation: buffered
# messages, how many of them are stored (the open chunk's `written`), and the timestamp of the
# first message not stored yet (-1 if none, or if the conversation is an import: its messages
# carry the chat's own old dates, not a sign of falling behind).
_READ_BUFFERS = SOURCES["backlog_read"]


@dataclass
class Backlog:
    """One reading of the backlog."""

    due: int = 0
    scheduled: int = 0
    overdue_seconds: float = 0.0
    queued_tasks: int = 0
    dead_letters: int = 0
    replays_queued: int = 0
    quarantined: int = 0
    oldest_message_age_seconds: float = 0.0
    buffered: dict[str, int] = field(default_factory=dict)  # agent label -> messages
    unwritten: dict[str, int] = field(default_factory=dict)  # agent label -> messages
    held: int = 0  # conversations with unwritten messages whose agent's writes are held


def read_backlog(client: redis.Redis, label: Callable[[str], str]) -> Backlog:
    """The backlog now; `label` turns an agent's name into its metric label."""
    now_ms = int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    pipe.zcount(keys.DUE, "-inf", now_ms)
    pipe.zcard(keys.DUE)
    pipe.zrangebyscore(keys.DUE, "-inf", now_ms, start=0, num=1, withscores=True)
    pipe.llen(CELERY_QUEUE)
    pipe.llen(keys.DEAD_LETTERS)
    pipe.llen(keys.REPLAY)
    pipe.hgetall(keys.NAMES)
    pipe.zcard(keys.QUARANTINE)
    due, scheduled, first_due, queued, dead, replay, names, quarantined = pipe.execute()
    backlog = Backlog(due, scheduled, queued_tasks=queued, dead_letters=dead, replays_queued=replay)
    backlog.quarantined = quarantined
    if first_due:
        backlog.overdue_seconds = max(0.0, (now_ms - first_due[0][1]) / 1000)
    agents = {as_text(c): label(as_text(n)) for c, n in names.items()}
    _read_conversations(client, agents, backlog, now_ms)
    return backlog


def _read_conversations(
    client: redis.Redis, agents: dict[str, str], backlog: Backlog, now_ms: int
) -> None:
    pipe = client.pipeline(transaction=False)
    for collection in agents:
        pipe.smembers(keys.conversations(collection))
        pipe.exists(keys.blocked(collection))
    replies = pipe.execute()
    owners: list[tuple[str, bool, str]] = []  # (agent label, blocked, conversation)
    for label, members, blocked in zip(agents.values(), replies[::2], replies[1::2], strict=True):
        owners.extend((label, bool(blocked), as_text(m)) for m in members)
    oldest, read_buffers = now_ms, client.register_script(_READ_BUFFERS)
    for start in range(0, len(owners), CONVERSATIONS_PER_CALL):
        batch = owners[start : start + CONVERSATIONS_PER_CALL]
        args = [keys.buffer(""), keys.meta(""), *(conversation for _, _, conversation in batch)]
        found = [int(n) for n in read_buffers(args=args).split()]
        for (label, blocked, _), length, written, first_ts in zip(
            batch, found[::3], found[1::3], found[2::3], strict=True
        ):
            # The open chunk's first `written` messages are stored already (its point).
            unwritten = max(0, length - written)
            backlog.buffered[label] = backlog.buffered.get(label, 0) + length
            backlog.unwritten[label] = backlog.unwritten.get(label, 0) + unwritten
            backlog.held += 1 if blocked and unwritten else 0
            oldest = min(oldest, first_ts) if first_ts >= 0 else oldest
    backlog.oldest_message_age_seconds = max(0.0, (now_ms - oldest) / 1000)


class BacklogCollector(Collector):
    """A custom collector: the backlog is read at scrape time, never kept in the process."""

    def __init__(self, client: redis.Redis, label: Callable[[str], str]) -> None:
        self.client = client
        self.label = label

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        try:
            backlog = read_backlog(self.client, self.label)
        except redis.RedisError as exc:
            log.warning("backlog not readable for metrics: %s", exc)
            yield _gauge("up", "1 when the backlog could be read from Redis.", 0)
            return
        yield _gauge("up", "1 when the backlog could be read from Redis.", 1)
        yield from _families(backlog)
        yield _gauge(
            "read_duration_seconds",
            "Time this scrape took to read the backlog from Redis.",
            time.perf_counter() - started,
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"memory_pool_backlog_{name}", documentation, value=value)


def _by_agent(name: str, documentation: str, values: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"memory_pool_backlog_{name}", documentation, labels=["agent"])
    for agent, value in sorted(values.items()):
        family.add_metric([agent], value)
    return family


def _families(b: Backlog) -> Iterator[Metric]:
    yield _gauge("due_conversations", "Conversations due for a flush now.", b.due)
    yield _gauge(
        "scheduled_conversations", "Conversations with a flush scheduled, due or not.", b.scheduled
    )
    yield _gauge(
        "overdue_seconds", "How long the longest-waiting due conversation is past due.",
        b.overdue_seconds,
    )  # fmt: skip
    yield _by_agent("buffered_messages", "Messages waiting in Redis buffers (open chunks "
                    "included).", b.buffered)  # fmt: skip
    yield _by_agent(
        "unwritten_messages", "Buffered messages not stored in any point yet.", b.unwritten
    )
    yield _gauge(
        "oldest_message_age_seconds",
        "Age of the oldest message not stored yet, by its own timestamp (imports excluded).",
        b.oldest_message_age_seconds,
    )
    yield _gauge("queued_tasks", "Tasks waiting in the Celery queue.", b.queued_tasks)
    yield _gauge("dead_letters", "Chunks in the dead letters.", b.dead_letters)
    yield _gauge("replays_queued", "Dead letters queued for another try.", b.replays_queued)
    yield _gauge(
        "held_conversations",
        "Conversations with buffered messages whose agent's writes are held (a collection of "
        "another embedding model or size).",
        b.held,
    )
    yield _gauge(
        "quarantined_conversations",
        "Conversations set aside in the quarantine (a flush failure retrying cannot fix).",
        b.quarantined,
    )
