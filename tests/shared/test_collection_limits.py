"""Collection names Qdrant could never write are refused where the agent is named, not at flush."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.agents import Agents, load_agents
from shared.errors import ConfigError, InvalidAgentName
from shared.format.naming import MAX_COLLECTION_CHARS, collection_name, collection_problem


@pytest.mark.parametrize(
    ("agent", "expected"),
    [("a" * 251, "mem_" + "a" * 251), ("A" * 251 + "!!!", "mem_" + "a" * 251)],
)
def test_names_up_to_qdrant_s_255_characters(agent: str, expected: str) -> None:
    assert collection_name(agent) == expected
    assert len(expected) == MAX_COLLECTION_CHARS


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("a" * 252, "would become a collection name of 256 characters; Qdrant allows 255"),
        ("b" * 1024, "is 1024 characters long; the limit is 255"),
        ("bell\x07", "contains control characters or lone surrogates"),
        ("half\ud800", "contains control characters or lone surrogates"),
        ("two\nlines", "contains control characters or lone surrogates"),
    ],
)
def test_unwritable_agent_names(agent: str, message: str) -> None:
    with pytest.raises(InvalidAgentName, match=message) as raised:
        collection_name(agent)
    assert len(str(raised.value)) < 300  # the name is shown shortened
    str(raised.value).encode("utf-8")


@pytest.mark.parametrize(
    ("collection", "problem"),
    [
        ("mem_yukino", None),
        ("雪乃の記憶", None),
        ("x" * 255, None),
        ("x" * 256, "is 256 bytes long; Qdrant allows 255"),
        ("雪" * 86, "is 258 bytes long; Qdrant allows 255"),  # 86 characters, 258 bytes
        ("a/b", "contains '/', which Qdrant refuses in collection names"),
        ('we<"ird>', "contains '\"<>', which Qdrant refuses in collection names"),
        ("a:b", "contains ':', which Qdrant refuses in collection names"),
        ("..", "is not a usable folder name (control characters, dots only, or blank)"),
        ("tab\there", "is not a usable folder name (control characters, dots only, or blank)"),
        ("", "is empty"),
    ],
)
def test_collection_problems_follow_qdrant(collection: str, problem: str | None) -> None:
    assert collection_problem(collection) == problem


def test_a_configured_collection_is_checked_too() -> None:
    with pytest.raises(InvalidAgentName, match=r"collection 'a/b' contains '/'"):
        collection_name("Seraphina", "a/b")


def test_an_unlisted_name_over_the_limit_is_an_invalid_agent_name() -> None:
    with pytest.raises(InvalidAgentName, match="Qdrant allows 255"):
        Agents([], accept_unlisted=True).get("n" * 252)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("agents:\n  - name: x\n    collection: 'team/x'\n",
         r"agents\[0\]: collection 'team/x' contains '/'"),
        (f"agents:\n  - name: {'y' * 252}\n", r"agents\[0\]: agent name .* Qdrant allows 255"),
        (f"agents:\n  - name: x\n    collection: {'c' * 256}\n",
         r"agents\[0\]: collection .* is 256 bytes long"),
    ],
)  # fmt: skip
def test_the_agents_file_refuses_unwritable_collections(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_agents(path)
