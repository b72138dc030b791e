"""A large /qdrant upsert's BM25 terms are made in a child process (api/qdrant/term_pool.py):
the same terms as in process, a small upsert's still in process, a killed child replaced, a
child that cannot be had, too many upserts waiting and a child that hangs answered 503 in
Qdrant's shape."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from api.qdrant import term_pool
from api.qdrant.shape import QdrantRefusal
from api.qdrant.term_pool import TermPool
from shared.embedding.bm25 import Terms, documents_terms
from tests.support.gated_terms import after_gate

RNG = random.Random(28)
HAN = ["".join(chr(RNG.randrange(0x4E00, 0x9FA5)) for _ in range(3000)) for _ in range(3)]
MIXED = "雷门前的灯塔 Bartholomew rowed to the lighthouse，在雾里等她。ＮＨＫ ２０２４"
JAPANESE = "昨日、山田さんと浅草の雷門で抹茶アイスを食べました。カラオケで歌いました。" * 40
ENGLISH = ["Alex: Bartholomew rowed to the lighthouse in the fog"] * 40 + ["the garden"] * 200


@pytest.fixture
def pool() -> Iterator[TermPool]:
    made = TermPool(in_process_chars=100)
    yield made
    made.close()


@pytest.mark.parametrize(
    ("texts", "language"),
    [
        ([*HAN, MIXED], "chinese"),
        ([*HAN, MIXED, JAPANESE], "auto"),
        ([JAPANESE, MIXED], "japanese"),
        (ENGLISH, "english"),
    ],
)
def test_terms_made_in_the_child_are_the_ones_made_in_process(
    pool: TermPool, texts: list[str], language: str
) -> None:
    assert pool.terms(texts, language) == documents_terms(texts, language)
    assert pool.started


def test_a_small_upsert_is_termed_in_process() -> None:
    small = TermPool()
    try:
        assert small.terms([MIXED], "chinese") == documents_terms([MIXED], "chinese")
        assert not small.started
    finally:
        small.close()


def test_a_killed_child_is_replaced(pool: TermPool) -> None:
    texts = ENGLISH
    assert pool.terms(texts, "english") == documents_terms(texts, "english")
    child = pool._current()
    for pid in list(child._processes):  # type: ignore[attr-defined]
        os.kill(pid, signal.SIGKILL)
    assert pool.terms(texts, "english") == documents_terms(texts, "english")
    assert pool._current() is not child


class _Broken:
    def __init__(self, **_: Any) -> None:
        pass

    def submit(self, *_: Any) -> Any:
        raise BrokenProcessPool("killed")

    def shutdown(self, **_: Any) -> None:
        pass


def _cannot_start(**_: Any) -> Any:
    raise OSError("no more processes")


@pytest.mark.parametrize("executor", [_Broken, _cannot_start])
def test_no_child_to_be_had_is_a_503(
    pool: TermPool, monkeypatch: pytest.MonkeyPatch, executor: Any
) -> None:
    monkeypatch.setattr(term_pool, "ProcessPoolExecutor", executor)
    with pytest.raises(QdrantRefusal) as refused:
        pool.terms(ENGLISH, "english")
    assert refused.value.status == 503 and "Service unavailable" in refused.value.message


def test_a_closed_pool_is_a_503_for_a_large_upsert_only(pool: TermPool) -> None:
    pool.close()
    assert pool.terms(["small"], "english") == documents_terms(["small"], "english")
    with pytest.raises(QdrantRefusal) as refused:
        pool.terms(ENGLISH, "english")
    assert refused.value.status == 503


def _children(pool: TermPool) -> list[int]:
    return list(pool._current()._processes)  # type: ignore[attr-defined]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class _Upsert(threading.Thread):
    """One large upsert's terms asked of the pool from a thread of its own, as the route's
    threadpool does."""

    def __init__(self, pool: TermPool) -> None:
        super().__init__(daemon=True)
        self.pool = pool
        self.terms: list[Terms] | None = None
        self.refused: QdrantRefusal | None = None
        self.start()

    def run(self) -> None:
        try:
            self.terms = self.pool.terms(ENGLISH, "english")
        except QdrantRefusal as exc:
            self.refused = exc


def _until(condition: Any, limit: float = 30.0) -> None:
    until = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < until, "timed out"
        time.sleep(0.01)


def test_more_large_upserts_than_the_queue_holds_are_refused_at_once(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    pool = TermPool(in_process_chars=100, max_queued=2, child_terms=partial(after_gate, gate))
    try:
        waiting = [_Upsert(pool), _Upsert(pool)]
        _until(lambda: pool.queued == 2)
        started = time.monotonic()
        with pytest.raises(QdrantRefusal) as refused:
            pool.terms(ENGLISH, "english")
        assert time.monotonic() - started < 1.0  # refused, not queued
        assert refused.value.status == 503 and "already waiting" in refused.value.message
        assert pool.terms(["a small one"], "english") == documents_terms(["a small one"], "english")
        gate.touch()
        for upsert in waiting:
            upsert.join(60)
            assert upsert.terms == documents_terms(ENGLISH, "english")
        assert pool.queued == 0
        assert pool.terms(ENGLISH, "english") == documents_terms(ENGLISH, "english")
    finally:
        gate.touch()
        pool.close()


def test_a_hung_child_is_killed_at_its_deadline_and_the_next_upsert_gets_a_fresh_one() -> None:
    # A child's start (its imports) counts in its deadline: 60 s while one starts, 1 s to wait
    # for the one that hangs.
    pool = TermPool(in_process_chars=100, deadline_base=60.0, deadline_chars_per_second=1e9)
    try:
        assert pool.terms(ENGLISH, "english") == documents_terms(ENGLISH, "english")
        (hung,) = _children(pool)
        os.kill(hung, signal.SIGSTOP)
        pool.deadline_base = 1.0
        started = time.monotonic()
        with pytest.raises(QdrantRefusal) as refused:
            pool.terms(ENGLISH, "english")
        assert 0.9 < time.monotonic() - started < 10.0
        assert refused.value.status == 503 and "did not answer within 1 s" in refused.value.message
        _until(lambda: not _alive(hung), limit=10.0)  # killed and reaped, not left stopped
        pool.deadline_base = 60.0
        assert pool.terms(ENGLISH, "english") == documents_terms(ENGLISH, "english")
        assert _children(pool) != [hung]
    finally:
        pool.close()


def test_closing_ends_a_busy_child_and_answers_its_waiters_503(tmp_path: Path) -> None:
    gate = tmp_path / "gate"  # never opened: the child stays busy until it is ended
    pool = TermPool(in_process_chars=100, child_terms=partial(after_gate, gate))
    waiting = [_Upsert(pool), _Upsert(pool)]
    _until(lambda: pool.queued == 2 and pool.started)
    _until(lambda: bool(_children(pool)))
    (child,) = _children(pool)
    started = time.monotonic()
    pool.close()
    assert time.monotonic() - started < 10.0
    for upsert in waiting:
        upsert.join(10)
        assert upsert.refused is not None and upsert.refused.status == 503
    assert not _alive(child)


def _fails(texts: list[str], language: str) -> list[Terms]:
    raise MemoryError("the child ran out")


def test_an_error_raised_in_the_child_is_a_503() -> None:
    pool = TermPool(in_process_chars=100, child_terms=_fails)
    try:
        with pytest.raises(QdrantRefusal) as refused:
            pool.terms(ENGLISH, "english")
        assert refused.value.status == 503 and "MemoryError" in refused.value.message
        assert pool.queued == 0
    finally:
        pool.close()


def test_closing_between_taking_the_child_and_giving_it_work_is_a_503() -> None:
    pool = TermPool(in_process_chars=100)
    pool.terms(ENGLISH, "english")  # the child is up
    taken = pool._current

    def taken_then_closed() -> Any:
        child = taken()
        pool.close()  # the app's shutdown, on another thread in service
        return child

    pool._current = taken_then_closed  # type: ignore[method-assign]
    with pytest.raises(QdrantRefusal) as refused:
        pool.terms(ENGLISH, "english")
    assert refused.value.status == 503 and "shutting down" in refused.value.message


def test_closing_a_pool_that_a_failed_upsert_just_shut_down_raises_nothing() -> None:
    # An upsert past its deadline discards the pool (shutdown, which drops the executor's
    # process table) while the app stops: close() finds no table and must still end cleanly.
    pool = TermPool(in_process_chars=100)
    assert pool.terms(ENGLISH, "english") == documents_terms(ENGLISH, "english")
    (child,) = _children(pool)
    executor = pool._pool
    assert executor is not None
    executor.shutdown(wait=False)
    pool.close()
    _until(lambda: not _alive(child), limit=10.0)
