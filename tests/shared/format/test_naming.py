"""Golden tests of collection names, speaker names and point ids."""

from __future__ import annotations

import uuid

import pytest

from shared.errors import InvalidAgentName
from shared.format.naming import collection_name, point_id, sanitize_agent_name, speaker_name


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ("Seraphina", "mem_seraphina"),
        ("Dr. Smith", "mem_dr_smith"),
        ("Neko-chan!", "mem_neko-chan"),
        ("mythos", "mem_mythos"),
        ("  Lady   Ada  ", "mem_lady_ada"),
        ("__x__", "mem_x"),
        ("A_B-c9", "mem_a_b-c9"),
        ("Chloé", "mem_chlo"),
        ("雪乃 Yukino", "mem_yukino"),
        ("R2-D2 (droid)", "mem_r2-d2_droid"),
    ],
)
def test_collection_name_follows_st_qdrant_memory(agent: str, expected: str) -> None:
    assert collection_name(agent) == expected


def test_only_one_leading_and_trailing_underscore_is_stripped() -> None:
    # Runs collapse first, so at most one underscore is left at either end to strip.
    assert sanitize_agent_name("!!a!!") == "a"
    assert sanitize_agent_name("_") == ""


def test_configured_collection_wins() -> None:
    assert collection_name("Seraphina", "shared_pool") == "shared_pool"
    assert collection_name("雪乃", "mem_yukino") == "mem_yukino"


@pytest.mark.parametrize("agent", ["雪乃", "!!!", "", "___"])
def test_name_that_sanitizes_to_nothing_is_refused(agent: str) -> None:
    refusal = r"would become the collection 'mem_'.*set `collection`"
    with pytest.raises(InvalidAgentName, match=refusal):
        collection_name(agent)


ALIASES = {"111": "Alex", "222": "Sam"}


@pytest.mark.parametrize(
    ("is_self", "user_id", "given", "expected"),
    [
        (True, "999", "Mythos Bot", "Mythos"),
        (False, "111", "alex_discord", "Alex"),
        (False, "333", "Jordan", "Jordan"),
        (False, "333", None, "333"),
        (False, "333", "   ", "333"),
        (False, None, None, "User"),
        (False, None, "  Kim ", "Kim"),
    ],
)
def test_speaker_name(is_self: bool, user_id: str | None, given: str | None, expected: str) -> None:
    name = speaker_name(
        is_self=is_self,
        self_speaker="Mythos",
        speaker_aliases=ALIASES,
        user_id=user_id,
        given_name=given,
    )
    assert name == expected


def test_point_id_is_deterministic_and_distinct() -> None:
    first = point_id("mem_mythos", "discord", "1001")
    assert first == point_id("mem_mythos", "discord", "1001")
    assert uuid.UUID(first).version == 5
    # Pinned: a changed namespace or key layout would orphan every stored chunk's point.
    assert first == "278006ec-706e-57cd-80b1-bde858b9057b"
    others = {
        point_id("mem_other", "discord", "1001"),
        point_id("mem_mythos", "hermes", "1001"),
        point_id("mem_mythos", "discord", "1002"),
    }
    assert first not in others and len(others) == 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1250000000000000001", "1250000000000000001"), ("abcXYZ09", "abcXYZ09"), ("a:b", "a%3Ab"),
     ("50%", "50%25"), ("self-3-1", "self-3-1"), ("é", "%C3%A9"), ("", "")],
)  # fmt: skip
def test_key_parts_never_run_together(value: str, expected: str) -> None:
    from shared.state.keys import part

    assert part(value) == expected
