"""The one family of memory-pool errors; the API maps them to HTTP, the workers to retries."""

from __future__ import annotations


class MemoryPoolError(Exception):
    """Base of every error memory-pool raises on purpose."""

    code = "memory_pool_error"


class ConfigError(MemoryPoolError):
    """The agents file or the settings are unusable; raised at start, never per request."""

    code = "config_error"


class InvalidAgentName(ConfigError):
    """An agent name that cannot become a collection name."""

    code = "invalid_agent_name"


class UnknownAgent(MemoryPoolError):
    """A request names an agent that is not configured, and unlisted agents are refused."""

    code = "unknown_agent"


class NotQuarantined(MemoryPoolError):
    """A request names a conversation that is not in the quarantine."""

    code = "not_quarantined"


class InvalidInput(MemoryPoolError):
    """A request that is structurally wrong; nothing of it is stored."""

    code = "invalid_input"


class RequestTooLarge(InvalidInput):
    """A request over the configured number of messages or characters."""

    code = "request_too_large"

    @classmethod
    def of_text(cls, chars: int, limit: int, within: str) -> RequestTooLarge:
        """Over MEMORY_POOL_MAX_CHARS: `chars` characters of text in one `within`."""
        return cls(
            f"{chars} characters of text in one {within}; the limit is {limit} "
            "(MEMORY_POOL_MAX_CHARS)"
        )


class Unauthorized(MemoryPoolError):
    """No key, or an unknown key, where one is required."""

    code = "unauthorized"


class Forbidden(MemoryPoolError):
    """A valid key that is not allowed for this agent or endpoint."""

    code = "forbidden"


class AgentBlocked(MemoryPoolError):
    """An agent's collection has another vector size or embedding model; writes are held."""

    code = "agent_blocked"


class DimensionMismatch(MemoryPoolError):
    """A collection exists with a vector size other than the embedding model's."""

    code = "dimension_mismatch"

    @classmethod
    def of_query(cls, name: str, size: int, cause: Exception) -> DimensionMismatch:
        """A query vector the collection refused: it was made with another embedding model."""
        return cls(
            f"collection {name!r} refused a query vector of {size} dimensions; "
            f"it was made with another embedding model: {cause}"
        )


class ModelMismatch(MemoryPoolError):
    """A collection was written by another embedding model than the configured one."""

    code = "model_mismatch"


class CollectionMissing(MemoryPoolError):
    """A collection memory-pool had created is gone (deleted outside memory-pool)."""

    code = "collection_missing"


class UpstreamUnavailable(MemoryPoolError):
    """Redis, Qdrant or the embedding provider cannot be reached now; try again later."""

    code = "upstream_unavailable"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StoreRefused(MemoryPoolError):
    """The vector store refused a write for what it holds (a vector of the wrong size, a bad
    id or payload): the same write is refused again, so it is not retried."""

    code = "store_refused"


class InputRejected(MemoryPoolError):
    """The embedding provider refused one input for good (a 400 about that input)."""

    code = "input_rejected"


class RecallTimeout(MemoryPoolError):
    """Recall did not finish within its budget."""

    code = "recall_timeout"


class PointNotFound(MemoryPoolError):
    """No point with that id in the agent's collection."""

    code = "point_not_found"


class MessageNotFound(MemoryPoolError):
    """An edit names a message id the agent never saw (or forgot: its mark expired and no
    chunk holds it)."""

    code = "message_not_found"


class MessageDeleted(MemoryPoolError):
    """An edit names a deleted message: a deleted id stays deleted."""

    code = "message_deleted"
