"""BM25 terms that wait for a gate file first: the work a test hands TermPool's child process
(module-level, so a spawned child can import it) to hold it busy while the test looks."""

from __future__ import annotations

import time
from pathlib import Path

from shared.embedding.bm25 import Terms, documents_terms

WAIT_LIMIT = 60.0  # a test that never opens the gate does not leave the child waiting forever


def after_gate(gate: Path, texts: list[str], language: str) -> list[Terms]:
    """`documents_terms` once `gate` exists (functools.partial binds the gate)."""
    until = time.monotonic() + WAIT_LIMIT
    while not gate.exists() and time.monotonic() < until:
        time.sleep(0.01)
    return documents_terms(texts, language)
