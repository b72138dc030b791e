"""The Store's browse reads (pages newest first, one point, chunks per day), run on both paths:
qdrant-client local mode and the REST test server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient, models

from shared.store.browse import DAY_MS
from shared.store.interface import PointToWrite, Store
from shared.store.memory_query import Cursor, MemoryFilters, memory_filter
from shared.store.qdrant.engine import QdrantStore
from tests.support.qdrant_server import QdrantTestServer
from tests.support.stores import KINDS, open_store

NAME = "mem_browse"
DIM = 4
MODEL = "test-model"
DAY0 = 1_750_000_000_000 - 1_750_000_000_000 % DAY_MS


def pid(i: int) -> str:
    return str(uuid.UUID(int=i + 1))


def point(i: int, ts: int, **payload: Any) -> PointToWrite:
    base = {"text": f"chunk {i}", "timestamp": ts, "messageIdList": [f"m{i}"]}
    return PointToWrite(id=pid(i), vector=[1.0, i / 10, 0.0, 0.0], payload=base | payload)


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def filled(store: Store) -> Store:
    """25 chunks; timestamps repeat in groups of 3 (ties), two sources, users u0-u2."""
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    points = [
        point(
            i, DAY0 + (i // 3) * 1000,
            source="discord" if i % 2 else "hermes", channelId=f"c{i % 3}",
            userIdList=[f"u{i % 3}"],
        )
        for i in range(25)
    ]  # fmt: skip
    store.upsert(NAME, points)
    return store


def expected_order(ids: list[int]) -> list[str]:
    keyed = sorted(ids, key=lambda i: (i // 3, pid(i)), reverse=True)
    return [pid(i) for i in keyed]


def all_pages(store: Store, filters: MemoryFilters, limit: int) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page, cursor = store.newest_page(NAME, memory_filter(filters), limit=limit, after=cursor)
        pages.append([point_id for point_id, _ in page])
        if cursor is None:
            return pages
        cursor = Cursor.decode(cursor.encode())  # through the wire form


@pytest.mark.parametrize("limit", [1, 2, 4, 7, 25, 30])
def test_pages_are_newest_first_with_ties_by_id_and_nothing_lost_or_doubled(
    filled: Store, limit: int
) -> None:
    pages = all_pages(filled, MemoryFilters(), limit)
    flat = [p for page in pages for p in page]
    assert flat == expected_order(list(range(25)))
    assert all(len(page) == limit for page in pages[:-1])
    assert pages[-1]


def test_filters_narrow_every_page(filled: Store) -> None:
    filters = MemoryFilters(source="discord", user_id="u1", since=DAY0 + 2000, until=DAY0 + 7000)
    wanted = [i for i in range(25) if i % 2 and i % 3 == 1 and 2 <= i // 3 <= 7]
    flat = [p for page in all_pages(filled, filters, 2) for p in page]
    assert flat == expected_order(wanted)
    channel = [p for page in all_pages(filled, MemoryFilters(channel_id="c0"), 3) for p in page]
    assert channel == expected_order([i for i in range(25) if i % 3 == 0])


def test_a_missing_collection_is_an_empty_page(store: Store) -> None:
    assert store.newest_page("mem_nobody", [], limit=5, after=None) == ([], None)
    assert store.point("mem_nobody", pid(1)) is None
    assert store.daily_counts("mem_nobody", start_ms=DAY0, days=3) == [{}, {}, {}]


def test_one_point_by_id(filled: Store) -> None:
    payload = filled.point(NAME, pid(4))
    assert payload is not None and payload["text"] == "chunk 4"
    assert filled.point(NAME, str(uuid.uuid4())) is None


def test_chunks_per_day_and_source(filled: Store) -> None:
    filled.upsert(NAME, [point(90, DAY0 + DAY_MS + 5), point(91, DAY0 + 3 * DAY_MS)])
    days = filled.daily_counts(NAME, start_ms=DAY0, days=3)
    assert days[0] == {"discord": 12, "hermes": 13}
    assert days[1] == {"": 1}  # st-qdrant-memory's point has no source
    assert days[2] == {}  # day 3 is past the window


def test_a_server_collection_without_the_timestamp_index_is_still_ordered(
    tmp_path: Path,
) -> None:
    """st-qdrant-memory creates no payload index; the server refuses to order by `timestamp`
    then, and the store sorts the matches itself."""
    with QdrantTestServer(tmp_path / "q") as server:
        raw = QdrantClient(url=server.url, prefer_grpc=False, timeout=5, check_compatibility=False)
        raw.create_collection(NAME, models.VectorParams(size=DIM, distance=models.Distance.COSINE))
        raw.upsert(NAME, [models.PointStruct(id=p.id, vector=p.vector, payload=p.payload)
                          for p in (point(i, DAY0 + i) for i in range(5))])  # fmt: skip
        with pytest.raises(Exception, match="No range index"):
            raw.scroll(NAME, order_by=models.OrderBy(key="timestamp"))
        store = QdrantStore(raw, local=False)
        page, cursor = store.newest_page(NAME, [], limit=3, after=None)
        assert [p for p, _ in page] == [pid(4), pid(3), pid(2)] and cursor is not None
        rest, end = store.newest_page(NAME, [], limit=3, after=cursor)
        assert [p for p, _ in rest] == [pid(1), pid(0)] and end is None
        raw.close()


@pytest.mark.parametrize(
    "raw",
    ["", "x_y", "12_", "12_not-a-uuid", "_" + str(uuid.uuid4()), "²_1", "9" * 40 + "_1", "1_²"],
)
def test_a_cursor_not_given_out_is_refused(raw: str) -> None:
    from shared.errors import InvalidInput

    with pytest.raises(InvalidInput):
        Cursor.decode(raw)


def test_a_large_group_of_equal_timestamps_pages_by_id(store: Store) -> None:
    """Ten chunks of one instant between two others: the pages cut the group anywhere."""
    store.ensure_collection(NAME, size=DIM, model=MODEL)
    store.upsert(NAME, [point(i, DAY0 + 5) for i in range(10)])
    store.upsert(NAME, [point(20, DAY0 + 9), point(21, DAY0)])
    flat = [p for page in all_pages(store, MemoryFilters(), 3) for p in page]
    tied = sorted((pid(i) for i in range(10)), reverse=True)
    assert flat == [pid(20), *tied, pid(21)]
