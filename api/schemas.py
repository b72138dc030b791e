"""Request and response bodies of the HTTP API, as the clients send them (clients.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from shared.embedding.bm25 import MAX_LEXICAL_THRESHOLD, MAX_LEXICAL_WEIGHT
from shared.format.ids import MAX_ID_CHARS, MAX_SOURCE_CHARS, id_problem, message_id_problem
from shared.format.timestamps import MAX_STORABLE_MS, MIN_STORABLE_MS

Id = str
MAX_EXCLUDED_IDS = 10_000  # the Discord plugin sends ~30


def _id_to_str(value: object) -> object:
    # Snowflakes are strings in every client we serve, but a JSON number is the same id.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _present(value: str) -> str:
    # pydantic's own min_length would refuse a lone surrogate for the whole request; checked
    # here, such an id reaches the per-message refusal like any other unstorable id.
    if not value:
        raise PydanticCustomError(
            "string_too_short", "String should have at least 1 character", {"min_length": 1}
        )
    return value


def _checked(problem: Callable[[str], str | None], field: str) -> AfterValidator:
    """An AfterValidator refusing a value for which `problem(value)` names a reason."""

    def check(value: str) -> str:
        found = problem(value)
        if found:
            raise ValueError(f"{field} {found}")
        return value

    return AfterValidator(check)


# Fields of requests that are refused whole when they break the id rules (shared/format/ids.py).
StorableMessageId = Annotated[str, _checked(message_id_problem, "the message id")]
StorableId = Annotated[str, _checked(id_problem, "the id")]
Source = Annotated[
    str,
    Field(min_length=1, max_length=MAX_SOURCE_CHARS),
    _checked(id_problem, "the source"),
]
FilterId = Annotated[str, Field(max_length=MAX_ID_CHARS), _checked(id_problem, "the id")]
SourceFilter = Annotated[
    str, Field(max_length=MAX_SOURCE_CHARS), _checked(id_problem, "the source")
]
EpochMs = Annotated[int, Field(ge=MIN_STORABLE_MS, le=MAX_STORABLE_MS)]


class SaveMessage(BaseModel):
    """One message a client saw. Absent optional fields are normal; unknown ones are ignored.

    Ids and times are checked per message after parsing (api/ingest.py): a message that cannot
    be stored is refused alone, inside the 202.
    """

    model_config = ConfigDict(extra="ignore")

    message_id: Annotated[Id, AfterValidator(_present)] = Field(
        json_schema_extra={"minLength": 1}, description="The platform's message id (dedupe key)."
    )
    text: str | None = Field("", description="Raw message content; empty is counted as skipped.")
    ts: float | int | str | None = Field(
        None, description="Epoch ms (epoch seconds and ISO 8601 are converted); absent = now."
    )
    speaker_kind: Literal["user", "self"] = "user"
    user_id: Id | None = None
    discord_user_id: Id | None = None
    speaker_name: str | None = None
    channel_id: Id | None = None
    guild_id: Id | None = None
    conversation_id: Id | None = None

    _ids = field_validator(
        "message_id", "user_id", "discord_user_id", "channel_id", "guild_id", "conversation_id",
        mode="before",
    )(_id_to_str)  # fmt: skip


class SaveRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    bot: str = Field(min_length=1, description="The agent key; selects the collection.")
    source: Source | None = Field(
        None, description='Which interface sends ("discord", "hermes", …).'
    )
    messages: list[SaveMessage]
    batch_import: bool = Field(
        False,
        description="History import: no idle timer; the importer flushes when its file is done.",
    )


class Refusal(BaseModel):
    index: int = Field(description="The message's position in `messages`.")
    message_id: str = Field(description="Its id (shortened, and made encodable, if need be).")
    field: str = Field(description="The field that cannot be stored.")
    reason: str


class SaveResponse(BaseModel):
    """The three counts always; `edited`, `stale`, `refused` and `refusals` only when not 0."""

    accepted: int = Field(description="New messages buffered for chunking.")
    duplicates: int = Field(description="Messages already seen (by agent, source, message id).")
    skipped: int = Field(description="Empty or too short messages, not stored.")
    edited: int = Field(
        0,
        description="Seen ids re-sent with another text: the memory takes the new text "
        "(present only when not 0).",
    )
    stale: int = Field(
        0,
        description="Edits of messages whose stored chunk cannot be rebuilt (written before "
        "edits were kept, or by st-qdrant-memory): they keep their text (present only when "
        "not 0).",
    )
    refused: int = Field(0, description="Messages that cannot be stored, left out (refusals).")
    refusals: list[Refusal] = Field(
        default_factory=list, description="Why each refused message was left out."
    )


class ErrorResponse(BaseModel):
    error: str = Field(description="A stable error code.")
    detail: str = Field(description="What went wrong, for a person.")


class FlushResponse(BaseModel):
    conversations: int = Field(description="Conversations with buffered messages to write.")
    pending: int = Field(description="Conversations still not fully written when answering.")
    quarantined: int = Field(
        0,
        description="Conversations set aside by a failure retrying cannot fix (GET /quarantine): "
        "not waited for, and not counted in `pending`.",
    )
    done: bool = Field(description="Every conversation is written: none pending or quarantined.")


class RetrieveRequest(BaseModel):
    """What the Discord plugin sends, plus optional limits and filters."""

    model_config = ConfigDict(extra="ignore")

    bot: str = Field(min_length=1, description="The agent key; selects the collection.")
    query_text: str = Field(
        description="The incoming message to find memories for (MEMORY_POOL_MAX_QUERY_CHARS, "
        "8,000 characters at most)."
    )
    exclude_message_ids: list[Id] = Field(
        default_factory=list,
        max_length=MAX_EXCLUDED_IDS,
        description="Ids already in the reader's context: never recalled (ids that cannot be "
        "stored are ignored).",
    )
    limit: int = Field(5, ge=1, le=100, description="How many chunks at most.")
    score_threshold: float = Field(
        0.3,
        ge=-1,
        le=1,
        description="Lowest cosine score kept. In hybrid recall a chunk below it is still kept "
        "when the lexical leg found it with a BM25 score of at least `lexical_threshold`.",
    )
    recall: Literal["hybrid", "dense"] | None = Field(
        None,
        description="hybrid: dense and BM25 (lexical) legs fused in Qdrant; dense: cosine only. "
        "Absent: the agent's `recall` (hybrid by default). A collection without BM25 terms "
        "(an older Qdrant server) is recalled dense.",
    )
    fusion: Literal["dbsf", "rrf"] | None = Field(
        None, description="How hybrid recall fuses its legs; absent: the agent's (dbsf)."
    )
    lexical_threshold: float | None = Field(
        None,
        ge=0,
        le=MAX_LEXICAL_THRESHOLD,
        allow_inf_nan=False,
        description="The BM25 score a chunk needs to come from the lexical leg (Qdrant's IDF "
        "times the term weight, summed over the query's words); absent: the agent's (5.0). "
        "Finite, at most 1,000,000 (which no chunk reaches: the lexical leg admits nothing).",
    )
    lexical_weight: float | None = Field(
        None,
        ge=0,
        le=MAX_LEXICAL_WEIGHT,
        allow_inf_nan=False,
        description="How much the BM25 leg counts in hybrid recall: dbsf ranks by dense + w x "
        "lexical after each leg's normalisation, rrf weighs the lexical leg's ranks by w; 0 "
        "keeps the dense order (lexical-only chunks last), 1 is equal weights. From 0 to 10; "
        "absent: the agent's `lexical_weight`.",
    )
    time_words: bool | None = Field(
        None,
        description='English time words in query_text ("yesterday", "last weekend", "in May") '
        "put the chunks of the UTC days they name first, then the rest fills the limit; they "
        "leave the BM25 terms. Absent: the agent's `time_words` (on by default); false: off.",
    )
    now: EpochMs | None = Field(
        None,
        description="The time the time words count from, Unix ms; absent: the server's clock.",
    )
    source: SourceFilter | None = Field(
        None, description='Only chunks from this interface ("discord").'
    )
    channel_id: FilterId | None = Field(None, description="Only chunks from this channel.")
    guild_id: FilterId | None = Field(None, description="Only chunks from this guild.")
    since: EpochMs | None = Field(
        None, description="Only chunks whose oldest message is at or after."
    )
    until: EpochMs | None = Field(
        None, description="Only chunks whose oldest message is at or before."
    )

    _ids = field_validator("exclude_message_ids", mode="before")(
        lambda value: [_id_to_str(v) for v in value] if isinstance(value, list) else value
    )
    _one_ids = field_validator("channel_id", "guild_id", mode="before")(_id_to_str)

    @model_validator(mode="after")
    def _since_before_until(self) -> RetrieveRequest:
        if self.since is not None and self.until is not None and self.since > self.until:
            raise ValueError("since is after until: no memory can match (swapped?)")
        return self


class Hit(BaseModel):
    id: str = Field(description="The point id.")
    score: float = Field(description="Cosine similarity to the query (hybrid recall too).")
    payload: dict[str, Any] = Field(description="The point's payload as stored.")
    fused_score: float | None = Field(
        None,
        description="Hybrid recall only: the fused score the hits are ordered by (a time "
        "window's hits come first, each part in this order).",
    )


class RetrieveResponse(BaseModel):
    hits: list[Hit]
    formatted: str = Field(
        description="st-qdrant-memory's [Past chat memories] block; empty when nothing qualifies."
    )


class RedisHealth(BaseModel):
    ok: bool
    error: str | None = None
    due_conversations: int | None = Field(None, description="Conversations waiting for a flush.")
    queued_tasks: int | None = Field(None, description="Flush tasks waiting for a worker.")
    dead_letters: int | None = None
    quarantined: int | None = Field(None, description="Conversations in quarantine.")
    buffered_messages: int | None = Field(None, description="Including open chunks.")
    agents_seen: list[str] = Field(default_factory=list)


class QdrantHealth(BaseModel):
    ok: bool
    local: bool = Field(description="In this process, under the data folder (no QDRANT_URL).")
    engine: Literal["embedded", "server", "local"] = Field(
        description="Which store: `embedded` (Qdrant Edge, serve's default), `server` (a Qdrant "
        "server at QDRANT_URL), `local` (qdrant-client's local mode, a test stand-in)."
    )


class EmbeddingHealth(BaseModel):
    ok: bool
    provider: str
    model: str
    dimensions: int | None = None


class AgentHealth(BaseModel):
    collection: str
    exists: bool
    vector_size: int | None = None
    points: int | None = None
    model: str | None = Field(None, description="The embedding model recorded with it.")
    model_matches: bool | None = None
    blocked: str | None = Field(None, description="Why writes are held, if they are.")
    recall: Literal["hybrid", "dense"] | None = Field(
        None, description="How /retrieve recalls this agent now (dense where BM25 is missing)."
    )
    bm25: bool | None = Field(
        None,
        description="Whether the collection has the BM25 sparse vector (false: the Qdrant "
        "server could not add it, recall stays dense).",
    )
    points_without_bm25: int | None = Field(
        None, description="Points the background backfill has not given BM25 terms yet."
    )
    fusion: Literal["dbsf", "rrf"] | None = Field(
        None, description="How hybrid recall fuses the legs for this agent by default."
    )
    lexical_weight: float | None = Field(
        None, description="The BM25 leg's weight in the fusion for this agent by default."
    )
    quarantined: int = Field(0, description="Its conversations in quarantine.")


class QuarantinedConversation(BaseModel):
    """A conversation whose flush failed for a reason retrying cannot fix; its messages wait."""

    agent: str
    collection: str
    conversation: str = Field(description="Its key: collection, source and channel or id.")
    source: str
    reason: str = Field(description="The exception that set it aside.")
    since: int = Field(description="When it was quarantined, Unix ms.")
    messages: int = Field(description="Messages waiting in it (kept, never lost).")
    failures: int = Field(description="Failures in a row that led here.")


class HealthStatus(BaseModel):
    """What /health tells a caller without a key valid for every agent, once keys exist."""

    status: Literal["ok", "degraded"]


class HealthResponse(BaseModel):
    status: Literal["ok", "degraded"]
    redis: RedisHealth
    qdrant: QdrantHealth
    embedding: EmbeddingHealth
    agents: dict[str, AgentHealth]


def error_responses(model: type[BaseModel], **described: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for error statuses in the error shape `model` (e404="...")."""
    return {
        int(code[1:]): {"model": model, "description": text} for code, text in described.items()
    }


def error_docs(**described: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for error statuses, all in the one error shape (e404="...")."""
    return error_responses(ErrorResponse, **described)


# The statuses of every endpoint that names an agent.
AGENT_ACCESS = error_docs(
    e400="An agent name no collection can have (too long, or unwritable for Qdrant).",
    e401="The agent requires an API key, or the API key is not valid.",
    e403="The API key is not for this agent.",
    e404="Unknown agent.",
)
