"""Points through /qdrant: upserts checked as Qdrant checks them and written with BM25 terms
beside the dense vector, search, scroll and count under Qdrant's filters (what the engines do
not evaluate is checked here, shared/store/rest_filters.py)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from api.qdrant.access import Target
from api.qdrant.schemas import CountRequest, PointIn, ScrollRequest, SearchRequest
from api.qdrant.shape import QdrantRefusal, collection_missing
from shared.embedding.bm25 import Terms
from shared.errors import InvalidInput, MemoryPoolError, RequestTooLarge
from shared.format.fields import TEXT
from shared.runtime import Runtime
from shared.store.browse import Point
from shared.store.interface import CollectionState, Offset, PointToWrite, Store
from shared.store.memory_query import qdrant_id
from shared.store.rest_filters import RestFilter, point_id_of, read_filter

log = logging.getLogger(__name__)

# Points read per page while a scroll or a count checks what the engine was not given.
SCAN_PAGE = 512
# What makes the BM25 terms of texts in a language (api/qdrant/term_pool.py for the routes).
TermsMaker = Callable[[Sequence[str], str], list[Terms]]
_operations = itertools.count(1)


@contextmanager
def store_refusals() -> Iterator[None]:
    """The store refusing what a client sent (a server's 400, an engine's ValueError) is wrong
    input, answered 400 in Qdrant's words; memory-pool's own errors pass as they are."""
    try:
        yield
    except (MemoryPoolError, QdrantRefusal):
        raise
    except Exception as exc:
        log.warning("the store refused a /qdrant call: %s", exc, exc_info=True)
        raise QdrantRefusal(400, f"Wrong input: the store refused it: {exc}") from exc


def _state(runtime: Runtime, target: Target) -> CollectionState:
    state = runtime.store.collection(target.collection)
    if state is None:
        raise collection_missing(target.collection)
    return state


def _check_vector(state: CollectionState, vector: Sequence[float]) -> None:
    if state.size is None:
        raise QdrantRefusal(
            400, f"Wrong input: collection `{state.name}` has no single unnamed vector"
        )
    if len(vector) != state.size:
        raise QdrantRefusal(
            400,
            f"Wrong input: Vector dimension error: expected dim: {state.size}, got {len(vector)}",
        )


def _check_model(state: CollectionState, model: str) -> None:
    """As memory-pool's own writes: never a vector of another model than the one the
    collection records (its flushes are held meanwhile, /health says why)."""
    if state.model is not None and state.model != model:
        raise QdrantRefusal(
            400,
            f"Wrong input: collection `{state.name}` holds vectors of {state.model}; memory-pool "
            f"embeds with {model}, whose vectors its recall cannot compare with those",
        )


def _point_id(raw: int | str) -> str:
    normal = point_id_of(raw)
    if normal is None:
        raise QdrantRefusal(
            400,
            f"Format error in JSON body: value {str(raw)[:80]} is not a valid point ID, valid "
            "values are either an unsigned integer or a UUID",
        )
    return normal


def _read(raw: dict[str, Any] | None) -> RestFilter:
    try:
        return read_filter(raw)
    except InvalidInput as exc:
        raise QdrantRefusal(400, f"Format error in JSON body: {exc}") from exc


def shown_id(point_id: str) -> int | str:
    """An id as Qdrant answers it: integer ids as numbers."""
    return int(point_id) if point_id.isdigit() else point_id


def _payload(payload: Mapping[str, Any], wanted: bool | list[str]) -> dict[str, Any]:
    """The `payload` entry of a point in an answer: none, all, or the fields asked for."""
    if wanted is False:
        return {}
    if wanted is True:
        return {"payload": dict(payload)}
    return {"payload": {key: payload[key] for key in wanted if key in payload}}


# --- writes -----------------------------------------------------------------------------------


def terms_of(points: Sequence[PointIn], language: str, make: TermsMaker) -> list[Terms | None]:
    """BM25 terms of each point's `text`, as a flush makes them (none without a text)."""
    texts = [(p.payload or {}).get(TEXT) for p in points]
    wanted = [i for i, text in enumerate(texts) if isinstance(text, str) and text]
    made = make([str(texts[i]) for i in wanted], language) if wanted else []
    found: list[Terms | None] = [None] * len(points)
    for index, terms in zip(wanted, made, strict=True):
        found[index] = terms
    return found


def text_chars(points: Sequence[PointIn]) -> int:
    """The characters of the points' `text`: what their BM25 terms cost to make."""
    texts = ((p.payload or {}).get(TEXT) for p in points)
    return sum(len(text) for text in texts if isinstance(text, str))


def _check_text_length(points: Sequence[PointIn], limit: int) -> None:
    """The text to term in one request is bounded as /save's (MEMORY_POOL_MAX_CHARS): terms are
    made here, in the API's process, and a Chinese cut costs the most."""
    chars = text_chars(points)
    if chars > limit:
        raise RequestTooLarge.of_text(chars, limit, "request")


def checked(runtime: Runtime, target: Target, points: Sequence[PointIn]) -> list[str]:
    """An upsert's checks, the store's collection read among them, before any terms are made:
    all the points or none, so a vector of another size than the collection's, or a bad id,
    refuses the whole request before anything is written. Returns the points' ids."""
    limit = runtime.settings.max_messages_per_request
    if len(points) > limit:
        raise RequestTooLarge(
            f"{len(points)} points in one request; the limit is {limit} (MEMORY_POOL_MAX_MESSAGES)"
        )
    _check_text_length(points, runtime.settings.max_chars_per_request)
    state = _state(runtime, target)
    _check_model(state, runtime.embedder.model)
    ids = [_point_id(p.id) for p in points]
    for point in points:
        _check_vector(state, point.vector)
    return ids


def write(
    runtime: Runtime,
    target: Target,
    points: Sequence[PointIn],
    ids: Sequence[str],
    terms: Sequence[Terms | None],
    *,
    wait: bool,
) -> dict:
    """The checked points, with their terms, written."""
    written = [
        PointToWrite(pid, list(p.vector), dict(p.payload or {}), t)
        for pid, p, t in zip(ids, points, terms, strict=True)
    ]
    with store_refusals():
        runtime.store.upsert(target.collection, written)
    return {"operation_id": next(_operations), "status": "completed" if wait else "acknowledged"}


def upsert(
    runtime: Runtime,
    target: Target,
    points: Sequence[PointIn],
    *,
    wait: bool,
    make_terms: TermsMaker,
) -> dict:
    """Checked, termed and written in one go (an upsert whose terms are made in process)."""
    ids = checked(runtime, target, points)
    terms = terms_of(points, target.agent.language, make_terms)
    return write(runtime, target, points, ids, terms, wait=wait)


# --- reads ------------------------------------------------------------------------------------


def search(runtime: Runtime, target: Target, request: SearchRequest) -> list[dict[str, Any]]:
    state = _state(runtime, target)
    _check_vector(state, request.vector)
    flt = _read(request.filter)
    if flt.rest is not None:
        raise QdrantRefusal(
            400,
            "Wrong input: search takes must and must_not of value and string-any matches, "
            "integer ranges, is_empty, has_id and has_vector; the other conditions are taken "
            "by scroll and count",
        )
    with store_refusals():
        hits = runtime.store.query(
            target.collection,
            request.vector,
            limit=request.limit,
            offset=request.offset,
            score_threshold=request.score_threshold,
            query_filter=flt.store,
        )
    return [
        {"id": shown_id(hit.id), "version": 0, "score": hit.score,
         **_payload(hit.payload, request.with_payload)}
        for hit in hits
    ]  # fmt: skip


def _matching(
    store: Store, name: str, flt: RestFilter, *, offset: Offset, fields: tuple[str, ...] | None
) -> Iterator[Point]:
    """Every point the whole filter selects, in id order from `offset`: the engine's part
    applied by the engine, the rest here, page by page."""
    wanted = None if fields is None else tuple(sorted({*fields, *flt.fields}))
    while True:
        with store_refusals():
            page, offset = store.page(
                name, query_filter=flt.store, limit=SCAN_PAGE, offset=offset, fields=wanted
            )
        yield from (point for point in page if flt.matches(*point))
        if offset is None:
            return


def scroll(runtime: Runtime, target: Target, request: ScrollRequest) -> dict[str, Any]:
    _state(runtime, target)
    flt = _read(request.filter)
    start = None if request.offset is None else qdrant_id(_point_id(request.offset))
    wanted = request.with_payload
    fields = None if wanted is True else tuple(wanted or ())
    store = runtime.store
    if flt.rest is None:
        with store_refusals():
            page, following = store.page(
                target.collection,
                query_filter=flt.store,
                limit=request.limit,
                offset=start,
                fields=fields,
            )
    else:
        found = list(
            itertools.islice(
                _matching(store, target.collection, flt, offset=start, fields=fields),
                request.limit + 1,
            )
        )
        page = found[: request.limit]
        following = found[request.limit][0] if len(found) > request.limit else None
    points = [{"id": shown_id(pid), **_payload(payload, wanted)} for pid, payload in page]
    following_id = None if following is None else shown_id(str(following))
    return {"points": points, "next_page_offset": following_id}


def count(runtime: Runtime, target: Target, request: CountRequest) -> dict[str, int]:
    _state(runtime, target)
    flt = _read(request.filter)
    if flt.rest is None:
        with store_refusals():
            return {"count": runtime.store.count(target.collection, flt.store)}
    matching = _matching(runtime.store, target.collection, flt, offset=None, fields=())
    return {"count": sum(1 for _ in matching)}
