"""KnownTexts alone: which re-sent messages a save leaves out, and what a reply settles."""

from __future__ import annotations

from shared.state.buffers import ConversationBatch, SaveCounts, SaveReply
from shared.state.conversations import ConversationRef
from shared.state.known_texts import KnownTexts

C1 = ConversationRef(collection="mem_mythos", source="discord", channel_id="c1")
C2 = ConversationRef(collection="mem_mythos", source="discord", channel_id="c2")
NOW = 1_800_000_000_000
UNTIL = NOW + 30_000


def batch(
    ref: ConversationRef, *ids: str, fp: str = "aa", short: tuple[str, ...] = ()
) -> ConversationBatch:
    out = ConversationBatch(ref)
    for message_id in ids:
        out.append(message_id, f'{{"i":"{message_id}"}}', fingerprint=fp,
                   short=message_id in short)  # fmt: skip
    return out


def reply(epochs: list[str], known: str) -> SaveReply:
    return SaveReply(SaveCounts(0, 0), epochs, known)


def confirmed(known: KnownTexts, *batches: ConversationBatch, epochs: list[str]) -> None:
    split = known.split(list(batches), NOW)
    known.record(split, reply(epochs, "k" * sum(len(b.ids) for b in split.sent)), UNTIL)


def test_a_confirmed_message_is_left_out_under_its_epoch() -> None:
    known = KnownTexts()
    confirmed(known, batch(C1, "a", "b", "c"), epochs=[" E1 o"])
    split = known.split([batch(C1, "a", "b", "c", "d")], NOW)
    assert split.sent[0].ids == ["d"]
    assert split.assumed == ["E1"]
    assert (split.duplicates, split.skipped) == (3, 0)


def test_another_text_a_lapsed_confirmation_or_another_channel_is_sent() -> None:
    known = KnownTexts()
    confirmed(known, batch(C1, "a", "b"), epochs=[" E1 o"])
    assert known.split([batch(C1, "a", "b", fp="bb")], NOW).sent[0].ids == ["a", "b"]
    assert known.split([batch(C1, "a", "b")], UNTIL).sent[0].ids == ["a", "b"]
    other = known.split([batch(C2, "a", "b")], NOW)
    assert other.sent[0].ids == ["a", "b"]
    assert other.assumed == [""]


def test_a_short_message_left_out_counts_skipped_and_keeps_its_place() -> None:
    known = KnownTexts()
    confirmed(known, batch(C1, "a", "b", short=("b",)), epochs=[" E1 o"])
    split = known.split([batch(C1, "a", "b", "c", "x", short=("b", "x"))], NOW)
    assert split.sent[0].ids == ["c", "x"]
    assert split.sent[0].short == [2]  # positions as the script counts them, after the left out
    assert (split.duplicates, split.skipped) == (1, 1)


def test_an_id_twice_in_a_request_is_sent_and_forgotten() -> None:
    known = KnownTexts()
    confirmed(known, batch(C1, "a", "b"), epochs=[" E1 o"])
    split = known.split([batch(C1, "a", "b"), batch(C2, "a")], NOW)
    assert split.sent[0].ids == ["a"]
    known.record(split, reply(["E1 E1 o", " E9 o"], "kkk"), UNTIL)
    assert known.split([batch(C1, "a", "b")], NOW).sent[0].ids == ["a"]


def test_an_epoch_moved_by_this_reply_s_own_ids_keeps_the_others() -> None:
    known = KnownTexts()
    confirmed(known, batch(C1, "a", "b", "c", "d"), epochs=[" E1 o"])
    split = known.split([batch(C1, "a", "b", "c", fp="bb")], NOW)
    known.record(split, reply(["E1 E2 o"], "k.."), UNTIL)  # a edited; b, c not confirmed
    again = known.split([batch(C1, "a", "b", "c", fp="bb")], NOW)
    assert again.sent[0].ids == ["b", "c"]
    assert again.assumed == ["E2"]
    # d, not in the reply, still holds under the moved epoch
    assert known.split([batch(C1, "d")], NOW).sent[0].ids == []


def test_an_epoch_moved_by_other_hands_forgets_the_conversation() -> None:
    known = KnownTexts()
    confirmed(known, batch(C1, "a", "b"), epochs=[" E1 o"])
    split = known.split([batch(C1, "c")], NOW)
    known.record(split, reply(["E5 E5 o"], "k"), UNTIL)  # another API moved it to E5 before
    assert known.split([batch(C1, "a", "b", "c")], NOW).sent[0].ids == ["a", "b"]
    known.record(known.split([batch(C1, "d")], NOW), reply(["E5 E6 f"], "k"), UNTIL)
    assert known.split([batch(C1, "c", "d")], NOW).sent[0].ids == ["c"]


def test_it_starts_over_when_full() -> None:
    known = KnownTexts(max_entries=4)
    confirmed(known, batch(C1, *"abcde"), epochs=[" E1 o"])
    assert len(known) == 5
    confirmed(known, batch(C2, "f"), epochs=[" E2 o"])
    assert len(known) == 1


def test_conversations_with_nothing_confirmed_count_toward_the_bound() -> None:
    # Found by a review: a client sending many channels of short messages grew the map's
    # conversations without end, none of them counted.
    known = KnownTexts(max_entries=100)
    for n in range(1_000):
        ref = ConversationRef("mem_mythos", "discord", channel_id=f"c{n}")
        split = known.split([batch(ref, "x", short=("x",))], NOW)
        known.record(split, SaveReply(SaveCounts(0, 0, skipped=1), ["  o"], "."), UNTIL)
    assert known.conversations() <= 101
