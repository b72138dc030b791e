"""A large /qdrant upsert's BM25 terms are made in a child process (api/qdrant/term_pool.py):
the same terms as in process, a small upsert's still in process, a killed child replaced, and
a child that cannot be had answered 503 in Qdrant's shape."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pytest

from api.qdrant import term_pool
from api.qdrant.shape import QdrantRefusal
from api.qdrant.term_pool import TermPool
from shared.embedding.bm25 import documents_terms

RNG = random.Random(28)
HAN = ["".join(chr(RNG.randrange(0x4E00, 0x9FA5)) for _ in range(3000)) for _ in range(3)]
MIXED = "雷门前的灯塔 Bartholomew rowed to the lighthouse，在雾里等她。ＮＨＫ ２０２４"
ENGLISH = ["Alex: Bartholomew rowed to the lighthouse in the fog"] * 40 + ["the garden"] * 200


@pytest.fixture
def pool() -> Iterator[TermPool]:
    made = TermPool(in_process_chars=100)
    yield made
    made.close()


@pytest.mark.parametrize(
    ("texts", "language"),
    [([*HAN, MIXED], "chinese"), ([*HAN, MIXED], "auto"), (ENGLISH, "english")],
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
