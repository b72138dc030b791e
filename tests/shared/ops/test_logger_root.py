"""memory_pool's logging settings reach every package's loggers, whose names stay as they are."""

from __future__ import annotations

import logging

import pytest

import api.routes.save  # noqa: F401 - the modules whose loggers are checked
import shared.embedding.embedder  # noqa: F401
import workers.flush  # noqa: F401


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("name", ["api.routes.save", "shared.embedding.embedder", "workers.flush"])
def test_a_level_and_handler_on_memory_pool_reach_every_package(name: str) -> None:
    root = logging.getLogger("memory_pool")
    collect, level = Collect(), root.level
    root.addHandler(collect)
    try:
        root.setLevel(logging.DEBUG)
        logging.getLogger(name).debug("seen at debug")
        root.setLevel(logging.ERROR)
        logging.getLogger(name).warning("not seen above error")
    finally:
        root.removeHandler(collect)
        root.setLevel(level)
    assert [(r.name, r.getMessage()) for r in collect.records] == [(name, "seen at debug")]
