"""Golden tests of chunk text, payload and the recall block (Format.md, clients.md §4)."""

from __future__ import annotations

import pytest

from shared.format.payload import ChunkContext, chunk_payload, chunk_text, messages_of
from shared.format.recall_block import RecallHit, js_to_fixed_0, recall_block, score_percent
from tests.support.factories import BASE_TS, msg

DAY_MS = 86_400_000


def conversation() -> list:
    return [
        msg(
            "m2",
            "<reply:@Mythos> and the lighthouse?",
            ts=BASE_TS + 60_000,
            speaker="Alex",
            user_id="111",
        ),
        msg("m1", "We walked to the harbour.", ts=BASE_TS, speaker="Alex", user_id="111"),
        msg(
            "m3",
            "The lighthouse was dark.",
            ts=BASE_TS + 60_000,
            speaker="Mythos",
            user_id="999",
            is_self=True,
        ),
        msg("m4", "Sam here, hi!", ts=BASE_TS + 120_000, speaker="Sam", user_id="222"),
    ]


def test_chunk_text_is_dated_sorted_and_has_no_trailing_newline() -> None:
    assert chunk_text(conversation()) == (
        "[2024-06-10]\n"
        "Alex: We walked to the harbour.\n"
        "Alex: <reply:@Mythos> and the lighthouse?\n"
        "Mythos: The lighthouse was dark.\n"
        "Sam: Sam here, hi!"
    )


def test_chunk_date_is_the_utc_date_of_the_oldest_message() -> None:
    late_evening = 1_718_060_000_000  # 2024-06-10T22:53:20Z, already the 11th east of UTC
    messages = [msg("b", "next day", ts=late_evening + DAY_MS), msg("a", "late", ts=late_evening)]
    assert chunk_text(messages).split("\n")[0] == "[2024-06-10]"


def test_payload_matches_format_md() -> None:
    context = ChunkContext(source="discord", channel_id="c1", guild_id="g1")
    assert chunk_payload(conversation(), context) == {
        "text": chunk_text(conversation()),
        "speakers": "Alex, Mythos, Sam",
        "messageCount": 4,
        "timestamp": BASE_TS,
        "messageIds": "m1,m2,m3,m4",
        "isChunk": True,
        "source": "discord",
        "messageIdList": ["m1", "m2", "m3", "m4"],
        "userIdList": ["111", "999", "222"],
        "channelId": "c1",
        "guildId": "g1",
        # memory-pool's own: what an edit or a delete rebuilds the chunk from, in text order
        "chunkMessages": [
            {"id": "m1", "speaker": "Alex", "ts": BASE_TS, "text": "We walked to the harbour.",
             "userId": "111"},
            {"id": "m2", "speaker": "Alex", "ts": BASE_TS + 60_000,
             "text": "<reply:@Mythos> and the lighthouse?", "userId": "111"},
            {"id": "m3", "speaker": "Mythos", "ts": BASE_TS + 60_000,
             "text": "The lighthouse was dark.", "userId": "999", "self": True},
            {"id": "m4", "speaker": "Sam", "ts": BASE_TS + 120_000, "text": "Sam here, hi!",
             "userId": "222"},
        ],
    }  # fmt: skip


def test_a_payloads_messages_read_back_as_they_were_written() -> None:
    payload = chunk_payload(conversation(), ChunkContext(source="discord"))
    assert messages_of(payload) == sorted(conversation(), key=lambda m: m.ts)
    assert messages_of({"text": "x"}) is None  # st-qdrant-memory's: cannot be rebuilt
    assert messages_of({"chunkMessages": [{"id": "a"}]}) is None  # unreadable: not rebuilt


def test_payload_leaves_out_what_is_unknown() -> None:
    messages = [msg("h1", "hello from hermes"), msg("h2", "hi back", speaker="Polaris")]
    payload = chunk_payload(messages, ChunkContext(source="hermes", conversation_id="sess-1"))
    assert "channelId" not in payload and "guildId" not in payload
    assert payload["conversationId"] == "sess-1"
    assert payload["userIdList"] == []
    assert payload["speakers"] == "Alex, Polaris"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12.5, "13"),
        (13.5, "14"),
        (0.5, "1"),
        (-2.5, "-3"),
        (28.499999999999996, "28"),
        (87.0, "87"),
        (99.99, "100"),
        (-0.4, "-0"),  # JavaScript keeps the sign: (-0.4).toFixed(0) is "-0"
        (0.0, "0"),
    ],
)
def test_js_to_fixed_0(value: float, expected: str) -> None:
    assert js_to_fixed_0(value) == expected


@pytest.mark.parametrize(
    ("score", "expected"),
    [(0.125, "13"), (0.285, "28"), (0.635, "64"), (0.8749, "87"), (0.3, "30"), (1.0, "100")],
)
def test_score_percent_rounds_like_javascript(score: float, expected: str) -> None:
    # 0.285 * 100 is 28.499999999999996 in doubles, so JS prints 28; 0.125 * 100 is exactly 12.5
    # and JS rounds the half up where Python's round() would give 12.
    assert score_percent(score) == expected


def test_recall_block_byte_for_byte() -> None:
    hits = [
        RecallHit(
            "a",
            0.8749,
            {
                "text": "[2024-06-10]\nAlex: hi\nMythos: hello",
                "speakers": "Alex, Mythos",
                "isChunk": True,
            },
        ),
        RecallHit(
            "b",
            0.125,
            {
                "text": "[2023-01-02]\nAlex: cats",
                "speakers": "Alex",
                "isChunk": True,
                "messageIds": "x_1_1",
            },
        ),
    ]
    assert recall_block(hits) == (
        "\n[Past chat memories]\n\n"
        '• Conversation (Alex, Mythos): "[2024-06-10] Alex: hi Mythos: hello" (score: 87%)\n\n'
        '• Conversation (Alex): "[2023-01-02] Alex: cats" (score: 13%)\n\n'
    )


def test_recall_block_is_empty_without_hits() -> None:
    assert recall_block([]) == ""


def test_legacy_single_message_points() -> None:
    hits = [
        RecallHit("u", 0.5, {"text": "I like tea", "speaker": "user", "timestamp": 1}),
        RecallHit("c", 0.4, {"text": "I know", "speaker": "character"}),
        RecallHit("x", 0.3, {"text": "who", "speaker": "narrator"}),
    ]
    assert recall_block(hits, legacy_user_label="Alex") == (
        "\n[Past chat memories]\n\n"
        '• Alex said: "I like tea" (score: 50%)\n\n'
        '• Character said: "I know" (score: 40%)\n\n'
        '• Character said: "who" (score: 30%)\n\n'
    )
    assert recall_block(hits[:1]).startswith('\n[Past chat memories]\n\n• User said: "I like')
