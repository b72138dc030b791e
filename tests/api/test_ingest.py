"""api/ingest.py's fast paths: a message of plain ids is cleared by one check, its speaker is
resolved once per request, and its conversation's batch is found once per scope."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from api.ingest import OTHER_IDS, ingest
from api.schemas import SaveMessage, SaveRequest
from shared.agents import AgentConfig
from shared.format.ids import id_problem, message_id_problem
from shared.format.messages import Message

AGENT = AgentConfig(name="mythos", speaker_aliases={"42": "Ann"})
TS = 1_718_000_000_000

AN_ID = (
    st.text(alphabet=st.characters(codec=None), min_size=1, max_size=20)
    | st.text(alphabet="0123456789", min_size=1, max_size=140)
    | st.sampled_from(["1250000010000000063", "a,b", " x", "x" * 257, "\ud800", "é", "a b"])
)


def _first_problem(fields: dict[str, str | None]) -> tuple[str, str] | None:
    # the rule as written before the fast path: message_id, then each other id in order
    problem = message_id_problem(str(fields["message_id"]))
    if problem:
        return "message_id", problem
    for field in OTHER_IDS:
        value = fields[field]
        problem = id_problem(value) if value is not None else None
        if problem:
            return field, problem
    return None


@settings(max_examples=400, deadline=None)
@given(
    message_id=AN_ID,
    others=st.fixed_dictionaries({field: st.none() | AN_ID for field in OTHER_IDS}),
)
def test_plain_ids_are_cleared_as_each_rule_would(
    message_id: str, others: dict[str, str | None]
) -> None:
    fields = {"message_id": message_id, **others}
    item = SaveMessage(text="hello there", ts=TS, **fields)  # type: ignore[arg-type]
    result = ingest(SaveRequest(bot="mythos", messages=[item]), AGENT, "discord")
    expected = _first_problem(fields)
    if expected is None:
        assert result.refusals == []
        [batch] = list(result.batches)
        assert batch.ids == [message_id]
        assert [Message.from_json(line).id for line in batch.lines] == [message_id]
    else:
        [refusal] = result.refusals
        assert (refusal.field, refusal.reason) == (expected[0], f"{expected[0]} {expected[1]}")
        assert list(result.batches) == []


def test_one_conversation_seen_with_two_channels_keeps_its_order() -> None:
    # A conversation id names the conversation whatever the channel (ConversationRef.scope):
    # its messages stay one batch, in arrival order, named by the first; the first guild wins.
    def item(mid: str, channel: str, guild: str | None) -> SaveMessage:
        return SaveMessage(
            message_id=mid, text="hello there", ts=TS, conversation_id="c1",
            channel_id=channel, guild_id=guild,
        )  # fmt: skip

    items = [item("1", "a", None), item("2", "b", "g2"), item("3", "a", "g1"), item("4", "b", None)]
    result = ingest(SaveRequest(bot="mythos", messages=items), AGENT, "discord")
    [batch] = list(result.batches)
    assert batch.ids == ["1", "2", "3", "4"]
    assert batch.conversation.channel_id == "a"
    assert batch.guild_id == "g2"


def test_speakers_resolve_per_message_with_one_lookup_per_speaker() -> None:
    items = [
        SaveMessage(message_id="1", text="hello there", ts=TS, user_id="42", speaker_name="X"),
        SaveMessage(message_id="2", text="hello there", ts=TS, user_id="7", speaker_name=" Bo "),
        SaveMessage(message_id="3", text="hello there", ts=TS, user_id="7", speaker_name="Cy"),
        SaveMessage(message_id="4", text="hello there", ts=TS, speaker_kind="self"),
        SaveMessage(message_id="5", text="hello there", ts=TS, discord_user_id="8"),
        SaveMessage(message_id="6", text="hello there", ts=TS, user_id="42", speaker_name="X"),
    ]
    result = ingest(SaveRequest(bot="mythos", messages=items), AGENT, "discord")
    [batch] = list(result.batches)
    stored = [Message.from_json(line) for line in batch.lines]
    assert [m.speaker for m in stored] == ["Ann", "Bo", "Cy", "mythos", "8", "Ann"]
    assert [m.user_id for m in stored] == ["42", "7", "7", None, "8", "42"]
    assert [m.is_self for m in stored] == [False, False, False, True, False, False]
