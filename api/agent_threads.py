"""Each agent's share of the API's threads: one agent's calls into the store hold at most a few
of them at once, and the rest of its calls wait their turn in the event loop, holding none.

Store calls run in Starlette's threadpool (40 threads, shared by every route and agent). A
SillyTavern that sends dozens of upserts at once to a slow store would otherwise hold every
thread, and another agent's search, upsert or /retrieve would wait for one until they ended
(BENCHMARKS.md section 16). Recalls past their timeout were worse: their threads went on in the
store while the pool started others, one more thread each. The /agents/{bot} endpoints (stats,
deletes, edits, known ids, the viewer's pages, flush, export and import; MCP `forget`) take a
share too: a client deleting many messages one request at a time into a slow store held the
threads the same way, and so did exports, whose lines Starlette read in its threadpool.

A share bounds one agent, not one client: a client that may write to many agents (no API keys,
`accept_unlisted_agents`) can still fill the pool through as many names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from starlette.concurrency import run_in_threadpool

P = ParamSpec("P")
T = TypeVar("T")


class _Share:
    __slots__ = ("calls", "running", "slots")

    def __init__(self, threads: int) -> None:
        self.slots = asyncio.Semaphore(threads)
        self.calls = 0  # running or waiting: the share is dropped when none is left
        self.running = 0


class AgentThreads:
    """At most `per_agent` threadpool calls of one collection at once. Used on the event loop
    only (no lock): a share exists while calls of its agent run or wait, so the map is as large
    as the requests in flight, whatever names clients send."""

    def __init__(self, per_agent: int) -> None:
        self.per_agent = per_agent
        self._shares: dict[str, _Share] = {}

    async def run(
        self, collection: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        # positional-only: `fn` may take a `collection` of its own (the import does)
        share = self._shares.get(collection)
        if share is None:
            share = self._shares[collection] = _Share(self.per_agent)
        share.calls += 1
        try:
            await share.slots.acquire()
        except BaseException:  # cancelled while waiting its turn: it held nothing
            self._leave(collection, share)
            raise
        share.running += 1
        work = asyncio.ensure_future(run_in_threadpool(_ordinary, fn, args, kwargs))
        # The slot goes back when the thread is done, not when this request is: a request
        # given up (a stop, say) leaves its thread working in the store, and it still counts.
        work.add_done_callback(lambda done: self._done(collection, share, done))
        return await asyncio.shield(work)

    def _done(self, collection: str, share: _Share, work: asyncio.Future[T]) -> None:
        if not work.cancelled():
            work.exception()  # read, so a result nobody awaits any more is not logged as lost
        share.running -= 1
        share.slots.release()
        self._leave(collection, share)

    def _leave(self, collection: str, share: _Share) -> None:
        share.calls -= 1
        if share.calls == 0:
            del self._shares[collection]

    def running(self, collection: str) -> int:
        """Calls of `collection` holding a thread now."""
        share = self._shares.get(collection)
        return 0 if share is None else share.running

    @property
    def agents(self) -> int:
        """Collections with calls running or waiting now."""
        return len(self._shares)


def _ordinary(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    """`fn` in its thread, a SystemExit or KeyboardInterrupt from it turned into an error of
    its request: raised in the task that runs it (not the request's own), asyncio would let it
    end the whole server."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        raise
    except BaseException as exc:
        raise RuntimeError(f"{type(exc).__name__} raised by a store call") from exc


@dataclass(frozen=True)
class AgentShares:
    """Each agent's four shares, apart, so that its burst of one kind never holds up its own
    calls of another: its /qdrant reads (a SillyTavern's searches before it answers), its
    /qdrant writes (that SillyTavern's re-index), its recalls (the same character on Discord
    or Hermes), and its operations (the /agents/{bot} endpoints: stats, deletes, edits, the
    viewer's pages, flushes and moves)."""

    reads: AgentThreads
    writes: AgentThreads
    recalls: AgentThreads
    operations: AgentThreads

    @classmethod
    def of(cls, per_agent: int) -> AgentShares:
        return cls(*(AgentThreads(per_agent) for _ in range(4)))


@dataclass(frozen=True)
class AgentCalls:
    """One request's calls into the store or Redis, run in its agent's operations share."""

    share: AgentThreads
    collection: str

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.share.run(self.collection, fn, *args, **kwargs)
