"""The model's memory tools and the background saves, as Hermes 0.19.0 runs them: the provider
loaded by Hermes' own plugin loader, tool calls routed by its MemoryManager, a live memory-pool."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.hermes_support import (
    AGENT,
    HEADER,
    MODULE,
    configure,
    initialized,
    load_provider,
    stored_ids,
)
from tests.support.live_server import Live
from tests.support.redis_server import free_port

SEARCH, REMEMBER = "memory_pool_search", "memory_pool_remember"
FACT = "Alex's sister Maren lives in Tromsø and keeps three hives of bees"
SAILING = [
    ("my grandmother's sailboat is called Kittiwake and it is painted green",
     "Kittiwake, a green sailboat, what a lovely name for your grandmother's boat"),
    ("we sail Kittiwake to the skerries every August",
     "August trips to the skerries on Kittiwake sound wonderful"),
]  # fmt: skip
BAKERY = [
    ("the bakery on Quay Street sells cardamom buns shaped like knots",
     "cardamom knots from Quay Street, that bakery sounds worth the walk"),
    ("the baker there is called Ingrid and she opens at six",
     "Ingrid opening at six means warm cardamom buns for early risers"),
]  # fmt: skip


def call(target: Any, tool: str, args: Any) -> dict[str, Any]:
    """A tool call as Hermes makes it; the result must be a JSON object in a string."""
    answer = target.handle_tool_call(tool, args)
    assert isinstance(answer, str)
    result = json.loads(answer)
    assert isinstance(result, dict)
    return result


def manager_for(home: Path, session_id: str, **context: Any) -> Any:
    from agent.memory_manager import MemoryManager

    manager = MemoryManager()
    manager.add_provider(load_provider())
    kwargs = {"platform": "telegram", "agent_context": "primary", "hermes_home": str(home)}
    manager.initialize_all(session_id=session_id, **(kwargs | context))
    return manager


def test_the_model_remembers_a_fact_once_and_finds_it(live: Live, hermes_home: Path) -> None:
    configure(hermes_home, live.url)
    manager = manager_for(hermes_home, "t1", user_id="u-7")
    assert {s["name"] for s in manager.get_all_tool_schemas()} == {SEARCH, REMEMBER}
    assert manager.has_tool(SEARCH) and manager.has_tool(REMEMBER)

    kept = call(manager, REMEMBER, {"fact": FACT})
    assert kept["stored"] is True and kept["duplicate"] is False, kept
    assert kept["message_id"].startswith("hermes:fact:")
    again = call(manager, REMEMBER, {"fact": f"  {FACT.replace(' ', '  ')} "})
    assert again["stored"] is True and again["duplicate"] is True, again
    assert again["message_id"] == kept["message_id"]
    live.stack.flush(AGENT)

    [chunk] = [p for p in live.stack.payloads("mem_hermes-test") if FACT in p["text"]]
    assert chunk["source"] == "hermes"
    assert chunk["conversationId"] == "hermes:facts:u-7"
    assert chunk["messageIdList"] == [kept["message_id"]]
    assert chunk["userIdList"] == ["u-7"]
    assert chunk["text"].endswith(f"\nHermes: {FACT}")  # after the chunk's date line

    found = call(manager, SEARCH, {"query": "who keeps bees in Tromsø?", "limit": 3})
    manager.shutdown_all()
    assert found["query"] == "who keeps bees in Tromsø?"
    assert 1 <= found["count"] == len(found["memories"]) <= 3
    best = found["memories"][0]
    assert best["text"] == chunk["text"]
    assert best["speakers"] == "Hermes" and best["source"] == "hermes"
    assert best["date"].endswith("Z") and 0 < best["score"] <= 1


def test_search_leaves_out_the_turns_already_in_the_context(live: Live, hermes_home: Path) -> None:
    configure(hermes_home, live.url)
    provider = initialized(hermes_home, "t2")
    for user, assistant in SAILING:
        provider.sync_turn(user, assistant, session_id="t2")
    provider.shutdown()
    live.stack.flush(AGENT)
    question = {"query": "what is the name of grandmother's sailboat?"}

    same_session = initialized(hermes_home, "t2")
    for user, assistant in SAILING:  # the same turns again: their ids are in its context
        same_session.sync_turn(user, assistant, session_id="t2")
    assert call(same_session, SEARCH, question)["count"] == 0
    same_session.shutdown()

    other = initialized(hermes_home, "t3")
    found = call(other, SEARCH, question)
    other.shutdown()
    assert found["count"] >= 1
    assert "Kittiwake" in found["memories"][0]["text"]


@pytest.mark.parametrize("context", ["subagent", "cron"])
def test_a_non_primary_agent_searches_but_does_not_remember(
    live: Live, hermes_home: Path, context: str
) -> None:
    configure(hermes_home, live.url)
    manager = manager_for(hermes_home, f"side-{context}", agent_context=context)
    answer = call(manager, REMEMBER, {"fact": f"a {context} job's fact about the harbour crane"})
    assert answer["stored"] is False
    assert context in answer["reason"] and "primary" in answer["reason"]
    assert "count" in call(manager, SEARCH, {"query": "the harbour crane"})
    manager.shutdown_all()
    live.stack.flush(AGENT)
    assert not [p for p in live.stack.payloads("mem_hermes-test") if "harbour crane" in p["text"]]


def test_bad_arguments_and_refusals_are_tool_results(live: Live, hermes_home: Path) -> None:
    configure(hermes_home, live.url)
    provider = initialized(hermes_home, "t-bad")
    for tool, args, says in [
        (SEARCH, {}, "`query` must be a non-empty string"),
        (SEARCH, {"query": "   "}, "`query` must be a non-empty string"),
        (SEARCH, {"query": "bees", "limit": "lots"}, "`limit` must be a whole number"),
        (SEARCH, "not an object", "`query` must be a non-empty string"),
        (REMEMBER, {"fact": 42}, "`fact` must be a non-empty string"),
        (REMEMBER, {"fact": "x" * 2001}, "at most 2000"),
        ("memory_pool_forget", {}, "no tool 'memory_pool_forget'"),
    ]:
        assert says in call(provider, tool, args)["error"], (tool, args)
    too_short = call(provider, REMEMBER, {"fact": "ok"})
    assert too_short["stored"] is False
    assert too_short["reason"] == "too short to keep as a memory"
    provider.shutdown()

    configure(hermes_home, live.url, agent="nobody-here")  # not in memory-pool's agents file
    stranger = initialized(hermes_home, "t-stranger")
    for tool, args in [(SEARCH, {"query": "bees"}), (REMEMBER, {"fact": FACT})]:
        error = call(stranger, tool, args)["error"]
        assert error.startswith("memory-pool refused (404 unknown_agent): "), error
        assert "nobody-here" in error
    stranger.shutdown()


def test_an_unreachable_or_unset_memory_pool_is_a_tool_result(hermes_home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens
    configure(hermes_home, url, timeout="1")
    provider = initialized(hermes_home, "t-down")
    for tool, args in [(SEARCH, {"query": "bees"}), (REMEMBER, {"fact": FACT})]:
        error = call(provider, tool, args)["error"]
        assert error.startswith(f"memory-pool at {url} is unreachable (ConnectError"), error
    provider.shutdown()

    unset = load_provider()  # Hermes asks for the tools before initialize
    assert [s["name"] for s in unset.get_tool_schemas()] == [SEARCH, REMEMBER]
    assert "not set up" in call(unset, SEARCH, {"query": "bees"})["error"]


def test_the_recall_block_given_to_the_model_is_not_saved_back(
    live: Live, hermes_home: Path
) -> None:
    from agent.memory_manager import build_memory_context_block

    configure(hermes_home, live.url)
    provider = initialized(hermes_home, "t-recall")
    for user, assistant in BAKERY:
        provider.sync_turn(user, assistant, session_id="t-recall")
    provider.shutdown()
    live.stack.flush(AGENT)

    manager = manager_for(hermes_home, "t-inject")
    question = "what shape are the cardamom buns at the Quay Street bakery?"
    recalled = manager.prefetch_all(question, session_id="t-inject")
    assert recalled.startswith(HEADER) and "cardamom" in recalled
    # Hermes 0.19.0 hands sync_turn the clean message; a host that injects the block into the
    # user's message (fenced as Hermes fences it, or bare) hands it back with the turn.
    for n, user in enumerate([f"{question}\n\n{build_memory_context_block(recalled)}",
                              f"{question}{recalled}"], start=1):  # fmt: skip
        manager.sync_all(user, f"they are shaped like knots, answer {n}", session_id="t-inject")
    manager.shutdown_all()
    live.stack.flush(AGENT)

    payloads = live.stack.payloads("mem_hermes-test")
    [chunk] = [p for p in payloads if p.get("conversationId") == "t-inject"]
    assert chunk["messageIdList"] == [f"hermes:t-inject:{t}:{r}" for t in (1, 2)
                                      for r in ("user", "assistant")]  # fmt: skip
    assert chunk["text"].count(question) == 2
    for injected in ("Past chat memories", "memory-context", "System note", "score:"):
        assert injected not in chunk["text"]


def test_turns_synced_in_one_millisecond_keep_their_order(hermes_home: Path) -> None:
    """Turn times were the clock's: two turns in one millisecond had the second question at or
    before the first answer, and their chunk put them out of order (a flaky test showed it)."""
    load_provider()
    turns = sys.modules[f"{MODULE}.turns"]
    session = turns.SessionTurns("s")
    stamps = []
    for turn in (1, 2, 3):
        body = turns.turn_messages("s", turn, "q", "a", now_ms=session.stamp(1_800_000_000_000))
        stamps += [m["ts"] for m in body]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert session.stamp(1_900_000_000_000) == 1_900_000_000_000  # the clock when it is later


def test_strip_recall_keeps_a_turn_without_a_block_as_it_is(hermes_home: Path) -> None:
    load_provider()
    strip_recall = sys.modules[f"{MODULE}.turns"].strip_recall
    other_reader = (
        '\n[Past chat memories]\n\n• Conversation (Ann, Bo): "we met at the ferry" (score: 71%)\n\n'
        '• Conversation (Bo): "the ferry was late" (score: 55%)\n\n'
    )
    assert strip_recall(f"and then?{other_reader}") == "and then?"
    for text in ["  plain text, kept as it is  ", "a list:\n• one\n• two", ""]:
        assert strip_recall(text, ["something recalled"]) == text


def test_background_work_goes_through_the_hosts_spawn_context_thread(
    live: Live, hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent.memory_provider as memory_provider

    assert not hasattr(memory_provider, "spawn_context_thread")  # 0.19.0 has none: plain threads
    spawned: list[str] = []

    def spawn_context_thread(target: Any, *, name: str, daemon: bool = True) -> threading.Thread:
        spawned.append(name)  # as newer Hermes: a thread bound to the caller's profile, unstarted
        return threading.Thread(target=target, name=name, daemon=daemon)

    monkeypatch.setattr(
        memory_provider, "spawn_context_thread", spawn_context_thread, raising=False
    )
    configure(hermes_home, live.url)
    provider = initialized(hermes_home, "t-spawn")
    provider.sync_turn(
        "the lighthouse has 117 steps", "117 steps is quite a climb", session_id="t-spawn"
    )
    provider.prefetch("how many steps?", session_id="t-spawn")
    provider.shutdown()
    assert spawned == ["memory-pool-sync", "memory-pool-recall"]
    live.stack.flush(AGENT)
    assert stored_ids(live, ["hermes:t-spawn:1:user"]) == ["hermes:t-spawn:1:user"]


def test_a_failing_spawn_context_thread_falls_back_to_a_plain_thread(
    live: Live, hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent.memory_provider as memory_provider

    def broken(target: Any, *, name: str, daemon: bool = True) -> threading.Thread:
        raise RuntimeError("no profile scope here")

    monkeypatch.setattr(memory_provider, "spawn_context_thread", broken, raising=False)
    configure(hermes_home, live.url)
    provider = initialized(hermes_home, "t-broken")
    provider.sync_turn(
        "the harbour bell rings at noon", "noon bells, good to know", session_id="t-broken"
    )
    provider.shutdown()
    live.stack.flush(AGENT)
    wanted = ["hermes:t-broken:1:assistant", "hermes:t-broken:1:user"]
    assert stored_ids(live, wanted) == wanted


def test_a_plain_thread_keeps_the_callers_hermes_home(hermes_home: Path, tmp_path: Path) -> None:
    """0.19.0 scopes a task's Hermes home in a context variable: the fallback thread carries it."""
    from hermes_constants import (
        get_hermes_home,
        reset_hermes_home_override,
        set_hermes_home_override,
    )

    load_provider()
    spawn_thread = sys.modules[f"{MODULE}.sender"].spawn_thread
    seen: list[Path] = []
    token = set_hermes_home_override(tmp_path / "profile-b")
    try:
        spawn_thread(lambda: seen.append(get_hermes_home()), "memory-pool-test").join(5)
    finally:
        reset_hermes_home_override(token)
    assert seen == [tmp_path / "profile-b"]


def test_a_memory_pool_that_never_answers_is_a_tool_result(hermes_home: Path) -> None:
    with socket.socket() as black_hole:  # accepts connections (backlog), never answers
        black_hole.bind(("127.0.0.1", 0))
        black_hole.listen(8)
        url = f"http://127.0.0.1:{black_hole.getsockname()[1]}"
        configure(hermes_home, url, timeout="0.5")
        provider = initialized(hermes_home, "t-silent")
        started = time.monotonic()
        error = call(provider, SEARCH, {"query": "bees"})["error"]
        assert time.monotonic() - started < 1.5
        assert error == f"memory-pool at {url} did not answer in time; try again later"
        provider.shutdown()
