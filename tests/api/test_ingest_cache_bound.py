"""Review: /save's per-message cache promises "about 40 MB at most, whatever clients send"."""

import tracemalloc

import pytest

from api import ingest
from api.schemas import SaveMessage
from shared.agents import AgentConfig

SAMPLE = 500


@pytest.mark.xfail(
    strict=True,
    reason="review: astral-char texts and 256-char ids cost ~22 KB an entry, ~180 MB at 8,192",
)
def test_cache_of_hostile_messages_stays_near_its_documented_bound() -> None:
    naming = ingest.Naming.of(AgentConfig(name="mythos"))
    ingest._prepared_before.cache_clear()
    tracemalloc.start()
    try:
        for i in range(SAMPLE):
            item = SaveMessage(
                message_id=f"{i:0256d}",
                text="\U0001f600" * 1499 + str(i % 10),
                ts=1_700_000_000_000 + i,
                speaker_kind="user",
                user_id="u" * 256,
                discord_user_id="d" * 256,
                channel_id="c" * 256,
                guild_id="g" * 256,
                conversation_id="k" * 256,
            )
            ingest._prepared(naming, item, 0)
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        ingest._prepared_before.cache_clear()
    assert used / SAMPLE * ingest._prepared_before.cache_info().maxsize < 60e6
