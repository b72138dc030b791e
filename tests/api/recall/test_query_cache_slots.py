"""A query's BM25 terms (jieba's words for Chinese, in the API's process) are made under the
recall slots, as its embedding: never more than MEMORY_POOL_RECALL_CONCURRENCY at once."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from api.recall import query_cache
from api.recall.query_cache import QueryCache, RecallBusy
from shared.embedding.bm25 import Terms

BOUND = 2
CALLERS = 6


class _Making:
    """A query_terms that holds until let go, counting how many are made at once."""

    def __init__(self) -> None:
        self.now = self.most = 0
        self.changed = threading.Condition()
        self.go = threading.Event()

    def __call__(self, text: str, language: str) -> Terms:
        with self.changed:
            self.now += 1
            self.most = max(self.most, self.now)
            self.changed.notify_all()
        self.go.wait(30)
        with self.changed:
            self.now -= 1
        return Terms((len(text),), (1.0,))


def test_query_terms_never_run_beyond_the_recall_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    making = _Making()
    monkeypatch.setattr(query_cache, "query_terms", making)
    cache = QueryCache(object(), concurrency=BOUND, wait=30)  # type: ignore[arg-type]
    got: list[Any] = []
    threads = [
        threading.Thread(target=lambda i=i: got.append(cache.terms(f"问题{i}", "chinese")))
        for i in range(CALLERS)
    ]
    for thread in threads:
        thread.start()
    with making.changed:
        # without the bound every caller is in at once; with it, no more than BOUND come in
        making.changed.wait_for(lambda: making.now >= CALLERS, timeout=1.0)
    making.go.set()
    for thread in threads:
        thread.join(30)
    assert len(got) == CALLERS and making.most == BOUND


def test_terms_wait_for_a_slot_no_longer_than_the_queue_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    making = _Making()
    monkeypatch.setattr(query_cache, "query_terms", making)
    cache = QueryCache(object(), concurrency=1, wait=0.05)  # type: ignore[arg-type]
    first = threading.Thread(target=cache.terms, args=("一", "chinese"))
    first.start()
    with making.changed:
        making.changed.wait_for(lambda: making.now == 1, timeout=10)
    try:
        with pytest.raises(RecallBusy):
            cache.terms("二", "chinese")
    finally:
        making.go.set()
        first.join(10)
    assert cache.terms("一", "chinese") == Terms((1,), (1.0,))  # cached: no slot needed
