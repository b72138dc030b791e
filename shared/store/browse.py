"""The Store's reads for people: pages of chunks newest first, one point, chunks per day."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shared.format.fields import SOURCE, TIMESTAMP
from shared.store.filters import Condition, Filter
from shared.store.memory_query import (
    Cursor,
    before,
    newest_first,
    time_range,
    timestamp_of,
    with_conditions,
)

log = logging.getLogger(__name__)

Point = tuple[str, dict[str, Any]]
DAY_MS = 86_400_000
SCAN_BATCH = 2048
COUNT_BATCH = 10_000  # two small fields per point: big pages, few local-mode scans


class StoreBrowsing:
    """The base of `Store` (shared/store/interface.py), whose `ordered_page` and
    `scroll_payloads` it uses."""

    scroll_payloads: Callable[..., Iterator[Point]]
    ordered_page: Callable[..., list[Point] | None]

    @property
    def local(self) -> bool:
        raise NotImplementedError  # Store's

    def newest_page(
        self, name: str, must: list[Condition], *, limit: int, after: Cursor | None
    ) -> tuple[list[Point], Cursor | None]:
        """One page of matching chunks, newest first, and the cursor of the next (None at the
        end). Chunks without a numeric `timestamp` cannot be ordered and are not listed."""
        rows = self._fast_page(name, must, limit + 1, after)
        if rows is None:
            rows = self._exact_page(name, must, limit + 1, after)
        page = rows[:limit]
        last = page[-1] if len(rows) > limit and page else None
        return page, _cursor_of(last) if last else None

    def _fast_page(
        self, name: str, must: list[Condition], wanted: int, after: Cursor | None
    ) -> list[Point] | None:
        """One ordered scroll, enough when the page does not end inside a group of equal
        timestamps that the scroll may have cut (Qdrant orders ties in no particular order).
        The scroll starts at the cursor's timestamp (`start_from`, inclusive: the cursor's own
        chunk comes back too, hence one spare): an index seek on a server, and in local mode no
        range filter to evaluate in Python for every point."""
        asked = wanted + 2
        start = after.timestamp if after is not None else None
        got = self._ordered_scroll(name, with_conditions(must), asked, start_from=start)
        rows = [p for p in newest_first(got) if before(after, *p)]
        if len(got) < asked:
            return rows  # everything that matches is here
        lowest = timestamp_of(got[-1][1])
        complete = [p for p in rows if lowest is None or (timestamp_of(p[1]) or 0) > lowest]
        return rows[:wanted] if len(complete) >= wanted else None

    def _exact_page(
        self, name: str, must: list[Condition], wanted: int, after: Cursor | None
    ) -> list[Point]:
        """The cursor's timestamp group read whole, then the newest before it, whose last
        group is read whole too: right however many chunks share a timestamp."""
        ties: list[Point] = []
        upper: list[Condition] = []
        if after is not None:
            at_cursor = self._all(name, must, time_range(gte=after.timestamp, lte=after.timestamp))
            ties = [p for p in newest_first(at_cursor) if before(after, *p)]
            upper = [time_range(lt=after.timestamp)]
        if len(ties) >= wanted:
            return ties
        return ties + self._ordered(name, [*must, *upper], wanted - len(ties))

    def _ordered(self, name: str, must: list[Condition], wanted: int) -> list[Point]:
        """The `wanted` newest, ties by id. The ordered scroll returns equal timestamps in any
        order and cuts a group anywhere, so the last group is read whole and sorted here."""
        got = self._ordered_scroll(name, with_conditions(must), wanted)
        if len(got) < wanted:
            return newest_first(got)
        cut = timestamp_of(got[-1][1])
        whole = [p for p in got if timestamp_of(p[1]) != cut]
        if cut is not None:
            whole += self._all(name, must, time_range(gte=cut, lte=cut))
        return newest_first(whole)[:wanted]

    def _ordered_scroll(
        self, name: str, flt: Filter | None, limit: int, *, start_from: int | None = None
    ) -> list[Point]:
        got = self.ordered_page(name, flt, limit, start_from=start_from)
        if got is not None:
            return got
        # A server collection without the `timestamp` index (one st-qdrant-memory made, that
        # memory-pool never wrote to) cannot be ordered by Qdrant: sort every match here.
        log.warning("collection %s has no timestamp index; sorting its chunks in memory", name)
        found = self.scroll_payloads(name, query_filter=flt, batch=SCAN_BATCH)
        if start_from is not None:
            found = (p for p in found if (timestamp_of(p[1]) or 0) <= start_from)
        return newest_first(found)[:limit]

    def _all(self, name: str, must: list[Condition], *extra: Condition) -> list:
        flt = with_conditions(must, *extra)
        return list(self.scroll_payloads(name, query_filter=flt, batch=SCAN_BATCH))

    def daily_counts(self, name: str, *, start_ms: int, days: int) -> list[Counter[str]]:
        """Chunks per day (UTC) and source from `start_ms` on, by their `timestamp`; the key ""
        counts chunks without a source (st-qdrant-memory's). One scan of just two fields."""
        counts: list[Counter[str]] = [Counter() for _ in range(days)]
        # A server selects the window on its `timestamp` index. Local mode would test the range
        # in Python on every point for every page (9 s at 50k points, bench/viewer.py); reading
        # all points unfiltered and keeping the window here is 10x faster.
        window = time_range(gte=start_ms, lt=start_ms + days * DAY_MS)
        flt = None if self.local else Filter(must=(window,))
        fields = (TIMESTAMP, SOURCE)

        for payload in self._scan(name, flt, fields):
            stamp = timestamp_of(payload)
            if stamp is not None and 0 <= (day := (stamp - start_ms) // DAY_MS) < days:
                counts[day][str(payload.get(SOURCE, ""))] += 1
        return counts

    def _scan(
        self, name: str, flt: Filter | None, fields: Sequence[str]
    ) -> Iterator[dict[str, Any]]:
        pages = self.scroll_payloads(name, query_filter=flt, batch=COUNT_BATCH, fields=fields)
        for _, payload in pages:
            yield payload


def _cursor_of(point: Point) -> Cursor:
    stamp = timestamp_of(point[1])
    return Cursor(stamp if stamp is not None else 0, point[0])
