"""Golden and property tests of the chunker."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.format.chunking import ChunkRules, chunk_size, cut, is_storable
from shared.format.messages import Message
from shared.format.payload import chunk_text, utc_date
from tests.support.factories import BASE_TS, msg

SMALL = ChunkRules(max_chars=60, min_chars=30, min_messages=2, gap_seconds=3600)
HOUR_MS = 3_600_000


def ids(chunks: tuple[tuple[Message, ...], ...] | list[tuple[Message, ...]]) -> list[list[str]]:
    return [[message.id for message in chunk] for chunk in chunks]


def test_message_size_counts_text_speaker_and_overhead() -> None:
    assert msg("1", "hello", speaker="Al").size == 5 + 2 + 4


def test_closes_after_min_chars_and_min_messages() -> None:
    # Each message is 4 + 2 + 10 = 16 chars: two make 32 >= 30 and close the chunk.
    messages = [msg(str(i), "0123456789", speaker="Al") for i in range(5)]
    result = cut(messages, SMALL)
    assert ids(result.closed) == [["0", "1"], ["2", "3"]]
    assert [m.id for m in result.open] == ["4"]


def test_closes_before_max_chars() -> None:
    rules = ChunkRules(max_chars=60, min_chars=59, min_messages=2)
    # 16 + 16 + 16 = 48; a fourth (16) would make 64 > 60, so the chunk closes before it.
    messages = [msg(str(i), "0123456789", speaker="Al") for i in range(4)]
    result = cut(messages, rules)
    assert ids(result.closed) == [["0", "1", "2"]]
    assert [m.id for m in result.open] == ["3"]


def test_min_messages_keeps_a_big_single_message_open() -> None:
    big = msg("1", "x" * 40, speaker="Al")  # 46 >= 30, but only one message
    result = cut([big], SMALL)
    assert result.closed == () and result.open == (big,)


def test_a_question_waits_for_its_reply() -> None:
    messages = [
        msg("1", "0123456789", speaker="Al"),
        msg("2", "what is it?", speaker="Al"),  # 32 >= 30 but ends with "?"
        msg("3", "a thing", speaker="Bo"),
    ]
    result = cut(messages, SMALL)
    assert ids(result.closed) == [["1", "2", "3"]]
    assert result.open == ()


def test_a_question_still_obeys_the_max() -> None:
    messages = [
        msg("1", "0123456789", speaker="Al"),
        msg("2", "what is this thing here?", speaker="Al"),  # 16 + 30 = 46, open for a reply
        msg("3", "a much longer reply", speaker="Bo"),  # 25 more would be 71 > 60
    ]
    result = cut(messages, SMALL)
    assert ids(result.closed) == [["1", "2"]]
    assert [m.id for m in result.open] == ["3"]


def test_oversized_message_is_a_chunk_of_its_own_never_cut() -> None:
    huge = msg("2", "y" * 200, speaker="Al")
    messages = [msg("1", "0123456789", speaker="Al"), huge, msg("3", "0123456789", speaker="Al")]
    result = cut(messages, SMALL)
    assert ids(result.closed) == [["1"], ["2"]]
    assert result.closed[1][0].text == "y" * 200
    assert [m.id for m in result.open] == ["3"]


def test_gap_starts_a_new_chunk() -> None:
    messages = [
        msg("1", "hi", ts=BASE_TS),
        msg("2", "hi again", ts=BASE_TS + HOUR_MS),  # exactly the gap: not more, stays
        msg("3", "later", ts=BASE_TS + 2 * HOUR_MS + 1),  # more than 1 h after the newest
    ]
    result = cut(messages, SMALL)
    assert ids(result.closed) == [["1", "2"]]
    assert [m.id for m in result.open] == ["3"]


def test_gap_is_measured_from_the_newest_message_not_the_last_arrival() -> None:
    messages = [
        msg("1", "hi", ts=BASE_TS + HOUR_MS),
        msg("2", "older, late", ts=BASE_TS),
        msg("3", "then", ts=BASE_TS + 2 * HOUR_MS),  # 2 h after the arrival before it, 1 h
    ]  # after the chunk's newest message: no gap
    result = cut(messages, SMALL)
    assert ids(result.closed) == [["1", "2", "3"]] and result.open == ()


def test_default_rules_are_the_measured_ones() -> None:
    assert ChunkRules() == ChunkRules(
        max_chars=800, min_chars=500, min_messages=2, gap_seconds=21600, min_message_chars=5
    )


def test_short_messages_are_not_storable() -> None:
    rules = ChunkRules()
    assert not is_storable("", rules)
    assert not is_storable("  ok  ", rules)
    assert not is_storable("four", rules)
    assert not is_storable(" \n four \t", rules)
    assert is_storable("hello", rules)


# --- properties ------------------------------------------------------------------------

RULES = ChunkRules(max_chars=120, min_chars=70, min_messages=2, gap_seconds=600)

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=90)
message_specs = st.lists(
    st.tuples(texts, st.integers(min_value=-900_000, max_value=1_500_000), st.sampled_from("AB")),
    max_size=40,
)


def build(specs: list[tuple[str, int, str]]) -> list[Message]:
    messages, ts = [], BASE_TS
    for index, (text, step, speaker) in enumerate(specs):
        ts = max(0, ts + step)
        messages.append(msg(f"m{index}", text.strip() or "?", ts=ts, speaker=speaker))
    return messages


def cut_in_batches(messages: list[Message], cuts: list[int]) -> list[tuple[Message, ...]]:
    """The live pipeline: each batch joins the open tail, closed chunks are taken out."""
    chunks: list[tuple[Message, ...]] = []
    buffered: list[Message] = []
    start = 0
    for end in [*sorted(cuts), len(messages)]:
        buffered.extend(messages[start:end])
        start = max(start, end)
        result = cut(buffered, RULES)
        chunks.extend(result.closed)
        buffered = list(result.open)
    return chunks + ([tuple(buffered)] if buffered else [])


@settings(max_examples=300, deadline=None)
@given(message_specs, st.lists(st.integers(min_value=0, max_value=40), max_size=8))
def test_chunker_properties(specs: list[tuple[str, int, str]], cuts: list[int]) -> None:
    messages = build(specs)
    whole = cut(messages, RULES)
    chunks = [*whole.closed, *([whole.open] if whole.open else [])]

    # Every message lands in exactly one chunk, and chunks keep arrival order.
    assert [m.id for chunk in chunks for m in chunk] == [m.id for m in messages]
    for chunk in whole.closed:
        assert chunk_size(chunk) <= RULES.max_chars or len(chunk) == 1
    for chunk in chunks:
        text = chunk_text(chunk)
        lines = text.split("\n")
        assert lines[0] == f"[{utc_date(min(m.ts for m in chunk))}]"
        by_time = sorted(chunk, key=lambda m: m.ts)
        assert text == "\n".join([lines[0], *[f"{m.speaker}: {m.text}" for m in by_time]])
    # However the same sequence arrived in batches, the chunks are the same.
    assert cut_in_batches(messages, cuts) == chunks


# --- the flush plan --------------------------------------------------------------------

from shared.format.flush_plan import IMPORT_IDLE_SECONDS, idle_seconds, plan_flush  # noqa: E402


def test_a_flush_that_writes_nothing_keeps_what_the_stored_point_covers() -> None:
    # [m1, m2] was written as the open chunk (written=2); m3 arrived, nothing closes yet.
    messages = [msg("m1", "0123456789", speaker="Al"), msg("m2", "0123456789", speaker="Al"),
                msg("m3", "is it?", speaker="Al")]  # fmt: skip
    rules = ChunkRules(max_chars=200, min_chars=100, min_messages=2)
    plan = plan_flush(messages, rules, written=2, quiet_for_seconds=0, idle_seconds=60,
                      force=False)  # fmt: skip
    assert plan.writes == () and plan.written_after == 2


def test_a_backlog_is_flushed_a_slice_at_a_time() -> None:
    messages = [msg(str(i), "0123456789", speaker="Al") for i in range(10)]  # 5 closed chunks
    plan = plan_flush(messages, SMALL, written=0, quiet_for_seconds=999, idle_seconds=1,
                      force=True, max_closed=2)  # fmt: skip
    assert [[m.id for m in w.messages] for w in plan.writes] == [["0", "1"], ["2", "3"]]
    assert (plan.consumed, plan.open_count, plan.written_after) == (4, 0, 0)


@pytest.mark.parametrize(
    ("agent_idle", "idle_timer", "expected"),
    [(60.0, True, 60.0), (0.5, True, 0.5), (60.0, False, IMPORT_IDLE_SECONDS)],
)
def test_an_import_waits_for_its_final_flush_not_for_the_agents_idle_time(
    agent_idle: float, idle_timer: bool, expected: float
) -> None:
    assert idle_seconds(agent_idle, idle_timer=idle_timer) == expected
