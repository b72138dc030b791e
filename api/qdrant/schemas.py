"""The request and result bodies of the Qdrant calls st-qdrant-memory makes, as Qdrant spells
them. Fields Qdrant has and memory-pool does not take are refused by name (extra="forbid"),
never silently ignored."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator

# Qdrant's own bound on a dense vector's size.
MAX_DIMENSIONS = 65_536
# Points a search or a scroll answers at once, and how far a search may skip.
MAX_LIMIT = 10_000
MAX_OFFSET = 100_000
# How deep a payload may nest: the engines store JSON, not arbitrary recursion.
MAX_PAYLOAD_DEPTH = 32
# Payload integers Qdrant keeps as integers (signed and unsigned 64-bit).
MIN_INT, MAX_UINT = -(2**63), 2**64 - 1

# The engines store vectors as float32: a larger number is infinite there, and the cosine of
# an infinite vector is NaN (a Qdrant server refuses it with a 500).
FLOAT32_MAX = 3.4028234663852886e38
Finite = Annotated[float, Field(allow_inf_nan=False)]
Float32 = Annotated[float, Field(allow_inf_nan=False, ge=-FLOAT32_MAX, le=FLOAT32_MAX)]
Vector = Annotated[
    list[Float32],
    Field(min_length=1, max_length=MAX_DIMENSIONS, description="The dense vector."),
]
PointIdIn = Annotated[
    StrictInt | StrictStr, Field(description="An unsigned integer or a UUID, as in Qdrant.")
]
FilterIn = Annotated[
    dict[str, Any] | None,
    Field(
        description="Qdrant's filter: `must`, `should`, `must_not` of `match` (`value`, `any`; "
        "`text` in `messageIds`: one of its comma-separated ids), `range`, `is_empty`, "
        "`is_null`, `has_id`, `has_vector`, and nested filters. Search takes `should`, nested "
        "filters, `text`, `is_null`, bool values, integer `any` and fractional ranges in "
        "none of its conditions: scroll and count take every one."
    ),
]
WithPayload = Annotated[
    bool | list[StrictStr],
    Field(description="The payload, none of it, or only these fields."),
]


class Forbid(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VectorParams(Forbid):
    size: int = Field(ge=1, le=MAX_DIMENSIONS, description="memory-pool's embedding size.")
    distance: str = Field(description='"Cosine": memory-pool recalls by cosine.')


class CreateCollection(Forbid):
    """st-qdrant-memory's `{"vectors": {"size", "distance": "Cosine"}}`; the collection is set
    up as memory-pool sets up every collection (its model, payload indexes, BM25 vector)."""

    vectors: VectorParams


def _problem(value: Any) -> str | None:
    """What keeps a payload from being stored and answered as JSON, or None."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_PAYLOAD_DEPTH:
            return f"nests deeper than {MAX_PAYLOAD_DEPTH} levels"
        if isinstance(item, float) and not math.isfinite(item):
            return "holds NaN or an infinite number, which JSON cannot carry"
        if type(item) is int and not MIN_INT <= item <= MAX_UINT:
            return "holds an integer beyond 64 bits, which Qdrant would store as a float"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "holds a lone surrogate (\\ud800), which UTF-8 cannot carry"
        elif isinstance(item, dict):
            stack.extend((k, depth + 1) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return None


class PointIn(Forbid):
    id: PointIdIn
    vector: Vector
    payload: dict[str, Any] | None = Field(None, description="Stored as sent.")

    @field_validator("payload")
    @classmethod
    def _storable(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        problem = _problem(value)
        if problem:
            raise ValueError(f"the payload {problem}")
        return value


class UpsertPoints(Forbid):
    points: list[PointIn] = Field(
        description="At most MEMORY_POOL_MAX_MESSAGES points (500); each gets BM25 terms of "
        "its payload's `text` beside its vector."
    )


class SearchRequest(Forbid):
    vector: Vector
    limit: int = Field(ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    score_threshold: Finite | None = None
    with_payload: WithPayload = False
    with_vector: Literal[False] = Field(False, description="Vectors are not returned here.")
    filter: FilterIn = None
    params: dict[str, Any] | None = Field(None, description="Search tuning; not used.")


class ScrollRequest(Forbid):
    filter: FilterIn = None
    limit: int = Field(10, ge=1, le=MAX_LIMIT)
    offset: PointIdIn | None = Field(None, description="The `next_page_offset` of a page.")
    with_payload: WithPayload = True
    with_vector: Literal[False] = Field(False, description="Vectors are not returned here.")


class CountRequest(Forbid):
    filter: FilterIn = None
    exact: bool = Field(True, description="Counts are always exact here.")


# --- results ------------------------------------------------------------------------------------


class CollectionName(BaseModel):
    name: str


class CollectionList(BaseModel):
    collections: list[CollectionName]


class VectorsConfig(BaseModel):
    size: int | None = None
    distance: str | None = None


class CollectionParams(BaseModel):
    vectors: VectorsConfig
    sparse_vectors: dict[str, dict[str, str]] = Field(default_factory=dict)


class CollectionConfig(BaseModel):
    params: CollectionParams


class CollectionInfo(BaseModel):
    status: Literal["green"] = "green"
    optimizer_status: Literal["ok"] = "ok"
    points_count: int
    config: CollectionConfig
    payload_schema: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="The payload indexes by field: `data_type`."
    )


class UpdateResult(BaseModel):
    operation_id: int
    status: Literal["completed", "acknowledged"]


class ScoredPoint(BaseModel):
    id: int | str
    version: int = 0
    score: float
    payload: dict[str, Any] | None = None


class Record(BaseModel):
    id: int | str
    payload: dict[str, Any] | None = None


class ScrollResult(BaseModel):
    points: list[Record]
    next_page_offset: int | str | None = None


class CountResult(BaseModel):
    count: int
