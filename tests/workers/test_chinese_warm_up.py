"""jieba's dictionary is loaded at a worker's start only when an agent's language cuts Chinese
words: at once for a threads or solo pool, in each prefork child after its fork."""

from __future__ import annotations

from celery.signals import worker_process_init

from shared.embedding import chinese
from workers.celery_app import warm_chinese_words


def test_an_english_japanese_and_korean_worker_loads_nothing() -> None:
    receivers = len(worker_process_init.receivers)
    for pool in ("threads", "solo", "prefork"):
        assert warm_chinese_words(["english", "japanese", "korean"], pool) is None
    assert len(worker_process_init.receivers) == receivers


def test_a_threads_worker_of_a_chinese_agent_loads_at_start() -> None:
    thread = warm_chinese_words(["english", "chinese"], "threads")
    assert thread is not None
    thread.join(timeout=60)
    assert not thread.is_alive() and chinese.words("西湖") == ["西湖"]


def test_a_prefork_worker_loads_in_each_child_after_its_fork() -> None:
    before = list(worker_process_init.receivers)
    assert warm_chinese_words(["auto"], "prefork") is None
    added = [r for r in worker_process_init.receivers if r not in before]
    assert len(added) == 1
    try:
        worker_process_init.send(sender=None)  # what a prefork child sends after its fork
    finally:
        worker_process_init.receivers[:] = before
    assert chinese.words("西湖") == ["西湖"]
