"""/save's one Redis step on the API's event loop, with the re-sent messages Redis confirmed a
moment ago left out (shared/state/known_texts.py)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

import redis
import redis.asyncio

from shared.errors import UpstreamUnavailable
from shared.state.buffers import (
    AgentRef,
    ConversationBatch,
    ConversationSettings,
    EpochMoved,
    SaveCounts,
    SaveMode,
    SaveReply,
    refresh_after_ms,
    save_call,
    save_reply,
)
from shared.state.known_texts import KnownTexts
from shared.state.scripts import SOURCES

PLAIN_SAVE = SaveMode()


class AsyncSaver:
    """/save's one Redis step on the API's event loop: no thread hand-off per request
    (that hand-off was a fifth of /save's CPU, BENCHMARKS.md)."""

    def __init__(self, client: redis.asyncio.Redis, *, dedupe_ttl_seconds: int) -> None:
        self.redis = client
        self.dedupe_ttl = dedupe_ttl_seconds
        self._save = client.register_script(SOURCES["save"])
        # re-sent messages whose text Redis confirmed a moment ago: left out of the script
        self.known = KnownTexts()
        self.clock = time.time  # seconds; tests move it on as time passes for a mark

    async def save(
        self,
        agent: AgentRef,
        batches: Iterable[ConversationBatch],
        conv: ConversationSettings,
        mode: SaveMode = PLAIN_SAVE,
    ) -> SaveCounts:
        if mode.edit_only:  # an explicit edit reports each message: every one goes
            script_keys, args = save_call(agent, batches, conv, self.dedupe_ttl, mode)
            return (await self._call(script_keys, args)).counts
        ttl, now, given = self.dedupe_ttl, int(self.clock() * 1000), list(batches)
        split = self.known.split(given, now)
        try:
            reply = await self._call(
                *save_call(agent, split.sent, conv, ttl, mode, split.assumed, now)
            )
        except EpochMoved:
            # A text left out may have changed meanwhile (another API's edit): nothing was
            # saved; send every message (a call that assumes nothing cannot be refused so).
            split = self.known.split(given, now, leave_out=False)
            reply = await self._call(
                *save_call(agent, split.sent, conv, ttl, mode, split.assumed, now)
            )
        self.known.record(split, reply, now + refresh_after_ms(ttl) // 2)
        counts = reply.counts
        if not (split.duplicates or split.skipped):
            return counts
        return replace(counts, duplicates=counts.duplicates + split.duplicates,
                       skipped=counts.skipped + split.skipped)  # fmt: skip

    async def _call(self, script_keys: list[str], args: list[str]) -> SaveReply:
        try:
            result = await self._save(keys=script_keys, args=args)
        except redis.RedisError as exc:
            raise UpstreamUnavailable(f"Redis is unavailable: {exc}") from exc
        return save_reply(result)

    async def close(self) -> None:
        await self.redis.aclose()
