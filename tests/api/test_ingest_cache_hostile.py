"""Review of /save's message cache (api/ingest.py) from outside: requests of messages that
share ids, texts and times but differ in one field, for agents that share or differ in their
naming, and an agents file reloaded between them; every line, fingerprint, skip and refusal
must be what preparing each message afresh gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api import ingest as ingest_module
from api.ingest import Naming, fields_of, ingest, prepare
from api.schemas import SaveMessage, SaveRequest
from shared.agents import AgentConfig
from shared.state.conversations import ConversationRef

TS = 1_718_000_000_000
NOW_S = 1_800_000_000.0
BASE = AgentConfig(name="mythos", self_speaker="Mythos", speaker_aliases={"42": "Ann"})
AGENTS = [
    BASE,
    AgentConfig(name="polaris", self_speaker="Mythos", speaker_aliases={"42": "Ann"}),  # same
    BASE.model_copy(update={"speaker_aliases": {"42": "Annabel"}}),  # reloaded
    BASE.model_copy(update={"self_speaker": "Mythos II"}),
    BASE.model_copy(update={"min_message_chars": 12}),
    AgentConfig(name="Mythos", speaker_aliases={"7": "Seven"}),  # its name is its speaker
]
MESSAGE = st.fixed_dictionaries(
    {
        "message_id": st.sampled_from(["1", "2", "a,b", "x" * 257]),
        "text": st.sampled_from(["hello there", "hello there!", "ok", "", None, " hi \x00 ",
                                 "é" * 600]),
        "ts": st.sampled_from([TS, TS + 1, 1_718_000_000, "2024-06-10T06:13:20Z", None, 10**20]),
        "speaker_kind": st.sampled_from(["user", "self"]),
    },
    optional={
        "user_id": st.sampled_from(["42", "7", "43", "a\nb"]),
        "discord_user_id": st.sampled_from(["42", "7"]),
        "speaker_name": st.sampled_from(["Bo", " Bo ", "a\nb", "x" * 500]),
        "channel_id": st.sampled_from(["c1", "c2"]),
        "conversation_id": st.sampled_from(["s1", "s2"]),
        "guild_id": st.sampled_from(["g1", "g2"]),
    },
)  # fmt: skip


def _expected(request: SaveRequest, agent: AgentConfig, now_ms: int) -> list[Any]:
    naming = Naming.of(agent)
    out: list[Any] = []
    for item in request.messages:
        ready = prepare(naming, fields_of(item), now_ms)
        out.append(("refused", ready[0]) if isinstance(ready, tuple) else
                   (item.message_id, ready.line, ready.fingerprint, ready.short))  # fmt: skip
    return out


def _got(request: SaveRequest, agent: AgentConfig) -> list[Any]:
    """What ingest made of each message, in request order (its batches group them by
    conversation)."""
    result = ingest(request, agent, "discord")
    refused = {r.index: r.field for r in result.refusals}
    rows: dict[str, list[Any]] = {}
    for batch in result.batches:
        short = set(batch.short)
        rows[batch.conversation.key] = [
            (mid, line, fp, n in short)
            for n, (mid, line, fp) in enumerate(
                zip(batch.ids, batch.lines, batch.fingerprints, strict=True), start=1
            )
        ]
    out: list[Any] = []
    for index, item in enumerate(request.messages):
        if index in refused:
            out.append(("refused", refused[index]))
        else:
            ref = ConversationRef(agent.collection_name, "discord", item.conversation_id,
                                  item.channel_id)  # fmt: skip
            out.append(rows[ref.key].pop(0))
    return out


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(st.tuples(st.sampled_from(range(len(AGENTS))),
                                st.lists(MESSAGE, min_size=1, max_size=6)),
                      min_size=1, max_size=6))  # fmt: skip
def test_cached_preparation_is_exactly_the_uncached_one(
    turns: list[tuple[int, list[dict[str, Any]]]],
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ingest_module.time, "time", lambda: NOW_S)
        for agent_index, messages in turns:
            agent = AGENTS[agent_index]
            request = SaveRequest(bot=agent.name, messages=[SaveMessage(**m) for m in messages])
            assert _got(request, agent) == _expected(request, agent, int(NOW_S * 1000))
