"""api/ingest.py's fast paths: a message of plain ids is cleared by one check, a message seen
before is prepared once (the plugin re-sends its last 30 on every turn), and its conversation's
batch is found once per scope."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api import ingest as ingest_module
from api.ingest import OTHER_IDS, Naming, fields_of, ingest, prepare
from api.schemas import SaveMessage, SaveRequest
from shared.agents import AgentConfig
from shared.format.ids import id_problem, message_id_problem
from shared.format.messages import Message
from shared.format.timestamps import MAX_STORABLE_MS, MS_THRESHOLD

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


A_TS = st.one_of(
    st.integers(min_value=TS - 10**12, max_value=TS + 10**12),
    st.sampled_from([TS, 1_718_000_000, "2024-06-10T06:13:20Z", "not a time", None, 10**20, -5]),
)


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(st.text(max_size=30), st.sampled_from(["", "  hi  ", "ok", "a\nb", "\ud800x"])),
    ts=A_TS,
    kind=st.sampled_from(["user", "self"]),
    user=st.one_of(st.none(), st.sampled_from(["42", "7", "a b"])),
    name=st.one_of(st.none(), st.sampled_from(["X", " Bo ", "a\nb"])),
)
def test_a_message_seen_before_is_stored_as_preparing_it_again_would(
    text: str, ts: object, kind: str, user: str | None, name: str | None
) -> None:
    """Twice in one request and again in the next: each copy as the uncached rule makes it
    (times that read the clock are not cached: their `now` is the request's)."""
    item = SaveMessage(message_id="1", text=text, ts=ts, speaker_kind=kind,  # type: ignore[arg-type]
                       user_id=user, speaker_name=name)  # fmt: skip
    for _ in range(2):
        result = ingest(SaveRequest(bot="mythos", messages=[item, item]), AGENT, "discord")
        expected = prepare(Naming.of(AGENT), fields_of(item), _now())
        if isinstance(expected, tuple):
            assert [(r.field, r.reason) for r in result.refusals] == [
                (expected[0], f"{expected[0]} {expected[1]}")
            ] * 2
            continue
        [batch] = list(result.batches)
        assert batch.fingerprints == [expected.fingerprint] * 2
        assert batch.short == ([1, 2] if expected.short else [])
        if type(ts) is int and MS_THRESHOLD < ts <= MAX_STORABLE_MS:
            assert batch.lines == [expected.line] * 2
        else:  # a time that reads the clock: the same rule, at the request's `now`
            assert [_timeless(line) for line in batch.lines] == [_timeless(expected.line)] * 2


def _timeless(line: str) -> dict[str, object]:
    record = json.loads(line)
    del record["ts"]
    return dict(record)


def _now() -> int:
    import time

    return int(time.time() * 1000)


@pytest.mark.parametrize(
    "changed",
    [
        {"self_speaker": "Mythos the Second"},
        {"speaker_aliases": {"42": "Annabel"}},
        {"min_message_chars": 50},
    ],
)
def test_a_message_seen_before_follows_its_agents_new_settings(changed: dict[str, object]) -> None:
    """The cache is keyed on what of the agent decides the stored form: an agents file
    reloaded with another speaker name, alias or minimum length is not served old lines."""
    items = [
        SaveMessage(message_id="1", text="hello there", ts=TS, user_id="42"),
        SaveMessage(message_id="2", text="hello there", ts=TS, speaker_kind="self"),
    ]
    before = list(ingest(SaveRequest(bot="mythos", messages=items), AGENT, "discord").batches)
    agent = AGENT.model_copy(update=changed)
    after = list(ingest(SaveRequest(bot="mythos", messages=items), agent, "discord").batches)
    expected = [prepare(Naming.of(agent), fields_of(i), 0) for i in items]
    assert [e.line for e in expected] == after[0].lines  # type: ignore[union-attr]
    assert after[0].lines != before[0].lines or after[0].short != before[0].short


def test_a_time_read_from_the_clock_is_never_served_from_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A message without a time is stored at the request's time: the same message in a later
    request gets the later time (a cached line would keep the first)."""
    item = SaveMessage(message_id="1", text="hello there", ts=None)
    clock = iter([1_800_000_000.0, 1_800_000_060.0])
    monkeypatch.setattr(ingest_module.time, "time", lambda: next(clock))
    stamps = []
    for _ in range(2):
        [batch] = list(ingest(SaveRequest(bot="mythos", messages=[item]), AGENT, "discord").batches)
        stamps.append(Message.from_json(batch.lines[0]).ts)
    assert stamps == [1_800_000_000_000, 1_800_000_060_000]
