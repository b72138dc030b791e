"""Moving a pool on both stores: export -> import -> export is byte-equal (ids, payloads,
vectors, BM25 terms, tombstones, dedupe marks) but for the terms the import gave the points
without any; another model re-embeds; a collection of another size or model is refused; a cut
file is told apart from a whole one."""

from __future__ import annotations

import io
import json
import time
import uuid

import pytest
import redis

from shared.embedding.bm25 import document_terms, encoding_of
from shared.embedding.embedder import make_embedder
from shared.errors import DimensionMismatch
from shared.pool.format import BadExport, point_line, unit_vector
from shared.pool.marks import RedisMarks
from shared.pool.transfer import TransferRefused, export_lines, import_lines
from shared.settings import Settings
from shared.state import keys
from shared.store.bm25_terms import lacking_terms, record_encoding
from shared.store.interface import Store, StoredPoint
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer, embed_text

MODEL = "text-embedding-3-small"
SOURCE = "mem_src"


def embedder_for(embeddings: EmbeddingServer, model: str = MODEL, dims: int | None = None):  # type: ignore[no-untyped-def]
    values: dict[str, object] = {
        "EMBEDDING_PROVIDER": "openai",
        "EMBEDDING_BASE_URL": embeddings.url,
        "OPENAI_API_KEY": "test-key",
        "EMBEDDING_MODEL": model,
    }
    if dims is not None:
        values["EMBEDDING_DIMENSIONS"] = dims
    return make_embedder(Settings(**values))  # type: ignore[arg-type]


def seed(store: Store, client: redis.Redis, n: int = 40) -> list[str]:
    """A collection as memory-pool writes it (with BM25 terms on every other point), plus a
    tombstone and two dedupe marks of another agent beside this one's."""
    store.ensure_collection(SOURCE, size=EMBEDDING_DIMS, model=MODEL)
    record_encoding(store, SOURCE, encoding_of("english"))
    points = []
    for i in range(n):
        text = f"[2024-06-10]\nAlex: river number {i} — ünïcode ✓\nMythos: noted {i / 3}"
        terms = document_terms(text)
        points.append(
            StoredPoint(
                id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")),
                payload={"text": text, "messageIdList": [f"m{i}"], "score": i / 7, "n": i},
                vector=embed_text(text, EMBEDDING_DIMS),
                sparse=(list(terms.indices), list(terms.values)) if i % 2 else None,
            )
        )
    store.write_points(SOURCE, points)
    client.set(keys.seen(SOURCE, "discord", "gone:1"), "deleted")
    client.set(keys.seen(SOURCE, "discord", "m1"), "conv-a", ex=3600)
    client.set(keys.seen(SOURCE, "hermes", "m2"), "conv-b", ex=7200)
    client.set(keys.seen("mem_other", "discord", "x"), "deleted")
    return [p.id for p in points]


def export_text(store: Store, marks: RedisMarks, collection: str, **kw: object) -> str:
    return "".join(export_lines(store, marks, collection=collection, agent="mythos", **kw))  # type: ignore[arg-type]


def test_export_import_export_is_byte_equal(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    ids = seed(store, marks.redis)
    first = export_text(store, marks, SOURCE)
    lines = first.splitlines()
    header = json.loads(lines[0])
    assert header["counts"] == {"points": 40, "tombstones": 1, "dedupe": 2}
    assert header["model"] == MODEL and header["dimensions"] == EMBEDDING_DIMS
    assert header["bm25"] == {"encoding": encoding_of("english")}
    assert [json.loads(line)["id"] for line in lines[1:41]] == sorted(ids)
    kinds = [json.loads(line)["kind"] for line in lines[41:-1]]
    assert sorted(kinds) == ["dedupe", "dedupe", "tombstone"]
    end = {"kind": "end", "points": 40, "tombstones": 1, "dedupe": 2}
    assert json.loads(lines[-1]) == end

    # into another collection of the same store, and into a fresh Redis state
    marks.redis.flushall()
    embedder = embedder_for(embeddings)
    moved = import_lines(
        io.StringIO(first), store=store, marks=marks, embedder=embedder, collection="mem_dst"
    )
    assert (moved.points, moved.reembedded, moved.tombstones, moved.dedupe) == (40, 0, 1, 2)
    assert not embeddings.requests[1:]  # vectors were used as they are (one size probe)
    second = export_text(store, marks, "mem_dst")
    assert second.splitlines()[41:] == first.splitlines()[41:]
    assert [read_point(line) for line in second.splitlines()[1:41]] == [
        with_terms_line(line) for line in first.splitlines()[1:41]
    ]
    assert json.loads(second.splitlines()[0]) == {**header, "collection": "mem_dst"}
    # a tombstone stays a tombstone (no expiry), a dedupe mark keeps its time
    assert marks.redis.ttl(keys.seen("mem_dst", "discord", "gone:1")) == -1
    assert 3590 <= marks.redis.ttl(keys.seen("mem_dst", "discord", "m1")) <= 3600

    # importing again changes nothing (idempotent by point id)
    import_lines(
        io.StringIO(first), store=store, marks=marks, embedder=embedder, collection="mem_dst"
    )
    assert store.count("mem_dst") == 40
    third = export_text(store, marks, "mem_dst")
    assert _same_within_float32(third, first)


def read_point(line: str) -> dict[str, object]:
    """An exported point, its terms as (index, value) pairs in index order."""
    obj = json.loads(line)
    if "sparse" in obj:
        obj["sparse"] = sorted(zip(obj["sparse"]["indices"], obj["sparse"]["values"], strict=True))
    return obj  # type: ignore[no-any-return]


def with_terms_line(line: str, language: str = "english") -> dict[str, object]:
    """An exported point as it reads once imported: with terms of its text if it had none."""
    obj = read_point(line)
    if "sparse" not in obj:
        terms = document_terms(obj["payload"]["text"], language)
        point = StoredPoint(
            obj["id"], obj["payload"], None, (list(terms.indices), list(terms.values))
        )
        obj["sparse"] = read_point(point_line(point))["sparse"]
    return obj


def _same_within_float32(a: str, b: str) -> bool:
    """Re-importing onto existing points: qdrant-client's local mode normalizes an update in
    float64, a last-bit difference at most (the real server keeps a unit vector as it is)."""
    for la, lb in zip(a.splitlines()[1:41], b.splitlines()[1:41], strict=True):
        pa, pb = read_point(la), with_terms_line(lb)
        assert pa["payload"] == pb["payload"] and pa.get("sparse") == pb.get("sparse")
        assert max(abs(x - y) for x, y in zip(pa["vector"], pb["vector"], strict=True)) < 1e-6
    return True


def test_no_vectors_export_reembeds_on_import(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    seed(store, marks.redis)
    text = export_text(store, marks, SOURCE, vectors=False)
    assert all("vector" not in line and "sparse" not in line for line in text.splitlines()[1:41])
    moved = import_lines(
        io.StringIO(text),
        store=store,
        marks=marks,
        embedder=embedder_for(embeddings),
        collection="mem_again",
    )
    assert (moved.points, moved.reembedded) == (40, 40)
    again = {p.id: p for p in store.iter_points("mem_again")}
    original = {p.id: p for p in store.iter_points(SOURCE)}
    assert again.keys() == original.keys()
    for pid, point in original.items():
        assert again[pid].payload == point.payload
        mine, theirs = point.vector, again[pid].vector
        assert mine is not None and theirs is not None
        assert max(abs(a - b) for a, b in zip(mine, theirs, strict=True)) < 1e-5


def test_another_model_reembeds_into_a_new_collection(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    seed(store, marks.redis)
    text = export_text(store, marks, SOURCE)
    other = embedder_for(embeddings, model="text-embedding-3-large", dims=64)
    moved = import_lines(
        io.StringIO(text), store=store, marks=marks, embedder=other, collection="mem_large"
    )
    assert (moved.points, moved.reembedded, moved.tombstones, moved.dedupe) == (40, 40, 1, 2)
    state = store.collection("mem_large")
    assert state is not None and state.size == 64 and state.model == "text-embedding-3-large"
    texts = [r.n_inputs for r in embeddings.requests if r.model == "text-embedding-3-large"]
    assert sum(texts) >= 40  # every chunk went to the new model
    point = next(iter(store.iter_points("mem_large")))
    assert point.vector is not None
    expected = embed_text(str(point.payload["text"]), 64)
    assert max(abs(a - b) for a, b in zip(point.vector, expected, strict=True)) < 1e-5
    # the source collection is untouched
    assert store.collection(SOURCE).size == EMBEDDING_DIMS  # type: ignore[union-attr]


def test_a_collection_of_another_size_or_model_is_refused(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    seed(store, marks.redis)
    text = export_text(store, marks, SOURCE)
    # the configured model gives 64 dimensions; the source collection holds 128
    other = embedder_for(embeddings, model="text-embedding-3-large", dims=64)
    with pytest.raises(TransferRefused, match=r"size 128.*--collection") as info:
        import_lines(io.StringIO(text), store=store, marks=marks, embedder=other)
    assert isinstance(info.value.__cause__, DimensionMismatch)
    # same size, another recorded model
    store.ensure_collection("mem_named", size=EMBEDDING_DIMS, model="someone-else")
    with pytest.raises(TransferRefused, match="someone-else"):
        import_lines(
            io.StringIO(text),
            store=store,
            marks=marks,
            embedder=embedder_for(embeddings),
            collection="mem_named",
        )
    assert store.count("mem_named") == 0
    assert store.count(SOURCE) == 40


def test_a_cut_or_broken_file_is_told(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    seed(store, marks.redis)
    lines = export_text(store, marks, SOURCE).splitlines(keepends=True)
    embedder = embedder_for(embeddings)
    with pytest.raises(BadExport, match="cut short: it has no end line"):
        import_lines(lines[:11], store=store, marks=marks, embedder=embedder, collection="mem_cut")
    with pytest.raises(BadExport, match="holds 39 points and 3 marks, its end line says 40 and 3"):
        import_lines(lines[:5] + lines[6:], store=store, marks=marks, embedder=embedder)
    with pytest.raises(BadExport, match="a line after the end line"):
        import_lines([*lines, lines[1]], store=store, marks=marks, embedder=embedder)
    with pytest.raises(BadExport, match="not a memory-pool export"):
        import_lines(lines[1:], store=store, marks=marks, embedder=embedder)
    with pytest.raises(BadExport, match="line 3: not JSON"):
        import_lines([lines[0], lines[1], "{oops\n"], store=store, marks=marks, embedder=embedder)


def test_restore_keeps_the_longer_expiry_and_every_tombstone(marks: RedisMarks) -> None:
    from shared.pool.format import DedupeMark, Tombstone

    client = marks.redis
    now = int(time.time())
    client.set(keys.seen("c", "s", "long"), "v", ex=5000)
    client.set(keys.seen("c", "s", "short"), "v", ex=10)
    client.set(keys.seen("c", "s", "dead"), "deleted")
    marks.restore(
        "c",
        [
            DedupeMark("s", "long", now + 100, "w"),
            DedupeMark("s", "short", now + 1000, "w"),
            DedupeMark("s", "dead", now + 1000, "w"),
            DedupeMark("s", "past", now - 5, "w"),
            Tombstone("s", "short2"),
        ],
        now * 1000,
    )
    assert client.ttl(keys.seen("c", "s", "long")) > 4000
    assert 990 <= client.ttl(keys.seen("c", "s", "short")) <= 1000
    assert client.ttl(keys.seen("c", "s", "dead")) == -1
    assert client.get(keys.seen("c", "s", "dead")) == b"deleted"
    assert client.exists(keys.seen("c", "s", "past")) == 0
    assert client.ttl(keys.seen("c", "s", "short2")) == -1


def test_an_exported_vector_is_one_that_normalizing_leaves_as_it_is(
    store: Store, marks: RedisMarks
) -> None:
    """The export's vector is the fixed point of normalizing, so exporting what an import wrote
    gives it back: Edge keeps some of these seeded vectors 17 normalizations away from theirs
    (the search stopped at 16 and wrote a vector that moves again)."""
    seed(store, marks.redis)
    for point in store.iter_points(SOURCE):
        assert point.vector is not None
        once = unit_vector(point.vector)
        assert unit_vector(once) == once, point.id


def terms_by_id(store: Store, collection: str) -> dict[str, dict[int, float]]:
    """Every point's BM25 terms as {index: value} ({} for none), by point id."""
    return {
        p.id: dict(zip(p.sparse[0], p.sparse[1], strict=True)) if p.sparse else {}
        for p in store.iter_points(collection)
    }


def expected_terms(text: str, language: str) -> dict[int, float]:
    terms = document_terms(text, language)
    return dict(zip(terms.indices, terms.values, strict=True))


def test_an_import_without_terms_writes_every_point_with_its_terms(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    """A --no-vectors export (no terms either) leaves nothing to the backfill, in the agent's
    language, and the collection records that encoding so the backfill does not redo it."""
    seed(store, marks.redis)
    text = export_text(store, marks, SOURCE, vectors=False)
    moved = import_lines(
        io.StringIO(text), store=store, marks=marks, embedder=embedder_for(embeddings),
        collection="mem_de", language="german",
    )  # fmt: skip
    assert moved.points == 40
    assert lacking_terms(store, "mem_de") == 0
    state = store.collection("mem_de")
    assert state is not None and state.bm25_encoding == encoding_of("german")
    texts = {p.id: str(p.payload["text"]) for p in store.iter_points("mem_de")}
    got = terms_by_id(store, "mem_de")
    for pid, chunk in texts.items():
        assert got[pid] == pytest.approx(expected_terms(chunk, "german"))
    assert expected_terms(texts[pid], "german") != expected_terms(texts[pid], "english")


def test_terms_of_another_language_in_the_file_are_made_again(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    seed(store, marks.redis)  # english terms on every other point
    text = export_text(store, marks, SOURCE)
    import_lines(
        io.StringIO(text), store=store, marks=marks, embedder=embedder_for(embeddings),
        collection="mem_fr", language="french",
    )  # fmt: skip
    state = store.collection("mem_fr")
    assert state is not None and state.bm25_encoding == encoding_of("french")
    texts = {p.id: str(p.payload["text"]) for p in store.iter_points("mem_fr")}
    got = terms_by_id(store, "mem_fr")
    assert {pid: got[pid] for pid in texts} == {
        pid: pytest.approx(expected_terms(chunk, "french")) for pid, chunk in texts.items()
    }


def test_a_collection_recording_another_language_is_left_to_the_backfill(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    """Only the backfill re-makes a collection's terms for a new language: the import keeps
    the file's terms of the recorded encoding and makes none of another."""
    seed(store, marks.redis)
    text = export_text(store, marks, SOURCE)
    store.ensure_collection("mem_en", size=EMBEDDING_DIMS, model=MODEL)
    record_encoding(store, "mem_en", encoding_of("english"))
    import_lines(
        io.StringIO(text), store=store, marks=marks, embedder=embedder_for(embeddings),
        collection="mem_en", language="german",
    )  # fmt: skip
    state = store.collection("mem_en")
    assert state is not None and state.bm25_encoding == encoding_of("english")
    source = terms_by_id(store, SOURCE)
    assert terms_by_id(store, "mem_en") == {pid: pytest.approx(t) for pid, t in source.items()}
    assert lacking_terms(store, "mem_en") == 20
