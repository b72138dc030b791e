"""What a recall is asked and what it answers: the bottom of the recall package."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from api.recall.query_filter import RecallFilters
from shared.embedding.bm25 import DEFAULT_LEXICAL_THRESHOLD, DEFAULT_LEXICAL_WEIGHT
from shared.format.recall_block import RecallHit
from shared.store.interface import Fusion


@dataclass(frozen=True, slots=True)
class RecallRequest:
    query_text: str
    excluded_ids: frozenset[str]
    limit: int
    score_threshold: float
    filters: RecallFilters
    mode: Literal["hybrid", "dense"] = "dense"
    fusion: Fusion = "dbsf"
    lexical_threshold: float = DEFAULT_LEXICAL_THRESHOLD
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT
    # time words ("last weekend") boost the chunks of the window they name, relative to `now`
    # (Unix ms; None: the server's clock when recalling)
    time_words: bool = False
    now: int | None = None


@dataclass(frozen=True, slots=True)
class Recall:
    hits: Sequence[RecallHit]
    formatted: str
    queries: int  # vector queries it took (1 in the common case)
