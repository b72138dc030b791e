"""Recalls on Qdrant Edge as bulk work sees them: how many run now, when the last one ended,
and the backfill's way of giving way to them.

Edge runs in serve's process: a step of the BM25 backfill (reading a page, writing its terms,
and the optimize that re-indexes the points it moved) holds the shard's lock, and the optimize
the GIL, for up to a few hundred milliseconds; a recall arriving meanwhile waits it out. So the
backfill starts a step only when no recall runs, and while recalls come it spends at most
BULK_SHARE of the time on its steps (BENCHMARKS.md, "import with terms, exclusions near the
top"): idle, it runs at full speed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# While recalls came within RECENT_SECONDS, bulk work takes at most this share of the time.
BULK_SHARE = 0.05
RECENT_SECONDS = 2.0
# The longest a bulk step waits for running recalls, or pauses after a step: it always goes on.
MOST_WAIT_SECONDS = 2.0


class RecallTraffic:
    """Recalls in flight and the end of the last one, for this process's Edge store."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.running = 0
        self.last_end = float("-inf")

    @contextmanager
    def recall(self) -> Iterator[None]:
        with self._changed:
            self.running += 1
        try:
            yield
        finally:
            with self._changed:
                self.running -= 1
                self.last_end = time.monotonic()
                self._changed.notify_all()

    def give_way(self, worked: float) -> float:
        """After a bulk step of `worked` seconds: waits until no recall runs, then, if recalls
        came lately, pauses so the step was at most BULK_SHARE of the time; the seconds it
        waited."""
        started = time.monotonic()
        deadline = started + MOST_WAIT_SECONDS
        with self._changed:
            while self.running and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            recent = self.running > 0 or time.monotonic() - self.last_end < RECENT_SECONDS
        if recent:
            pause = worked * (1 / BULK_SHARE - 1) - (time.monotonic() - started)
            time.sleep(min(max(pause, 0.0), MOST_WAIT_SECONDS))
        return time.monotonic() - started
