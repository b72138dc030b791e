"""api/agent_threads.py on its own: each collection's calls hold at most their share of threads,
another collection's run meanwhile, and nothing of a collection is kept once its calls end."""

from __future__ import annotations

import asyncio
import threading

import pytest

from api.agent_threads import AgentCalls, AgentThreads

WAIT = 10.0  # seconds: a bound on each wait, so a broken share fails instead of hanging


async def _until(condition: object, timeout: float = WAIT) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "not reached in time"
        await asyncio.sleep(0.005)


def test_a_collection_holds_its_share_and_another_runs_meanwhile() -> None:
    async def scenario() -> None:
        threads = AgentThreads(per_agent=2)
        gate = threading.Event()
        calls = [asyncio.create_task(threads.run("mem_busy", gate.wait, WAIT)) for _ in range(5)]
        await _until(lambda: threads.running("mem_busy") == 2)
        await asyncio.sleep(0.05)  # the other three would be in by now, had they a slot
        assert threads.running("mem_busy") == 2
        assert await threads.run("mem_other", lambda: "answered") == "answered"
        gate.set()
        assert await asyncio.gather(*calls) == [True] * 5
        assert threads.agents == 0  # nothing kept of either collection

    asyncio.run(scenario())


def test_a_call_that_raises_gives_its_slot_back() -> None:
    async def scenario() -> None:
        threads = AgentThreads(per_agent=1)

        def fails() -> None:
            raise ValueError("the store refused it")

        for _ in range(3):
            with pytest.raises(ValueError, match="refused"):
                await threads.run("mem_a", fails)
        assert await threads.run("mem_a", lambda: 7) == 7
        assert threads.agents == 0

    asyncio.run(scenario())


def test_a_waiting_call_cancelled_leaves_nothing_behind() -> None:
    async def scenario() -> None:
        threads = AgentThreads(per_agent=1)
        gate = threading.Event()
        running = asyncio.create_task(threads.run("mem_a", gate.wait, WAIT))
        await _until(lambda: threads.running("mem_a") == 1)
        waiting = asyncio.create_task(threads.run("mem_a", lambda: "never"))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        gate.set()
        assert await running is True
        assert threads.agents == 0

    asyncio.run(scenario())


def test_a_running_call_cancelled_keeps_its_slot_until_its_thread_ends() -> None:
    """A request given up (a client gone, a stop) cannot free its slot while its thread still
    works in the store: the share stays a bound on threads, not on requests."""

    async def scenario() -> None:
        threads = AgentThreads(per_agent=1)
        gate, ended = threading.Event(), threading.Event()

        def work() -> None:
            gate.wait(WAIT)
            ended.set()

        running = asyncio.create_task(threads.run("mem_a", work))
        await _until(lambda: threads.running("mem_a") == 1)
        running.cancel()
        after = asyncio.create_task(threads.run("mem_a", ended.is_set))
        await asyncio.sleep(0.05)
        assert threads.running("mem_a") == 1
        gate.set()
        assert await after is True  # it ran only once the cancelled call's thread had ended
        with pytest.raises(asyncio.CancelledError):
            await running
        assert threads.agents == 0

    asyncio.run(scenario())


def test_a_system_exit_in_a_call_is_its_error_not_the_servers() -> None:
    """Raised in the task that runs the thread, asyncio would let it end the loop."""

    async def scenario() -> str:
        threads = AgentThreads(per_agent=1)

        def exits() -> None:
            raise SystemExit(3)

        with pytest.raises(RuntimeError, match="SystemExit"):
            await threads.run("mem_a", exits)
        return await threads.run("mem_a", lambda: "still serving")

    assert asyncio.run(scenario()) == "still serving"


def test_every_slot_comes_back_after_failures_and_cancellations() -> None:
    async def scenario() -> None:
        threads = AgentThreads(per_agent=3)
        gate = threading.Event()

        def fails() -> None:
            raise ValueError("refused")

        for _ in range(5):
            with pytest.raises(ValueError):
                await threads.run("mem_a", fails)
        waiting = [asyncio.create_task(threads.run("mem_a", gate.wait, WAIT)) for _ in range(6)]
        await _until(lambda: threads.running("mem_a") == 3)
        for task in waiting[::2]:
            task.cancel()
        gate.set()
        await asyncio.gather(*waiting, return_exceptions=True)
        await _until(lambda: threads.agents == 0)
        again = threading.Event()
        full = [asyncio.create_task(threads.run("mem_a", again.wait, WAIT)) for _ in range(3)]
        await _until(lambda: threads.running("mem_a") == 3)  # all three slots are there again
        again.set()
        assert await asyncio.gather(*full) == [True] * 3

    asyncio.run(scenario())


def test_a_call_may_take_a_collection_argument_of_its_own() -> None:
    """The import's `import_lines(..., collection=target)`: a TypeError (500) before the share's
    own arguments were positional-only."""

    def load(text: str, *, collection: str) -> str:
        return f"{text} into {collection}"

    async def scenario() -> None:
        calls = AgentCalls(AgentThreads(2), "mem_a")
        assert await calls(load, "lines", collection="mem_b") == "lines into mem_b"

    asyncio.run(scenario())
