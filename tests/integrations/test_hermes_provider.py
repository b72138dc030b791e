"""The Hermes plugin as Hermes runs it: installed by `memory-pool hermes install`, loaded by
Hermes' own plugin loader, driven by Hermes' MemoryManager, against a running memory-pool."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.integrations.hermes_support import (
    AGENT,
    HEADER,
    MODULE,
    PLUGIN,
    configure,
    initialized,
    load_provider,
    stored_ids,
)
from tests.support.live_server import Live
from tests.support.redis_server import free_port

TURNS = [
    ("my cat is called Marmalade and she sleeps in the lighthouse lantern room",
     "Marmalade in the lantern room sounds like the warmest cat on the coast"),
    ("the lighthouse keeper feeds Marmalade sardines every morning",
     "sardines every morning, Marmalade has a good life with the keeper"),
    ("tomorrow I will paint the lighthouse door blue",
     "a blue lighthouse door will look lovely next to Marmalade's orange fur"),
]  # fmt: skip


def test_the_installed_plugin_is_a_hermes_memory_provider(hermes_home: Path) -> None:
    from agent.memory_provider import MemoryProvider
    from plugins.memory import discover_memory_providers

    folder = hermes_home / "plugins" / PLUGIN
    assert {p.name for p in folder.iterdir()} >= {"__init__.py", "plugin.yaml", "README.md"}
    client_copy = (folder / "memory_pool_client.py").read_text()
    assert client_copy == (Path(__file__).parents[2] / "client" / "http_client.py").read_text()

    provider = load_provider()
    assert isinstance(provider, MemoryProvider)
    assert provider.name == PLUGIN
    assert type(provider).__module__ == MODULE
    assert sys.modules[f"{MODULE}.memory_pool_client"].__file__ == str(
        folder / "memory_pool_client.py"
    )
    names = [schema["name"] for schema in provider.get_tool_schemas()]
    assert names == ["memory_pool_search", "memory_pool_remember"]
    assert not provider.is_available()  # no agent configured yet
    assert PLUGIN in [name for name, _, _ in discover_memory_providers()]

    schema = {field["key"]: field for field in provider.get_config_schema()}
    assert list(schema) == ["url", "agent", "timeout", "api_key"]
    assert schema["api_key"]["secret"] and schema["api_key"]["env_var"] == "MEMORY_POOL_API_KEY"
    provider.save_config({"url": "http://127.0.0.1:9", "agent": AGENT, "timeout": "2"}, hermes_home)
    provider.save_config({"timeout": "2.5", "api_key": "never-in-the-file"}, str(hermes_home))
    saved = json.loads((hermes_home / "memory-pool.json").read_text())
    assert saved == {"url": "http://127.0.0.1:9", "agent": AGENT, "timeout": "2.5"}
    assert provider.is_available()

    config = sys.modules[f"{MODULE}.config"]
    loaded = config.load_config(str(hermes_home), {"MEMORY_POOL_AGENT": "other"})
    assert (loaded.url, loaded.agent, loaded.timeout, loaded.api_key) == (
        "http://127.0.0.1:9", "other", 2.5, "",
    )  # fmt: skip


def test_turns_become_hermes_chunks_that_a_later_session_recalls(
    live: Live, hermes_home: Path
) -> None:
    from agent.memory_manager import MemoryManager

    configure(hermes_home, live.url)
    manager = MemoryManager()
    manager.add_provider(load_provider())
    manager.initialize_all(
        session_id="s1", platform="telegram", agent_context="primary",
        user_id="u-42", user_name="Alex",
    )  # fmt: skip
    transcript: list[dict[str, str]] = [{"role": "system", "content": "You are Hermes."}]
    for user, assistant in TURNS:
        transcript += [
            {"role": "user", "content": user},
            {"role": "assistant", "content": assistant},
        ]
        started = time.monotonic()
        manager.sync_all(user, assistant, session_id="s1", messages=list(transcript))
        assert time.monotonic() - started < 0.2
    manager.shutdown_all()  # drains Hermes' queue, then the plugin's
    live.stack.flush(AGENT)

    payloads = live.stack.payloads("mem_hermes-test")
    assert {p["source"] for p in payloads} == {"hermes"}
    assert {p["conversationId"] for p in payloads} == {"s1"}
    ids = [i for p in payloads for i in p["messageIdList"]]
    assert sorted(ids) == sorted(
        f"hermes:s1:{turn}:{role}" for turn in (1, 2, 3) for role in ("user", "assistant")
    )
    assert {s.strip() for p in payloads for s in p["speakers"].split(",")} == {"Alex", "Hermes"}
    text = "\n".join(p["text"] for p in payloads)
    assert f"Alex: {TURNS[0][0]}" in text and f"Hermes: {TURNS[0][1]}" in text
    assert {u for p in payloads for u in p["userIdList"]} >= {"u-42"}

    later = MemoryManager()
    later.add_provider(load_provider())
    later.initialize_all(session_id="s2", platform="cli", agent_context="primary")
    question = "what is my cat called, the one in the lighthouse?"
    recalled = later.prefetch_all(question, session_id="s2")
    later.shutdown_all()
    assert recalled.startswith(HEADER), recalled
    assert "Marmalade" in recalled


def test_a_restarted_provider_continues_the_sessions_turn_numbers(
    live: Live, hermes_home: Path
) -> None:
    configure(hermes_home, live.url)
    transcript = [{"role": role, "content": f"{role} line {n} about the harbour"}
                  for n in range(1, 5) for role in ("user", "assistant")]  # fmt: skip
    provider = initialized(hermes_home, "s3")
    provider.sync_turn("user line 4 about the harbour", "assistant line 4", session_id="s3",
                       messages=transcript)  # fmt: skip
    provider.sync_turn("user line 5 about the harbour", "assistant line 5", session_id="s3")
    provider.shutdown()
    live.stack.flush(AGENT)
    wanted = [f"hermes:s3:{turn}:{role}" for turn in (1, 4, 5) for role in ("user", "assistant")]
    assert stored_ids(live, wanted) == sorted(wanted[2:])


@pytest.mark.parametrize("context", ["subagent", "cron", "flush"])
def test_only_the_primary_agent_writes(live: Live, hermes_home: Path, context: str) -> None:
    configure(hermes_home, live.url)
    provider = initialized(hermes_home, f"side-{context}", agent_context=context)
    provider.sync_turn("a side job's prompt about the lighthouse", "a side job's answer")
    provider.shutdown()
    live.stack.flush(AGENT)
    ids = [f"hermes:side-{context}:1:user", f"hermes:side-{context}:1:assistant"]
    assert stored_ids(live, ids) == []


def test_a_down_memory_pool_costs_the_agent_nothing_but_an_empty_string(
    hermes_home: Path,
) -> None:
    configure(hermes_home, f"http://127.0.0.1:{free_port()}", timeout="1")  # nothing listens
    provider = initialized(hermes_home, "s-down")
    for user, assistant in TURNS:
        started = time.monotonic()
        provider.sync_turn(user, assistant, session_id="s-down")
        assert time.monotonic() - started < 0.05
    started = time.monotonic()
    assert provider.prefetch("what is my cat called?", session_id="s-down") == ""
    assert time.monotonic() - started < 1.5
    started = time.monotonic()
    provider.shutdown()
    assert time.monotonic() - started < 3


def test_a_memory_pool_that_never_answers_costs_at_most_the_timeout(hermes_home: Path) -> None:
    with socket.socket() as black_hole:  # accepts connections (backlog), never answers
        black_hole.bind(("127.0.0.1", 0))
        black_hole.listen(8)
        url = f"http://127.0.0.1:{black_hole.getsockname()[1]}"
        configure(hermes_home, url, timeout="0.5")
        provider = initialized(hermes_home, "s-silent")
        started = time.monotonic()
        assert provider.prefetch("what is my cat called?") == ""
        assert 0.4 < time.monotonic() - started < 1.0
        provider.shutdown()
        time.sleep(0.3)  # the abandoned recall times out too, before the socket closes
