"""Checks the test Qdrant server through the real qdrant-client HTTP path."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from qdrant_client import QdrantClient
from qdrant_client.http import models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from tests.support.qdrant_server import SERVER_VERSION, QdrantTestServer

ROOT = Path(__file__).resolve().parents[2]
NAME = "memories"
DIM = 8
TAGS = [["red", "blue"], ["green"], ["red"], ["blue"], ["red"], ["green"]]


def vector(i: int) -> list[float]:
    # cosine to e0 is 1/sqrt(1 + (i/10)^2): the score falls as i grows
    return [1.0, i / 10] + [0.0] * (DIM - 2)


def score(i: int) -> float:
    return 1 / math.sqrt(1 + (i / 10) ** 2)


def make_client(server: QdrantTestServer) -> QdrantClient:
    return QdrantClient(url=server.url, prefer_grpc=False, timeout=5, check_compatibility=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[QdrantTestServer]:
    with QdrantTestServer(tmp_path / "qdrant") as running:
        yield running


@pytest.fixture
def client(server: QdrantTestServer) -> Iterator[QdrantClient]:
    qdrant = make_client(server)
    yield qdrant
    qdrant.close()


@pytest.fixture
def filled(client: QdrantClient) -> QdrantClient:
    client.create_collection(NAME, models.VectorParams(size=DIM, distance=models.Distance.COSINE))
    client.upsert(
        NAME,
        [
            models.PointStruct(
                id=i,
                vector=vector(i),
                payload={"tags": tags, "n": i, "kind": "b" if i == 2 else "a"},
            )
            for i, tags in enumerate(TAGS)
        ],
    )
    return client


def ids(points: list[models.ScoredPoint] | list[models.Record]) -> list[models.ExtendedPointId]:
    return [p.id for p in points]


def test_root_reports_the_client_version_and_health_is_plain_text(
    server: QdrantTestServer,
) -> None:
    with httpx.Client(base_url=server.url) as http:
        root = http.get("/").json()
        assert root == {"title": "qdrant - vector search engine", "version": SERVER_VERSION}
        for path in ("/healthz", "/readyz"):
            response = http.get(path)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/plain")


def test_collection_lifecycle_and_indexes(client: QdrantClient) -> None:
    assert client.create_collection(
        NAME, models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    assert client.collection_exists(NAME)
    assert not client.collection_exists("other")
    assert [c.name for c in client.get_collections().collections] == [NAME]

    client.create_payload_index(NAME, "tags", models.PayloadSchemaType.KEYWORD)
    client.create_payload_index(NAME, "n", models.PayloadSchemaType.INTEGER)
    info = client.get_collection(NAME)
    assert isinstance(info.config.params.vectors, models.VectorParams)
    assert info.config.params.vectors.size == DIM
    assert info.config.params.vectors.distance == models.Distance.COSINE
    assert info.points_count == 0
    assert info.payload_schema["tags"].data_type == models.PayloadSchemaType.KEYWORD
    assert info.payload_schema["n"].data_type == models.PayloadSchemaType.INTEGER

    client.delete_payload_index(NAME, "tags")
    assert set(client.get_collection(NAME).payload_schema) == {"n"}
    assert client.delete_collection(NAME)
    assert not client.collection_exists(NAME)


def test_query_points_with_filter_threshold_and_limit(filled: QdrantClient) -> None:
    flt = models.Filter(
        must=[
            models.FieldCondition(key="tags", match=models.MatchAny(any=["red", "blue"])),
            models.FieldCondition(key="n", range=models.Range(gte=1)),
        ],
        must_not=[models.FieldCondition(key="kind", match=models.MatchValue(value="b"))],
    )
    hits = filled.query_points(NAME, query=vector(0), query_filter=flt).points
    assert ids(hits) == [3, 4]
    assert hits[0].score == pytest.approx(score(3), abs=1e-5)
    assert hits[0].payload == {"tags": ["blue"], "n": 3, "kind": "a"}
    assert hits[0].vector is None

    above = filled.query_points(NAME, query=vector(0), query_filter=flt, score_threshold=0.95)
    assert ids(above.points) == [3]
    limited = filled.query_points(NAME, query=vector(0), limit=2, offset=1, with_vectors=True)
    assert ids(limited.points) == [1, 2]
    assert limited.points[0].vector == pytest.approx(
        [x / math.hypot(1, 0.1) for x in vector(1)], abs=1e-6
    )
    bare = filled.query_points(NAME, query=vector(0), limit=1, with_payload=False)
    assert bare.points[0].payload is None

    batch = filled.query_batch_points(
        NAME,
        [
            models.QueryRequest(query=vector(0), limit=1),
            models.QueryRequest(query=vector(5), filter=flt, limit=1),
        ],
    )
    assert [ids(r.points) for r in batch] == [[0], [4]]


def test_the_legacy_search_endpoint_answers_as_qdrant(
    server: QdrantTestServer, filled: QdrantClient
) -> None:
    # st-qdrant-memory searches with it; qdrant-client no longer can
    url = f"{server.url}/collections/{NAME}/points/search"
    flt = {"must_not": [{"key": "kind", "match": {"value": "b"}}]}
    body = {"vector": vector(0), "limit": 2, "filter": flt, "with_payload": True}
    found = httpx.post(url, json=body).json()["result"]
    assert [hit["id"] for hit in found] == [0, 1]
    assert found[1]["score"] == pytest.approx(score(1), abs=1e-5)
    assert found[1]["payload"] == {"tags": ["green"], "n": 1, "kind": "a"}
    above = httpx.post(url, json={"vector": vector(0), "limit": 9, "score_threshold": 0.99})
    assert [hit["id"] for hit in above.json()["result"]] == [0, 1]
    assert "payload" not in above.json()["result"][0]
    refused = httpx.post(url, json={"vector": vector(0)})
    assert refused.status_code == 400
    assert refused.json()["status"]["error"] == "Format error in JSON body: missing field `limit`"


def test_scroll_paginates_and_count_filters(filled: QdrantClient) -> None:
    green = models.Filter(
        must=[models.FieldCondition(key="tags", match=models.MatchValue(value="green"))]
    )
    first, offset = filled.scroll(NAME, scroll_filter=green, limit=1)
    assert ids(first) == [1]
    assert first[0].payload is not None
    second, offset = filled.scroll(NAME, scroll_filter=green, limit=1, offset=offset)
    assert (ids(second), offset) == ([5], None)

    pages, offset = filled.scroll(NAME, limit=4)
    assert (ids(pages), offset) == ([0, 1, 2, 3], 4)
    assert filled.count(NAME).count == len(TAGS)
    assert filled.count(NAME, count_filter=green).count == 2
    assert filled.get_collection(NAME).points_count == len(TAGS)


def test_delete_by_filter_and_ids_then_retrieve(filled: QdrantClient) -> None:
    red = models.Filter(
        must=[models.FieldCondition(key="tags", match=models.MatchAny(any=["red"]))]
    )
    filled.delete(NAME, models.FilterSelector(filter=red))
    filled.delete(NAME, models.PointIdsList(points=[5]))
    assert sorted(ids(filled.retrieve(NAME, [0, 1, 2, 3, 4, 5]))) == [1, 3]

    point_id = str(uuid.uuid4())
    filled.upsert(NAME, [models.PointStruct(id=point_id, vector=vector(1), payload={"n": 9})])
    [record] = filled.retrieve(NAME, [point_id], with_vectors=True)
    assert (record.id, record.payload) == (point_id, {"n": 9})
    assert record.vector is not None


def test_payload_updates(filled: QdrantClient) -> None:
    filled.set_payload(NAME, {"seen": True}, points=[0, 1])
    filled.set_payload(
        NAME,
        {"late": 1},
        points=models.Filter(must=[models.FieldCondition(key="n", range=models.Range(gt=4))]),
    )
    filled.overwrite_payload(NAME, {"only": "this"}, points=[2])
    filled.delete_payload(NAME, ["tags"], points=[0])
    records = {r.id: r.payload for r in filled.retrieve(NAME, [0, 1, 2, 5])}
    assert records[0] == {"n": 0, "kind": "a", "seen": True}
    assert records[1] == {"tags": ["green"], "n": 1, "kind": "a", "seen": True}
    assert records[2] == {"only": "this"}
    assert records[5] == {"tags": ["green"], "n": 5, "kind": "a", "late": 1}


def test_update_status_follows_wait(filled: QdrantClient) -> None:
    point = models.PointStruct(id=7, vector=vector(7))
    assert filled.upsert(NAME, [point]).status == models.UpdateStatus.COMPLETED
    assert filled.upsert(NAME, [point], wait=False).status == models.UpdateStatus.ACKNOWLEDGED


def test_errors_carry_the_server_status_codes(filled: QdrantClient) -> None:
    with pytest.raises(UnexpectedResponse) as wrong_size:
        filled.upsert(NAME, [models.PointStruct(id=9, vector=[1.0, 2.0])])
    assert wrong_size.value.status_code == 400
    assert "Vector dimension error" in wrong_size.value.structured()["status"]["error"]

    for missing_call in (
        lambda: filled.get_collection("missing"),
        lambda: filled.query_points("missing", query=vector(0)),
        lambda: filled.upsert("missing", [models.PointStruct(id=1, vector=vector(1))]),
    ):
        with pytest.raises(UnexpectedResponse) as missing:
            missing_call()
        assert missing.value.status_code == 404
        error = missing.value.structured()["status"]["error"]
        assert error == "Not found: Collection `missing` doesn't exist!"

    with pytest.raises(UnexpectedResponse) as duplicate:
        filled.create_collection(NAME, models.VectorParams(size=DIM, distance="Cosine"))
    assert duplicate.value.status_code == 409


def test_stop_start_keeps_port_and_data(server: QdrantTestServer, filled: QdrantClient) -> None:
    url = server.url
    server.stop()
    with pytest.raises(ResponseHandlingException) as down:
        filled.count(NAME)
    assert isinstance(down.value.source, httpx.ConnectError)

    server.start()
    assert server.url == url
    assert filled.count(NAME).count == len(TAGS)
    assert filled.get_collection(NAME).payload_schema == {}


def test_local_gives_the_underlying_client(server: QdrantTestServer, filled: QdrantClient) -> None:
    with server.local() as local:
        assert local.count(NAME).count == len(TAGS)
        local.delete(NAME, models.PointIdsList(points=[0]))
    assert filled.count(NAME).count == len(TAGS) - 1


def test_cli_prints_ready_and_stops_on_sigterm(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tests.support.qdrant_server", "--path", str(tmp_path)]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line.startswith("READY http://127.0.0.1:")
            # QdrantClient is no context manager, so close it by hand
            qdrant = QdrantClient(
                url=line.removeprefix("READY "), prefer_grpc=False, check_compatibility=False
            )
            try:
                assert qdrant.get_collections().collections == []
            finally:
                qdrant.close()
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:  # never leave the server behind a failed assertion
                process.kill()
                process.wait()
