"""Owns the test Qdrant: qdrant-client local mode served over the real Qdrant REST API."""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import pydantic_core
import uvicorn
from pydantic import TypeAdapter
from qdrant_client import QdrantClient
from qdrant_client.common import client_warnings
from qdrant_client.http import models
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.support.local_rrf import fuse_as_qdrant_server

# `GET /` must report a version the client accepts (same major, minor within 1), or every
# client prints a compatibility warning, which `filterwarnings = error` turns into a failure.
SERVER_VERSION = importlib.metadata.version("qdrant-client")
INDEX_FILE = "payload_indexes.json"
HOST = "127.0.0.1"
START_TIMEOUT_S = 10.0

# Local mode warns (once per process) that payload indexes and search params do nothing there.
# Through this server that is expected, and a warning raised in a worker thread under
# `filterwarnings = error` would turn into a 500; marking them seen is thread-safe,
# unlike `warnings.catch_warnings`.
LOCAL_MODE_NOTICES = (
    "create-local-payload-indexes",
    "delete-local-payload-indexes",
    "local_query_points_search_params_ignored",
    "large-local-collection",
)


# This server stands for a Qdrant server: its RRF fuses with a server's constant, not local mode's.
fuse_as_qdrant_server()


class ApiError(Exception):
    """An error answered with the server's status code and `{"status": {"error": ...}}`."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def collection_missing(name: str) -> ApiError:
    return ApiError(404, f"Not found: Collection `{name}` doesn't exist!")


@dataclass(frozen=True)
class Call:
    """What a handler needs from an HTTP request, read on the event loop."""

    path: Mapping[str, str]
    query: Mapping[str, str]
    body: bytes

    @property
    def collection(self) -> str:
        return self.path.get("collection_name", "")

    @property
    def wait(self) -> bool:
        return self.query.get("wait", "false").lower() == "true"


@cache
def _adapter(model: Any) -> TypeAdapter[Any]:
    # unions such as PointInsertOperations have no `model_validate_json`; adapters are costly
    # to build, so one per type
    return TypeAdapter(model)


def parse(model: Any, body: bytes) -> Any:
    """Parses a JSON body like the server: a malformed one is a 400."""
    try:
        return _adapter(model).validate_json(body or b"{}")
    except ValueError as exc:  # pydantic.ValidationError is a ValueError
        raise ApiError(400, f"Format error in JSON body: {exc}") from exc


def point_id(raw: str) -> models.ExtendedPointId:
    # ids in a URL are text; numeric ones are integer ids, everything else a UUID
    return int(raw) if raw.isdigit() else raw


def selector(points: Sequence[Any] | None, flt: models.Filter | None) -> Any:
    """Picks the point selector of payload/vector operations, which take ids or a filter."""
    if points is not None:
        return models.PointIdsList(points=list(points))
    if flt is not None:
        return models.FilterSelector(filter=flt)
    raise ApiError(400, "Bad request: Either `points` or `filter` is required")


class IndexRegistry:
    """Payload indexes per collection: local mode drops them, the server lists them."""

    def __init__(self, path: Path | None) -> None:
        self._file = path / INDEX_FILE if path is not None else None
        self._indexes: dict[str, dict[str, Any]] = {}
        if self._file is not None and self._file.exists():
            self._indexes = json.loads(self._file.read_text())

    def fields(self, collection: str) -> dict[str, Any]:
        return self._indexes.get(collection, {})

    def put(self, collection: str, field: str, schema: Any) -> None:
        dumped = pydantic_core.to_jsonable_python(schema, exclude_none=True)
        self._indexes.setdefault(collection, {})[field] = dumped
        self._save()

    def drop(self, collection: str, field: str | None = None) -> None:
        if field is None:
            self._indexes.pop(collection, None)
        else:
            self._indexes.get(collection, {}).pop(field, None)
        self._save()

    def _save(self) -> None:
        # kept beside local mode's storage so a restarted server still lists the indexes
        if self._file is not None:
            self._file.write_text(json.dumps(self._indexes))


def index_info(client: QdrantClient, name: str, field: str, raw: Any) -> models.PayloadIndexInfo:
    schema = _adapter(models.PayloadFieldSchema).validate_python(raw)
    params = None if isinstance(schema, models.PayloadSchemaType) else schema
    data_type = models.PayloadSchemaType(schema.value if params is None else params.type.value)
    # the server counts the points that have a value for the indexed field
    has_value = models.Filter(
        must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=field))]
    )
    points = client.count(name, count_filter=has_value).count
    return models.PayloadIndexInfo(data_type=data_type, params=params, points=points)


class Backend:
    """The one local-mode client, only ever touched under its lock (it is not thread-safe)."""

    def __init__(self, path: Path | None) -> None:
        client_warnings.SEEN_MESSAGES.update(LOCAL_MODE_NOTICES)
        # calls arrive on any threadpool thread; the lock serialises them, so SQLite's
        # same-thread check only gets in the way
        location = str(path) if path is not None else ":memory:"
        self.client = QdrantClient(path=location, force_disable_check_same_thread=True)
        self.indexes = IndexRegistry(path)
        self.lock = threading.Lock()
        self._operation_ids = itertools.count(1)

    def close(self) -> None:
        with self.lock:
            self.client.close()

    def execute(self, endpoint: Endpoint, call: Call) -> Any:
        with self.lock:
            if endpoint.needs_collection and not self.client.collection_exists(call.collection):
                raise collection_missing(call.collection)
            try:
                result = endpoint.handler(self, call)
            except (ValueError, TypeError) as exc:
                # local mode reports bad input (wrong vector size, unknown vector name, ...)
                # as ValueError with the server's own wording, and a vector of the wrong shape
                # (one vector where the collection keeps many) as TypeError; the server
                # validates its input and answers 400 "Wrong input" to both
                raise ApiError(400, str(exc)) from exc
            if isinstance(result, models.UpdateResult):
                return self.update_result(call)
            return result

    def update_result(self, call: Call) -> models.UpdateResult:
        # the operation is always applied before answering; `wait` only picks the status
        status = models.UpdateStatus.COMPLETED if call.wait else models.UpdateStatus.ACKNOWLEDGED
        return models.UpdateResult(operation_id=next(self._operation_ids), status=status)


class UpsertFaults:
    """Upserts that hang before or after being applied, for crash tests; thread-safe.

    A hang before applying ends with a 503 and the points never written, as if the request had
    never reached Qdrant; a hang after applying holds the answer of points already written.
    A hang ends after its seconds, or at once on `clear()` (and when the server stops).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._hung = threading.Condition(self._lock)
        self._seconds = 0.0
        self._before_apply = True
        self._times: int | None = 0
        self.hung = 0  # upserts that started hanging since the server was built
        self.hung_clients: list[tuple[str, int]] = []  # (host, port) of each, in order

    def arm(self, seconds: float, *, before_apply: bool, times: int | None) -> None:
        with self._lock:
            self._release = threading.Event()
            self._seconds, self._before_apply, self._times = seconds, before_apply, times

    def clear(self) -> None:
        with self._lock:
            self._times = 0
            self._release.set()

    def take(self, client: tuple[str, int] | None) -> tuple[threading.Event, float, bool] | None:
        """This upsert's hang, if one is armed: (release event, seconds, before_apply)."""
        with self._lock:
            if self._times == 0:
                return None
            if self._times is not None:
                self._times -= 1
            self.hung += 1
            self.hung_clients.append(client or ("", 0))
            self._hung.notify_all()
            return self._release, self._seconds, self._before_apply

    def wait_hung(self, count: int, timeout: float) -> bool:
        with self._lock:
            return self._hung.wait_for(lambda: self.hung >= count, timeout=timeout)


Handler = Callable[[Backend, Call], Any]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    needs_collection: bool = True


# --- collections -----------------------------------------------------------------------------


def list_collections(b: Backend, call: Call) -> Any:
    return b.client.get_collections()


def get_collection(b: Backend, call: Call) -> Any:
    info = b.client.get_collection(call.collection)
    info.payload_schema = {
        field: index_info(b.client, call.collection, field, raw)
        for field, raw in b.indexes.fields(call.collection).items()
    }
    return info


def collection_exists(b: Backend, call: Call) -> Any:
    return models.CollectionExistence(exists=b.client.collection_exists(call.collection))


def create_collection(b: Backend, call: Call) -> Any:
    body: models.CreateCollection = parse(models.CreateCollection, call.body)
    if b.client.collection_exists(call.collection):
        raise ApiError(409, f"Wrong input: Collection `{call.collection}` already exists!")
    b.indexes.drop(call.collection)
    return b.client.create_collection(
        call.collection,
        vectors_config=body.vectors,
        sparse_vectors_config=body.sparse_vectors,
        metadata=body.metadata,
    )


def update_collection(b: Backend, call: Call) -> Any:
    body: models.UpdateCollection = parse(models.UpdateCollection, call.body)
    b.client.update_collection(
        call.collection,
        vectors_config=body.vectors,
        sparse_vectors_config=body.sparse_vectors,
        metadata=body.metadata,
    )
    return True


def delete_collection(b: Backend, call: Call) -> Any:
    b.indexes.drop(call.collection)
    return b.client.delete_collection(call.collection)


def create_index(b: Backend, call: Call) -> Any:
    body: models.CreateFieldIndex = parse(models.CreateFieldIndex, call.body)
    if body.field_schema is None:
        raise ApiError(400, "Bad request: field_schema is required to create an index")
    b.client.create_payload_index(call.collection, body.field_name, body.field_schema)
    b.indexes.put(call.collection, body.field_name, body.field_schema)
    return models.UpdateResult(status=models.UpdateStatus.COMPLETED)


def delete_index(b: Backend, call: Call) -> Any:
    field = call.path["field_name"]
    b.client.delete_payload_index(call.collection, field)
    b.indexes.drop(call.collection, field)
    return models.UpdateResult(status=models.UpdateStatus.COMPLETED)


# --- reads -----------------------------------------------------------------------------------


def run_query(b: Backend, name: str, req: models.QueryRequest) -> models.QueryResponse:
    return b.client.query_points(
        name,
        query=req.query,
        using=req.using,
        prefetch=req.prefetch,
        query_filter=req.filter,
        search_params=req.params,
        limit=10 if req.limit is None else req.limit,
        offset=req.offset,
        # the REST defaults differ from the Python client's: no payload unless asked for
        with_payload=False if req.with_payload is None else req.with_payload,
        with_vectors=False if req.with_vector is None else req.with_vector,
        score_threshold=req.score_threshold,
        lookup_from=req.lookup_from,
    )


def query_points(b: Backend, call: Call) -> Any:
    return run_query(b, call.collection, parse(models.QueryRequest, call.body))


# The legacy search endpoint: gone from qdrant-client 1.16, still served by Qdrant and the one
# st-qdrant-memory searches with. It is a query of one vector (named: `{"name", "vector"}`).
SEARCH_FIELDS = frozenset(
    {"vector", "filter", "params", "limit", "offset", "with_payload", "with_vector",
     "score_threshold"}
)  # fmt: skip


def search(b: Backend, call: Call) -> Any:
    raw = parse(dict[str, Any], call.body)
    for field in sorted(set(raw) - SEARCH_FIELDS):
        raise ApiError(400, f"Format error in JSON body: unknown field `{field}`")
    for field in ("vector", "limit"):
        if field not in raw:
            raise ApiError(400, f"Format error in JSON body: missing field `{field}`")
    vector = raw.pop("vector")
    named = isinstance(vector, dict)
    query = {"query": vector["vector"] if named else vector, **raw}
    if named:
        query["using"] = vector.get("name")
    request = parse(models.QueryRequest, json.dumps(query).encode())
    return run_query(b, call.collection, request).points


def query_batch(b: Backend, call: Call) -> Any:
    body: models.QueryRequestBatch = parse(models.QueryRequestBatch, call.body)
    return [run_query(b, call.collection, req) for req in body.searches]


# Payload index types the server can order a scroll by (its "range" indexes).
RANGE_SCHEMAS = frozenset({"integer", "float", "datetime"})


def check_order_by(b: Backend, collection: str, order_by: Any) -> None:
    """The server orders a scroll only by a field with a range index; local mode orders by
    anything, so without this a test would pass here and fail against a real server."""
    if order_by is None:
        return
    key = order_by if isinstance(order_by, str) else order_by.key
    raw = b.indexes.fields(collection).get(key)
    kind = raw if isinstance(raw, str) else (raw or {}).get("type")
    if kind not in RANGE_SCHEMAS or (isinstance(raw, dict) and raw.get("range") is False):
        raise ApiError(
            400,
            f"Bad request: No range index for `order_by` key: `{key}`. Please create one to "
            "use `order_by`. Check https://qdrant.tech/documentation/concepts/indexing/"
            "#payload-index to see which payload schemas support Range conditions",
        )


def scroll(b: Backend, call: Call) -> Any:
    body: models.ScrollRequest = parse(models.ScrollRequest, call.body)
    check_order_by(b, call.collection, body.order_by)
    points, next_offset = b.client.scroll(
        call.collection,
        scroll_filter=body.filter,
        limit=10 if body.limit is None else body.limit,
        order_by=body.order_by,
        offset=body.offset,
        with_payload=True if body.with_payload is None else body.with_payload,
        with_vectors=False if body.with_vector is None else body.with_vector,
    )
    return models.ScrollResult(points=points, next_page_offset=next_offset)


def count(b: Backend, call: Call) -> Any:
    body: models.CountRequest = parse(models.CountRequest, call.body)
    return b.client.count(call.collection, count_filter=body.filter, exact=body.exact is not False)


def facet(b: Backend, call: Call) -> Any:
    body: models.FacetRequest = parse(models.FacetRequest, call.body)
    limit = 10 if body.limit is None else body.limit
    return b.client.facet(call.collection, body.key, facet_filter=body.filter, limit=limit)


def retrieve(b: Backend, call: Call) -> Any:
    body: models.PointRequest = parse(models.PointRequest, call.body)
    return b.client.retrieve(
        call.collection,
        body.ids,
        with_payload=True if body.with_payload is None else body.with_payload,
        with_vectors=False if body.with_vector is None else body.with_vector,
    )


def get_point(b: Backend, call: Call) -> Any:
    raw = call.path["point_id"]
    found = b.client.retrieve(call.collection, [point_id(raw)], with_vectors=True)
    if not found:
        raise ApiError(404, f"Not found: No point with id {raw} found")
    return found[0]


# --- writes ----------------------------------------------------------------------------------


def upsert(b: Backend, call: Call) -> Any:
    body = parse(models.PointInsertOperations, call.body)
    points = body.points if isinstance(body, models.PointsList) else body.batch
    return b.client.upsert(
        call.collection, points, update_filter=body.update_filter, update_mode=body.update_mode
    )


def delete_points(b: Backend, call: Call) -> Any:
    return b.client.delete(call.collection, parse(models.PointsSelector, call.body))


def set_payload(b: Backend, call: Call) -> Any:
    body: models.SetPayload = parse(models.SetPayload, call.body)
    points = selector(body.points, body.filter)
    return b.client.set_payload(call.collection, body.payload, points, key=body.key)


def overwrite_payload(b: Backend, call: Call) -> Any:
    body: models.SetPayload = parse(models.SetPayload, call.body)
    points = selector(body.points, body.filter)
    return b.client.overwrite_payload(call.collection, body.payload, points)


def delete_payload(b: Backend, call: Call) -> Any:
    body: models.DeletePayload = parse(models.DeletePayload, call.body)
    points = selector(body.points, body.filter)
    return b.client.delete_payload(call.collection, body.keys, points)


def clear_payload(b: Backend, call: Call) -> Any:
    return b.client.clear_payload(call.collection, parse(models.PointsSelector, call.body))


def update_vectors(b: Backend, call: Call) -> Any:
    body: models.UpdateVectors = parse(models.UpdateVectors, call.body)
    try:
        return b.client.update_vectors(
            call.collection, body.points, update_filter=body.update_filter
        )
    except KeyError as exc:
        # local mode writes every point it holds, then names the first missing one; the
        # server answers that with a 404 (the point is never created)
        raise ApiError(404, f"Not found: No point with id {exc.args[0]} found") from exc


def create_vector_name(b: Backend, call: Call) -> Any:
    config = parse(models.VectorNameConfig, call.body)
    return b.client.create_vector_name(call.collection, call.path["vector_name"], config)


def delete_vector_name(b: Backend, call: Call) -> Any:
    return b.client.delete_vector_name(call.collection, call.path["vector_name"])


def delete_vectors(b: Backend, call: Call) -> Any:
    body: models.DeleteVectors = parse(models.DeleteVectors, call.body)
    points = selector(body.points, body.filter)
    return b.client.delete_vectors(call.collection, body.vector, points)


def batch_update(b: Backend, call: Call) -> Any:
    body: models.UpdateOperations = parse(models.UpdateOperations, call.body)
    b.client.batch_update_points(call.collection, body.operations)
    return [b.update_result(call) for _ in body.operations]


COLLECTION = "/collections/{collection_name}"
POINTS = COLLECTION + "/points"
ENDPOINTS = (
    Endpoint("GET", "/collections", list_collections, needs_collection=False),
    Endpoint("GET", COLLECTION, get_collection),
    Endpoint("GET", COLLECTION + "/exists", collection_exists, needs_collection=False),
    Endpoint("PUT", COLLECTION, create_collection, needs_collection=False),
    Endpoint("PATCH", COLLECTION, update_collection),
    Endpoint("DELETE", COLLECTION, delete_collection, needs_collection=False),
    Endpoint("PUT", COLLECTION + "/vectors/{vector_name}", create_vector_name),
    Endpoint("DELETE", COLLECTION + "/vectors/{vector_name}", delete_vector_name),
    Endpoint("PUT", COLLECTION + "/index", create_index),
    Endpoint("DELETE", COLLECTION + "/index/{field_name}", delete_index),
    Endpoint("POST", COLLECTION + "/facet", facet),
    Endpoint("PUT", POINTS, upsert),
    Endpoint("POST", POINTS, retrieve),
    Endpoint("POST", POINTS + "/query", query_points),
    Endpoint("POST", POINTS + "/query/batch", query_batch),
    Endpoint("POST", POINTS + "/search", search),
    Endpoint("POST", POINTS + "/scroll", scroll),
    Endpoint("POST", POINTS + "/count", count),
    Endpoint("POST", POINTS + "/delete", delete_points),
    Endpoint("POST", POINTS + "/payload", set_payload),
    Endpoint("PUT", POINTS + "/payload", overwrite_payload),
    Endpoint("POST", POINTS + "/payload/delete", delete_payload),
    Endpoint("POST", POINTS + "/payload/clear", clear_payload),
    Endpoint("PUT", POINTS + "/vectors", update_vectors),
    Endpoint("POST", POINTS + "/vectors/delete", delete_vectors),
    Endpoint("POST", POINTS + "/batch", batch_update),
    Endpoint("GET", POINTS + "/{point_id}", get_point),
)


# --- HTTP ------------------------------------------------------------------------------------


def error_response(error: ApiError, started: float) -> JSONResponse:
    content = {"status": {"error": error.message}, "time": time.perf_counter() - started}
    return JSONResponse(content, status_code=error.status_code)


@dataclass
class Version:
    """Which server the test server plays: `before_1_18` has no endpoint to add a vector name
    to an existing collection (sparse vectors with IDF exist since 1.10, so creating a
    collection with one still works). Switchable while running."""

    before_1_18: bool = False


NEW_IN_1_18 = ("create_vector_name", "delete_vector_name")


def route(
    backend: Backend, endpoint: Endpoint, faults: UpsertFaults, version: Version | None = None
) -> Route:
    version = version or Version()

    async def handle(request: Request) -> Response:
        started = time.perf_counter()
        if version.before_1_18 and endpoint.handler.__name__ in NEW_IN_1_18:
            # an unknown route: actix answers 404 with an empty body
            return Response(status_code=404)
        call = Call(dict(request.path_params), dict(request.query_params), await request.body())
        client = (request.client.host, request.client.port) if request.client else None
        hang = faults.take(client) if endpoint.handler is upsert else None
        try:
            if hang is not None and hang[2]:
                # held off the backend lock, so every other request goes on meanwhile
                await run_in_threadpool(hang[0].wait, hang[1])
                raise ApiError(503, "Service unavailable: the upsert was dropped (fault)")
            # local mode is synchronous and may be slow; keep it off the event loop
            result = await run_in_threadpool(backend.execute, endpoint, call)
            if hang is not None:
                await run_in_threadpool(hang[0].wait, hang[1])
        except ApiError as error:
            return error_response(error, started)
        except Exception as exc:  # the server answers 500 rather than dropping the connection
            return error_response(ApiError(500, f"Service internal error: {exc}"), started)
        body = {
            "result": pydantic_core.to_jsonable_python(result, exclude_none=True),
            "status": "ok",
            "time": time.perf_counter() - started,
        }
        return JSONResponse(body)

    return Route(endpoint.path, handle, methods=[endpoint.method])


async def root(request: Request) -> Response:
    return JSONResponse({"title": "qdrant - vector search engine", "version": SERVER_VERSION})


async def health(request: Request) -> Response:
    return PlainTextResponse("healthz check passed")


def build_app(
    backend: Backend, faults: UpsertFaults | None = None, version: Version | None = None
) -> Starlette:
    faults = faults or UpsertFaults()
    routes = [Route("/", root, methods=["GET"])]
    routes += [Route(p, health, methods=["GET"]) for p in ("/healthz", "/readyz", "/livez")]
    routes += [route(backend, endpoint, faults, version) for endpoint in ENDPOINTS]
    return Starlette(routes=routes)


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # connections of the previous run sit in TIME_WAIT; without this a restart on the
    # same port fails with "address already in use"
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    return sock


class QdrantTestServer:
    """A Qdrant REST server for tests; stop/start keeps the port and (with a path) the data."""

    def __init__(
        self, path: str | Path | None = None, port: int = 0, *, before_1_18: bool = False
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.version = Version(before_1_18=before_1_18)
        self.port = port
        self._backend: Backend | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.faults = UpsertFaults()

    @property
    def url(self) -> str:
        if self.port == 0:
            raise RuntimeError("the port is only known once the server has started")
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> Self:
        if self.running:
            return self
        sock = bind(self.port)
        self.port = sock.getsockname()[1]  # kept, so restarts come back on the same address
        try:
            self._backend = Backend(self.path)
        except BaseException:
            sock.close()
            raise
        config = uvicorn.Config(
            build_app(self._backend, self.faults, self.version),
            log_level="warning",
            access_log=False,
            ws="none",  # no websockets import, so none of its deprecation warnings
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name="qdrant-test-server",
            daemon=True,  # a test that forgets stop() must not hang the interpreter at exit
        )
        self._thread.start()
        self._wait_until_answering(sock)
        return self

    def _wait_until_answering(self, sock: socket.socket) -> None:
        assert self._server is not None and self._thread is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                self.stop()
                raise RuntimeError("the Qdrant test server did not start")
            time.sleep(0.01)
        with httpx.Client(timeout=START_TIMEOUT_S) as http:
            http.get(f"{self.url}/readyz").raise_for_status()

    def hang_upserts(self, seconds: float, *, before_apply: bool, times: int | None = None) -> None:
        """Make the next `times` upserts (every one when None) hang for up to `seconds`.

        `before_apply`: the points are never written and the hang ends in a 503. Otherwise the
        points are written and only the answer is held. `clear_faults()` ends every hang.
        """
        self.faults.arm(seconds, before_apply=before_apply, times=times)

    def wait_for_hung_upserts(self, count: int = 1, timeout: float = 10.0) -> bool:
        """Whether `count` upserts in all have started hanging within `timeout` seconds."""
        return self.faults.wait_hung(count, timeout)

    def clear_faults(self) -> None:
        self.faults.clear()

    def stop(self) -> None:
        self.faults.clear()  # a held request must not keep the server from stopping
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join()
        if self._backend is not None:
            self._backend.close()  # releases local mode's lock file for the next start
        self._server = self._thread = self._backend = None

    @contextmanager
    def local(self) -> Iterator[QdrantClient]:
        """The underlying local client, held under the lock that serialises the server."""
        if self._backend is None:
            raise RuntimeError("the Qdrant test server is not running")
        with self._backend.lock:
            yield self._backend.client

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve qdrant-client local mode over REST.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--path", default=None, help="storage dir; in memory when omitted")
    args = parser.parse_args(argv)

    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    with QdrantTestServer(args.path, args.port) as server:
        print(f"READY {server.url}", flush=True)
        stopping.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
