"""The export file of a pool (JSON Lines), without I/O: its header, one line per point and
per Redis mark, written byte-stable so export -> import -> export gives the same bytes.

Line 1 is the header; then every point in id order; then tombstones and dedupe marks; then
an end line with the counts. Lines end with "\n" alone (shared/format/json_lines.py). Keys are
sorted, separators fixed, text kept as UTF-8. Vectors are float32 in Qdrant, so they are written
as the float32 value (Python's repr of it): the same bytes from the server and local mode.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.format.ids import replace_surrogates
from shared.format.json_lines import escape_line_breaks
from shared.store.interface import StoredPoint
from shared.store.memory_query import normal_point_id

FORMAT = "memory-pool-export"
VERSION = 1
# Bounds the search for a cosine vector's fixed point (or short cycle). A vector Qdrant Edge
# normalized was seen 17 steps from its fixed point, so 16 stopped on a vector that moves again.
_MAX_NORMALIZE_STEPS = 256
# Qdrant's sparse indices are u32; BM25 term hashes (abs of mmh3's int32) are far below
MAX_SPARSE_INDEX = 2**32 - 1
# A Qdrant server reads JSON 128 levels deep at most (serde_json), its request's own levels
# included; Qdrant Edge takes more. A chunk's payload nests 2 deep (messageIdList).
MAX_PAYLOAD_DEPTH = 64
_MAX_FLOAT = int(np.finfo(np.float64).max)
# A lone surrogate is a JSON escape (\ud800); a raw one comes from a file read with
# surrogateescape. Lines without either skip the walk over their payload.
_SURROGATE_HINT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


class BadExport(ValueError):
    """A line of an export file that cannot be read; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Header:
    collection: str
    agent: str
    model: str | None
    dimensions: int | None
    bm25_encoding: str | None
    has_bm25: bool
    vectors: bool
    points: int
    tombstones: int
    dedupe: int

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "collection": self.collection,
            "agent": self.agent,
            "model": self.model,
            "dimensions": self.dimensions,
            "bm25": {"encoding": self.bm25_encoding} if self.has_bm25 else None,
            "vectors": self.vectors,
            "counts": {"points": self.points, "tombstones": self.tombstones, "dedupe": self.dedupe},
        }


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A deleted message id: never stored again, for ever."""

    source: str
    message_id: str


@dataclass(frozen=True, slots=True)
class DedupeMark:
    """A message id seen recently: re-sent, it is not stored twice until `expires_at`
    (Unix seconds; absolute, so the file is byte-stable and time in transit counts)."""

    source: str
    message_id: str
    expires_at: int
    value: str


@dataclass(frozen=True, slots=True)
class End:
    """The last line: what the export holds. The header's counts are those at its start (a
    running memory-pool may write while it exports); these are exact, and a file without
    this line was cut short."""

    points: int
    tombstones: int
    dedupe: int


Record = StoredPoint | Tombstone | DedupeMark | End


def dumps(obj: dict[str, Any]) -> str:
    """One line: sorted keys, fixed separators, UTF-8 text but the line breaks JSON leaves raw
    (U+2028, a chat's text may hold it); NaN refused (not JSON)."""
    return escape_line_breaks(
        json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    )


def unit_vector(vector: list[float]) -> list[float]:
    """The float32 unit vector Qdrant keeps as it is. Cosine collections normalize every vector
    on write; qdrant-client's local mode does it again for a vector that already is unit length
    and moves its last bits, so an export writes the vector that normalizing leaves unchanged
    (or, for the rare vector whose normalization cycles, the smallest member of the cycle):
    importing it and exporting again gives the same bytes on every store."""
    v = np.asarray(vector, dtype=np.float32)
    seen: list[bytes] = []
    for _ in range(_MAX_NORMALIZE_STEPS):
        key = v.tobytes()
        if key in seen:
            cycle = seen[seen.index(key) :]
            v = np.frombuffer(min(cycle), dtype=np.float32)
            break
        seen.append(key)
        norm = np.linalg.norm(v)
        if not norm > 0:
            break
        v = v / norm
    return [float(x) for x in v.astype(np.float64)]


def _float32s(values: list[float]) -> list[float]:
    return [float(x) for x in np.asarray(values, dtype=np.float32).astype(np.float64)]


def point_line(point: StoredPoint) -> str:
    obj: dict[str, Any] = {"kind": "point", "id": point.id, "payload": point.payload}
    if point.vector is not None:
        obj["vector"] = unit_vector(point.vector)
    if point.sparse is not None:
        indices, values = point.sparse
        obj["sparse"] = {"indices": [int(i) for i in indices], "values": _float32s(values)}
    return dumps(obj)


def tombstone_line(mark: Tombstone) -> str:
    return dumps({"kind": "tombstone", "source": mark.source, "message_id": mark.message_id})


def dedupe_line(mark: DedupeMark) -> str:
    return dumps(
        {
            "kind": "dedupe",
            "source": mark.source,
            "message_id": mark.message_id,
            "expires_at": mark.expires_at,
            "value": mark.value,
        }
    )


def end_line(end: End) -> str:
    return dumps(
        {"kind": "end", "points": end.points, "tombstones": end.tombstones, "dedupe": end.dedupe}
    )


def _field(obj: dict[str, Any], name: str, kind: type, line_no: int) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise BadExport(f"line {line_no}: {name!r} must be a {kind.__name__}")
    return value


def _load(line: str, line_no: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise BadExport(f"line {line_no}: not JSON ({exc})") from exc
    except RecursionError as exc:
        raise BadExport(f"line {line_no}: nested deeper than a JSON reader goes") from exc
    if not isinstance(obj, dict):
        raise BadExport(f"line {line_no}: not a JSON object")
    return obj


def read_header(line: str) -> Header:
    obj = _load(line, 1)
    if obj.get("format") != FORMAT:
        raise BadExport("line 1: not a memory-pool export (no header)")
    if obj.get("version") != VERSION:
        raise BadExport(
            f"line 1: export format version {obj.get('version')!r}, this reads {VERSION}"
        )
    counts = obj.get("counts")
    bm25 = obj.get("bm25")
    if not isinstance(counts, dict) or not (bm25 is None or isinstance(bm25, dict)):
        raise BadExport("line 1: the header needs 'counts' and 'bm25'")
    dims = obj.get("dimensions")
    model = obj.get("model")
    encoding = bm25.get("encoding") if bm25 else None
    return Header(
        collection=_field(obj, "collection", str, 1),
        agent=_field(obj, "agent", str, 1),
        model=model if isinstance(model, str) else None,
        dimensions=dims if isinstance(dims, int) and not isinstance(dims, bool) else None,
        bm25_encoding=encoding if isinstance(encoding, str) else None,
        has_bm25=bm25 is not None,
        vectors=bool(obj.get("vectors")),
        points=_field(counts, "points", int, 1),
        tombstones=_field(counts, "tombstones", int, 1),
        dedupe=_field(counts, "dedupe", int, 1),
    )


def read_record(line: str, line_no: int) -> Record:
    obj = _load(line, line_no)
    kind = obj.get("kind")
    if kind == "point":
        return _point(obj, line, line_no)
    if kind == "tombstone":
        return Tombstone(
            _field(obj, "source", str, line_no), _field(obj, "message_id", str, line_no)
        )
    if kind == "dedupe":
        return DedupeMark(
            source=_field(obj, "source", str, line_no),
            message_id=_field(obj, "message_id", str, line_no),
            expires_at=_field(obj, "expires_at", int, line_no),
            value=_field(obj, "value", str, line_no),
        )
    if kind == "end":
        return End(
            points=_field(obj, "points", int, line_no),
            tombstones=_field(obj, "tombstones", int, line_no),
            dedupe=_field(obj, "dedupe", int, line_no),
        )
    raise BadExport(f"line {line_no}: unknown kind {kind!r}")


def _numbers(values: Any, line_no: int, name: str) -> list[float]:
    """Finite numbers: JSON's NaN and Infinity (which Python reads), and a number beyond
    float64, are no vector a store can hold (a NaN weight was stored by Qdrant Edge)."""
    problem = BadExport(f"line {line_no}: {name!r} must be a list of finite numbers")
    if not isinstance(values, list) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in values
    ):
        raise problem
    try:
        floats = [float(x) for x in values]
    except OverflowError:
        raise problem from None
    if not np.isfinite(np.asarray(floats, dtype=np.float64)).all():
        raise problem
    return floats


def _sparse(sparse: Any, line_no: int) -> tuple[list[int], list[float]]:
    if not isinstance(sparse, dict):
        raise BadExport(f"line {line_no}: 'sparse' must be an object")
    indices = _numbers(sparse.get("indices"), line_no, "sparse.indices")
    values = _numbers(sparse.get("values"), line_no, "sparse.values")
    whole = all(i.is_integer() and 0 <= i <= MAX_SPARSE_INDEX for i in indices)
    if len(indices) != len(values) or not whole or len(set(indices)) != len(indices):
        raise BadExport(
            f"line {line_no}: 'sparse' needs as many values as indices, each index whole, "
            f"from 0 to {MAX_SPARSE_INDEX}, and none twice"
        )
    return [int(i) for i in indices], values


def _payload(obj: dict[str, Any], line: str, line_no: int) -> dict[str, Any]:
    """The point's payload as every store holds it, or BadExport naming what none does."""
    payload = _field(obj, "payload", dict, line_no)
    problem = _payload_problem(payload)
    if problem:
        raise BadExport(f"line {line_no}: the payload {problem}")
    if _SURROGATE_HINT.search(line):
        # Lone surrogates (no UTF-8 carries them; a file from another tool may hold them) as
        # U+FFFD, as /save stores them; through JSON text, keys too
        payload = json.loads(replace_surrogates(json.dumps(payload, ensure_ascii=False)))
    return payload


def _payload_problem(payload: dict[str, Any]) -> str | None:
    """What no store holds, or one store refuses and the other keeps: nesting beyond
    MAX_PAYLOAD_DEPTH, NaN or an infinity (JSON has none; Python reads them), a whole number
    beyond float64. None when the payload is fine. A walk without recursion: any depth."""
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_PAYLOAD_DEPTH:
                return f"nests deeper than {MAX_PAYLOAD_DEPTH} levels"
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(value, float) and not math.isfinite(value):
            return "holds NaN or an infinite number"
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > _MAX_FLOAT:
            return "holds a number beyond float64"
    return None


def _point(obj: dict[str, Any], line: str, line_no: int) -> StoredPoint:
    vector = obj.get("vector")
    sparse = obj.get("sparse")
    pair = None if sparse is None else _sparse(sparse, line_no)
    payload = _payload(obj, line, line_no)
    point_id = normal_point_id(_field(obj, "id", str, line_no))
    if point_id is None:
        # Qdrant's two kinds of ids: /qdrant writes unsigned integers as well as UUIDs
        raise BadExport(
            f"line {line_no}: point id {obj['id']!r} is neither a UUID nor an unsigned integer"
        )
    return StoredPoint(
        id=point_id,
        payload=payload,
        vector=None if vector is None else _numbers(vector, line_no, "vector"),
        sparse=pair,
    )
