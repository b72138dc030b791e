"""Review: /save's per-message cache promises "about 40 MB at most, whatever clients send"."""

import tracemalloc

import pytest

from api import ingest
from api.schemas import SaveMessage
from shared.agents import AgentConfig

SAMPLE = 500


@pytest.mark.parametrize("ids", [256, 1])
def test_cache_of_hostile_messages_stays_near_its_documented_bound(ids: int) -> None:
    """Review: astral-character texts and 256-character ids cost ~22 KB an entry, ~180 MB at
    8,192 entries. Now the bound counts every field, and the largest entries it admits (ids of
    one character, the rest of the bound in emoji) fit 4,096 to a full cache under 60 MB."""
    naming = ingest.Naming.of(AgentConfig(name="mythos"))
    ingest._prepared_before.cache_clear()
    tracemalloc.start()
    try:
        for i in range(SAMPLE):
            mid = f"{i:0256d}" if ids == 256 else str(i)
            text_chars = 1499 if ids == 256 else ingest.CACHED_CHARS - 5 * ids - 2 * len(mid)
            item = SaveMessage(
                message_id=mid,
                text="\U0001f600" * text_chars + mid,
                ts=1_700_000_000_000 + i,
                speaker_kind="user",
                user_id="u" * ids,
                discord_user_id="d" * ids,
                channel_id="c" * ids,
                guild_id="g" * ids,
                conversation_id="k" * ids,
            )
            ingest._prepared(naming, item, 0)
        used, _ = tracemalloc.get_traced_memory()
        cached = ingest._prepared_before.cache_info().currsize
    finally:
        tracemalloc.stop()
        ingest._prepared_before.cache_clear()
    assert cached == (SAMPLE if ids == 1 else 0)  # the largest admitted are kept, not dropped
    assert used / SAMPLE * ingest._prepared_before.cache_info().maxsize < 60e6
