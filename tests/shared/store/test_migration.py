"""A data folder of the previous version (qdrant-client's local mode in `<data_dir>/qdrant`),
built here with qdrant-client's local mode, is copied into Qdrant Edge on the first start, every
point with BM25 terms of its agent's language."""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient, models

from shared.embedding.bm25 import VECTOR_NAME, document_terms, encoding_of
from shared.store.bm25_terms import lacking_terms
from shared.store.edge.engine import EdgeStore
from shared.store.migration import MARKER, migrate_local_mode
from shared.store.qdrant.engine import QdrantStore
from shared.store.qdrant.rules import BM25_CONFIG, BM25_METADATA_KEY, model_metadata

DIM = 8
MODEL = "text-embedding-3-small"


def _vectors(i: int) -> dict[str, Any]:
    dense: dict[str, Any] = {"": [1.0, i / 100] + [0.0] * (DIM - 2)}
    if i % 2:
        dense[VECTOR_NAME] = models.SparseVector(indices=[i + 100, 7], values=[0.5, 1.5])
    return dense


def _payload(i: int) -> dict[str, Any]:
    return {"text": f"chunk {i}", "timestamp": i, "messageIdList": [f"m{i}"], "source": "discord"}


def _unit(vector: list[float] | None) -> list[float]:
    assert vector is not None
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def _previous_version(data_dir: Path) -> dict[str, int]:
    """Two collections: memory-pool's (model recorded, BM25 terms on half its points) and
    st-qdrant-memory's (no metadata, dense only); returns their sizes."""
    client = QdrantClient(path=str(data_dir / "qdrant"))
    vectors = models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    recorded = {BM25_METADATA_KEY: {"encoding": encoding_of("english")}}
    client.create_collection(
        "mem_ours",
        vectors,
        sparse_vectors_config=BM25_CONFIG,
        metadata={**model_metadata(MODEL, DIM), **recorded},
    )
    ours = [
        models.PointStruct(id=str(uuid.UUID(int=i + 1)), vector=_vectors(i), payload=_payload(i))
        for i in range(600)
    ]
    client.upsert("mem_ours", ours)
    client.create_collection("mem_theirs", vectors)
    theirs = [
        models.PointStruct(id=i, vector=[0.5] * DIM, payload={"text": f"st {i}", "isChunk": True})
        for i in range(1, 31)
    ]
    client.upsert("mem_theirs", theirs)
    client.close()
    return {"mem_ours": 600, "mem_theirs": 30}


def _languages(name: str) -> str:
    return "german" if name == "mem_theirs" else "english"


def _terms(text: str, language: str) -> tuple[list[int], list[float]]:
    terms = document_terms(text, language)
    return list(terms.indices), list(terms.values)


def _by_index(sparse: tuple[list[int], list[float]] | None) -> dict[int, float]:
    assert sparse is not None
    return dict(zip(*sparse, strict=True))


def test_every_point_vector_and_payload_moves_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    sizes = _previous_version(data_dir)
    old = QdrantStore(QdrantClient(path=str(data_dir / "qdrant")), local=True)
    before = {name: list(old.iter_points(name)) for name in sizes}
    old.close()

    store = EdgeStore(data_dir / "edge")
    try:
        done = migrate_local_mode(data_dir, store, _languages)
        assert done is not None and done.points == sizes and not done.skipped
        for name in sizes:
            after = list(store.iter_points(name))
            assert [(p.id, p.payload) for p in after] == [(p.id, p.payload) for p in before[name]]
            for a, b in zip(after, before[name], strict=True):
                # Qdrant (server and Edge) keeps cosine vectors normalised; local mode as given
                assert a.vector == pytest.approx(_unit(b.vector), rel=1e-6, abs=1e-7)
                # terms of the recorded encoding kept, the missing ones made in the language
                want = b.sparse or _terms(str(b.payload["text"]), _languages(name))
                assert _by_index(a.sparse) == pytest.approx(_by_index(want))
            assert lacking_terms(store, name) == 0
        ours = store.collection("mem_ours")
        assert ours is not None and (ours.model, ours.size, ours.has_bm25) == (MODEL, DIM, True)
        assert ours.bm25_encoding == encoding_of("english")
        theirs = store.collection("mem_theirs")
        assert theirs is not None and theirs.model is None and theirs.size == DIM
        assert theirs.bm25_encoding == encoding_of("german")
        # both are usable as memory-pool collections: ours as it is, theirs adopted
        store.ensure_collection("mem_theirs", size=DIM, model=MODEL)
        hits = store.query("mem_ours", [1.0] + [0.0] * (DIM - 1), limit=2, score_threshold=None)
        assert [h.payload["text"] for h in hits] == ["chunk 0", "chunk 1"]
        # a second start does nothing
        store.upsert("mem_ours", [])
        assert migrate_local_mode(data_dir, store) is None
    finally:
        store.close()
    assert (data_dir / "edge" / MARKER).is_file()
    assert (data_dir / "qdrant" / "collection" / "mem_ours").is_dir()  # kept for the user


def test_a_data_folder_without_local_mode_data_has_nothing_to_migrate(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "data" / "edge")
    try:
        assert migrate_local_mode(tmp_path / "data", store) is None
        assert not (tmp_path / "data" / "edge" / MARKER).exists()
    finally:
        store.close()


def test_terms_of_another_language_are_left_to_the_backfill(tmp_path: Path) -> None:
    """A collection whose recorded encoding is not its agent's keeps its terms and encoding:
    the backfill alone re-makes a collection's terms for a new language."""
    data_dir = tmp_path / "data"
    _previous_version(data_dir)
    store = EdgeStore(data_dir / "edge")
    try:
        migrate_local_mode(data_dir, store, lambda name: "german")
        ours = store.collection("mem_ours")
        assert ours is not None and ours.bm25_encoding == encoding_of("english")
        assert lacking_terms(store, "mem_ours") == 300
        kept = [p.sparse for p in store.iter_points("mem_ours") if p.sparse]
        assert len(kept) == 300 and all(s[0] in ([i + 100, 7], [7, i + 100]) for i, s in
                                        zip(range(1, 600, 2), kept, strict=True))  # fmt: skip
        assert lacking_terms(store, "mem_theirs") == 0  # no encoding recorded: made in german
    finally:
        store.close()
