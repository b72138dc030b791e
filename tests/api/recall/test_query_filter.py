"""The Qdrant filter of a recall: a table of requests and the exact filter each becomes, then the
filters applied by a real (in-memory) Qdrant to points of both writers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from qdrant_client import QdrantClient, models

from api.recall.query_filter import RecallFilters, recall_filter
from shared.store.qdrant.filters import to_qdrant

T = 1_718_000_000_000


def match(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def excluded(*ids: str) -> models.FieldCondition:
    return models.FieldCondition(key="messageIdList", match=models.MatchAny(any=list(ids)))


def between(gte: int | None, lte: int | None) -> models.FieldCondition:
    return models.FieldCondition(key="timestamp", range=models.Range(gte=gte, lte=lte))


@pytest.mark.parametrize(
    ("filters", "excluded_ids", "expected"),
    [
        (RecallFilters(), [], None),
        (RecallFilters(), set(), None),
        (RecallFilters(source="hermes"), [], models.Filter(must=[match("source", "hermes")])),
        (RecallFilters(channel_id="c1"), [], models.Filter(must=[match("channelId", "c1")])),
        (RecallFilters(guild_id="g1"), [], models.Filter(must=[match("guildId", "g1")])),
        (RecallFilters(since=T), [], models.Filter(must=[between(T, None)])),
        (RecallFilters(until=T), [], models.Filter(must=[between(None, T)])),
        (RecallFilters(since=T, until=T + 5), [], models.Filter(must=[between(T, T + 5)])),
        # 0 is a bound (the epoch), not "no bound"
        (RecallFilters(since=0), [], models.Filter(must=[between(0, None)])),
        (RecallFilters(until=0), [], models.Filter(must=[between(None, 0)])),
        # exclusions go server-side through the list field, sorted for a stable filter
        (
            RecallFilters(),
            ["m2", "m10", "m1"],
            models.Filter(must_not=[excluded("m1", "m10", "m2")]),
        ),
        (RecallFilters(), frozenset({"b", "a"}), models.Filter(must_not=[excluded("a", "b")])),
        (
            RecallFilters(source="discord", channel_id="c1", guild_id="g1", since=T, until=T + 1),
            ["x"],
            models.Filter(
                must=[
                    match("source", "discord"),
                    match("channelId", "c1"),
                    match("guildId", "g1"),
                    between(T, T + 1),
                ],
                must_not=[excluded("x")],
            ),
        ),
    ],
)
def test_recall_filter(
    filters: RecallFilters, excluded_ids: list[str] | set[str], expected: models.Filter | None
) -> None:
    assert to_qdrant(recall_filter(filters, excluded_ids)) == expected


def test_never_matches_text_inside_message_ids() -> None:
    # clients.md §6: text matching inside the comma-joined `messageIds` is unreliable.
    built = to_qdrant(recall_filter(RecallFilters(source="s"), ["m1"]))
    assert built is not None
    conditions = [*(built.must or []), *(built.must_not or [])]
    assert all(getattr(c, "key", None) != "messageIds" for c in conditions)  # type: ignore[union-attr]


# --------------------------------------------------------------------------- applied by Qdrant

POINTS = {
    # memory-pool's chunks: the list field, source and place
    1: {"messageIds": "a1,a2", "messageIdList": ["a1", "a2"], "source": "discord",
        "channelId": "c1", "guildId": "g1", "timestamp": T},
    2: {"messageIds": "b1", "messageIdList": ["b1"], "source": "hermes", "timestamp": T + 10},
    3: {"messageIds": "m10", "messageIdList": ["m10"], "source": "discord",
        "channelId": "c2", "timestamp": T + 20},
    # st-qdrant-memory's chunk: only the comma-joined string, no source
    4: {"messageIds": "a2,s1", "isChunk": True, "timestamp": T + 30},
}  # fmt: skip


@pytest.fixture(scope="module")
def qdrant() -> Iterator[QdrantClient]:
    client = QdrantClient(":memory:")
    client.create_collection(
        "mem_t", vectors_config=models.VectorParams(size=2, distance=models.Distance.COSINE)
    )
    client.upsert(
        "mem_t",
        [models.PointStruct(id=i, vector=[1.0, 0.5], payload=p) for i, p in POINTS.items()],
        wait=True,
    )
    yield client
    client.close()


@pytest.mark.parametrize(
    ("filters", "excluded_ids", "ids"),
    [
        (RecallFilters(), [], [1, 2, 3, 4]),
        (RecallFilters(source="discord"), [], [1, 3]),
        (RecallFilters(source="hermes"), [], [2]),
        (RecallFilters(channel_id="c1"), [], [1]),
        (RecallFilters(guild_id="g1"), [], [1]),
        (RecallFilters(since=T + 10), [], [2, 3, 4]),
        (RecallFilters(until=T + 10), [], [1, 2]),
        (RecallFilters(since=T + 10, until=T + 20), [], [2, 3]),
        (RecallFilters(since=T + 11, until=T + 19), [], []),
        # any listed id excludes a memory-pool chunk; whole ids only ("m1" is not "m10")
        (RecallFilters(), ["a2"], [2, 3, 4]),
        (RecallFilters(), ["m1"], [1, 2, 3, 4]),
        (RecallFilters(), ["zz", "b1"], [1, 3, 4]),
        # st-qdrant-memory's chunk has no list: the server keeps it, recall_rules drops it
        (RecallFilters(), ["s1"], [1, 2, 3, 4]),
        (RecallFilters(source="discord", since=T + 1), ["a1"], [3]),
    ],
)
def test_qdrant_applies_the_filter(
    qdrant: QdrantClient, filters: RecallFilters, excluded_ids: list[str], ids: list[int]
) -> None:
    found, _ = qdrant.scroll(
        "mem_t",
        scroll_filter=to_qdrant(recall_filter(filters, excluded_ids)),
        limit=100,
        with_payload=False,
    )
    assert sorted(int(p.id) for p in found) == ids
