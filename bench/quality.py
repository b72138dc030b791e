"""Recall quality, dense vs hybrid in the same run, as the Discord plugin asks (limit 5,
threshold 0.3, its last 30 messages excluded): hit@5, full@5 and characters of context; then
the sweep of the lexical weight (dbsf) on this set and on long-chat-shaped conversations.

Run: .venv/bin/python -m bench.quality [--sweep-only] [--seeds 11,12,13]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from functools import cache
from typing import Any

from qdrant_client import QdrantClient

from api.recall.lexical import LexicalCollections
from api.recall.query_cache import QueryCache
from api.recall.query_filter import RecallFilters
from api.recall.request import RecallRequest
from api.recall.service import recall
from bench import quality_long_chats
from bench.quality_data import ConversationSet, build
from bench.stats import table
from shared.agents import AgentConfig
from shared.embedding.bm25 import document_terms
from shared.embedding.embedder import Embedder, InputRejected, make_embedder
from shared.format.chunking import cut
from shared.format.naming import point_id
from shared.format.payload import ChunkContext, chunk_payload, chunk_text, message_ids_of
from shared.settings import Settings
from shared.store.interface import PointToWrite, Store
from shared.store.qdrant.engine import QdrantStore
from tests.support.local_rrf import fuse_as_qdrant_server
from tests.support.minilm import model_folder

AGENT = AgentConfig(name="quality", self_speaker="Mythos")
# The in-memory store stands for a Qdrant server: its "rrf" rows fuse as one does (k = 60).
fuse_as_qdrant_server()


@cache
def _embedder() -> Embedder:
    settings = Settings(EMBEDDING_PROVIDER="local", EMBEDDING_MODEL_PATH=str(model_folder()))
    return make_embedder(settings)


def load(
    data: ConversationSet, agent: AgentConfig = AGENT, vectors: dict[str, list[float]] | None = None
) -> tuple[Store, QueryCache, int]:
    """The set's chunks in an in-memory store; `vectors` keeps their embeddings by text across
    loads of the same set (with other BM25 terms)."""
    embedder = _embedder()
    store = QdrantStore(QdrantClient(":memory:"), local=True)
    name = agent.collection_name
    store.ensure_collection(name, size=embedder.dimensions(), model=embedder.model)
    chunks = [
        c
        for s in data.sessions
        for c in (*cut(s, agent.rules).closed, cut(s, agent.rules).open)
        if c
    ]
    texts = [chunk_text(chunk) for chunk in chunks]
    known = {} if vectors is None else vectors
    missing = [text for text in dict.fromkeys(texts) if text not in known]
    for text, v in zip(missing, embedder.embed(missing) if missing else [], strict=True):
        if isinstance(v, InputRejected):
            raise SystemExit(f"the embedding model refused a chunk: {v}")
        known[text] = list(v)
    dense = [known[text] for text in texts]
    context = ChunkContext("discord", channel_id="c1")
    points = [
        PointToWrite(
            point_id(name, "discord", chunk[0].id),
            list(v),
            chunk_payload(chunk, context),
            document_terms(text, agent.language),
        )
        for chunk, text, v in zip(chunks, texts, dense, strict=True)
    ]
    store.upsert(name, points)
    return store, QueryCache(embedder), len(points)


def score(
    data: ConversationSet, store: Store, cache: QueryCache, agent: AgentConfig = AGENT, **mode: Any
) -> dict[str, Any]:
    lexical = LexicalCollections(store)
    base = RecallRequest("", frozenset(data.recent_ids), 5, 0.3, RecallFilters())
    rows: dict[str, list[tuple[bool, bool, int]]] = {}
    for q in data.questions:
        found = recall(agent, replace(base, query_text=q.text, **mode), store=store, cache=cache,
                       lexical=lexical)  # fmt: skip
        got = set().union(*(message_ids_of(h.payload) for h in found.hits)) if found.hits else set()
        hit = bool(q.evidence & got)
        rows.setdefault(q.kind, []).append((hit, q.evidence <= got, len(found.formatted)))
        rows.setdefault("all", []).append((hit, q.evidence <= got, len(found.formatted)))
    return {
        kind: (sum(h for h, _, _ in r) / len(r), sum(f for _, f, _ in r) / len(r),
               sum(c for _, _, c in r) / len(r), len(r))
        for kind, r in rows.items()
    }  # fmt: skip


MODES: list[tuple[str, dict[str, Any]]] = [
    ("dense", {"mode": "dense"}),
    ("hybrid dbsf, lexical >= 5 (default)", {"mode": "hybrid"}),
    ("hybrid dbsf, lexical >= 3", {"mode": "hybrid", "lexical_threshold": 3.0}),
    ("hybrid dbsf, lexical >= 7", {"mode": "hybrid", "lexical_threshold": 7.0}),
    ("hybrid dbsf, lexical >= 0", {"mode": "hybrid", "lexical_threshold": 0.0}),
    ("hybrid rrf, lexical >= 5", {"mode": "hybrid", "fusion": "rrf"}),
]


WEIGHTS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0]


def sweep(seeds: list[int]) -> str:
    """hit@5, full@5 and context of hybrid dbsf at each lexical weight, on the generated set
    and on long chats generated from each seed."""
    sets = [("generated", build())]
    sets += [(f"long chats {seed}", quality_long_chats.build(seed)) for seed in seeds]
    out = []
    for name, data in sets:
        store, cache, count = load(data)
        print(f"{name}: {sum(len(s) for s in data.sessions)} messages, {count} chunks")
        for weight in WEIGHTS:
            result = score(data, store, cache, mode="hybrid", lexical_weight=weight)
            for kind in ("all", "shared words", "paraphrase"):
                hit, full, chars, n = result[kind]
                out.append([name, weight, kind, n, f"{hit:.3f}", f"{full:.3f}", f"{chars:.0f}"])
    return table(["set", "lexical weight", "questions", "n", "hit@5", "full@5", "chars"], out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sweep-only", action="store_true", help="only the weight sweep")
    parser.add_argument("--seeds", default="11", help="seeds of the long chats, e.g. 11,12,13")
    args = parser.parse_args(argv)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    if args.sweep_only:
        print(sweep(seeds))
        return 0
    data = build()
    started = time.perf_counter()
    store, cache, count = load(data)
    took = time.perf_counter() - started
    messages = sum(len(s) for s in data.sessions)
    print(f"{messages} messages, {count} chunks, {len(data.questions)} questions ({took:.1f} s)")
    out = []
    for label, mode in MODES:
        result = score(data, store, cache, **mode)
        for kind in ("all", "shared words", "paraphrase"):
            hit, full, chars, n = result[kind]
            out.append([label, kind, n, f"{hit:.2f}", f"{full:.2f}", f"{chars:.0f}"])
    print(table(["recall", "questions", "n", "hit@5", "full@5", "context chars"], out))
    print(sweep(seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
