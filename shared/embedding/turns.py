"""Turns at the local embedding model: one caller embeds at a time, and a caller that can wait
(POST /v1/embeddings' slices) goes after every other caller waiting (a recall's query, a flush),
so a client sending batches without pause never keeps recall from the model."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ModelTurns:
    """A lock whose waiters come in two classes: first (everyone by default) and after others,
    which takes the model only while no first-class caller waits for it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._busy = False
        self._first_waiting = 0

    @contextmanager
    def turn(self, *, after_others: bool = False) -> Iterator[None]:
        """Holds the model for the block; `after_others` yields to every first-class waiter."""
        with self._changed:
            if not after_others:
                self._first_waiting += 1
            try:
                while self._busy or (after_others and self._first_waiting):
                    self._changed.wait()
            finally:
                if not after_others:
                    self._first_waiting -= 1
            self._busy = True
        try:
            yield
        finally:
            with self._changed:
                self._busy = False
                self._changed.notify_all()
