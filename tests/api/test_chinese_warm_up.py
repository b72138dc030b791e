"""The API loads jieba's dictionary beside its start when some agent's language is chinese or
auto, and not at all for english, japanese and korean agents."""

from __future__ import annotations

import threading

import pytest

from shared.agents import AgentConfig, AgentDefaults, Agents
from shared.embedding import chinese
from tests.support.door import MakeApp, client_for


@pytest.fixture
def warmed(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread | None]:
    started: list[threading.Thread | None] = []
    original = chinese.warm_in_background

    def recorded(languages: frozenset[str]) -> threading.Thread | None:
        started.append(original(languages))
        return started[-1]

    monkeypatch.setattr(chinese, "warm_in_background", recorded)
    return started


@pytest.mark.parametrize("language", ["chinese", "auto"])
def test_a_chinese_or_auto_agent_warms_jieba_at_start(
    make_app: MakeApp, warmed: list[threading.Thread | None], language: str
) -> None:
    listed = Agents([AgentConfig(name="lin", language=language)], accept_unlisted=False)
    with client_for(make_app(listed)) as client:
        assert client.get("/health").status_code == 200
    (thread,) = warmed
    assert thread is not None
    thread.join(timeout=60)
    assert chinese.words("西湖") == ["西湖"]


def test_an_unlisted_agents_default_language_counts(
    make_app: MakeApp, warmed: list[threading.Thread | None]
) -> None:
    listed = Agents([], accept_unlisted=True, defaults=AgentDefaults(language="auto"))
    with client_for(make_app(listed)):
        pass
    assert warmed and warmed[0] is not None


def test_english_japanese_and_korean_agents_warm_nothing(
    make_app: MakeApp, warmed: list[threading.Thread | None]
) -> None:
    yui = AgentConfig(name="yui", language="japanese")
    listed = Agents([yui, AgentConfig(name="min", language="korean")], accept_unlisted=False)
    with client_for(make_app(listed)):
        pass
    assert warmed == [None]
