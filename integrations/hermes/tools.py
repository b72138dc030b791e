"""The model's memory tools: memory_pool_search (/retrieve) and memory_pool_remember (/save).

Each handler returns the tool result as a dict, and raises on a failure; the provider turns
both into the JSON string Hermes hands the model (`tool_result`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from .memory_pool_client import MemoryPoolClient, MemoryPoolError
from .turns import SOURCE, fact_message

SEARCH_TOOL = "memory_pool_search"
REMEMBER_TOOL = "memory_pool_remember"
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
MAX_FACT_CHARS = 2000

SEARCH_SCHEMA: dict[str, Any] = {
    "name": SEARCH_TOOL,
    "description": (
        "Search the character's long-term memory (past conversations here, on Discord and in "
        "SillyTavern) by meaning. Call it when the user refers to something from before that "
        "is not in this conversation, or asks what you remember; the memories recalled "
        "automatically each turn may not cover it. Returns past chunks with their speakers "
        "and dates."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to look for, in plain words; English time words "
                '("last weekend", "in May") put the memories of that time first.',
            },
            "limit": {
                "type": "integer",
                "description": f"How many memories at most (default {DEFAULT_LIMIT}, "
                f"max {MAX_LIMIT}).",
            },
        },
        "required": ["query"],
    },
}

REMEMBER_SCHEMA: dict[str, Any] = {
    "name": REMEMBER_TOOL,
    "description": (
        "Keep one durable fact in the character's long-term memory, in one self-contained "
        "sentence (who, what, when). Call it when the user states a lasting preference, "
        "decision, correction or personal detail worth recalling in later conversations. The "
        "conversation itself is saved anyway: do not repeat it here, and skip chit-chat. "
        "Keeping the same fact twice stores it once."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "fact": {
                "type": "string",
                "description": f"The fact to keep (at most {MAX_FACT_CHARS} characters).",
            },
        },
        "required": ["fact"],
    },
}

SCHEMAS = (SEARCH_SCHEMA, REMEMBER_SCHEMA)
TOOL_NAMES = frozenset(schema["name"] for schema in SCHEMAS)


class BadArguments(ValueError):
    """The model's arguments cannot be used; the message says why."""


class NotMemoryPool(Exception):
    """A 2xx whose body is not memory-pool's answer: something else listens at the URL."""


def _answer_of(answer: Any, needs: str) -> Mapping[str, Any]:
    """memory-pool's JSON object, which holds `needs`; anything else is another service's
    (a `{}` read as no refusal and no duplicate would tell the model a fact was kept)."""
    if not isinstance(answer, Mapping) or needs not in answer:
        raise NotMemoryPool(f"no {needs!r} in {str(answer)[:100]}")
    return answer


def tool_result(result: Mapping[str, Any]) -> str:
    """A tool result as Hermes expects it: a JSON string."""
    return json.dumps(result, ensure_ascii=False)


def failure(exc: BaseException, url: str) -> dict[str, str]:
    """Why a call failed, for the model: memory-pool's own reason when it gave one."""
    if isinstance(exc, BadArguments):
        return {"error": f"bad arguments: {exc}"}
    if isinstance(exc, MemoryPoolError):
        return {"error": f"memory-pool refused ({exc.status} {exc.error}): {exc.detail}"}
    if isinstance(exc, NotMemoryPool | json.JSONDecodeError):
        return {"error": f"{url} did not answer as memory-pool does ({exc}); is the URL right?"}
    if isinstance(exc, httpx.TimeoutException):
        return {"error": f"memory-pool at {url} did not answer in time; try again later"}
    if isinstance(exc, httpx.TransportError):
        return {"error": f"memory-pool at {url} is unreachable ({type(exc).__name__}: {exc})"}
    return {"error": f"memory-pool call failed ({type(exc).__name__}: {exc})"}


def _text_argument(args: Mapping[str, Any], name: str, max_chars: int | None = None) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise BadArguments(f"`{name}` must be a non-empty string")
    if max_chars is not None and len(value) > max_chars:
        raise BadArguments(f"`{name}` is {len(value)} characters; at most {max_chars}")
    return value.strip()


def _limit_argument(args: Mapping[str, Any]) -> int:
    value = args.get("limit")
    if value is None or value == "":
        return DEFAULT_LIMIT
    try:
        limit = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: inf (JSON's 1e400)
        raise BadArguments(f"`limit` must be a whole number, not {value!r}") from None
    return max(1, min(limit, MAX_LIMIT))


def _date(timestamp: Any) -> str | None:
    """A chunk's epoch-ms timestamp as an ISO 8601 UTC date and time."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        return None
    try:
        moment = datetime.fromtimestamp(timestamp / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _memory(hit: Mapping[str, Any]) -> dict[str, Any]:
    payload = hit.get("payload") or {}
    memory: dict[str, Any] = {"text": str(payload.get("text", ""))}
    if payload.get("speakers"):
        memory["speakers"] = str(payload["speakers"])
    if (date := _date(payload.get("timestamp"))) is not None:
        memory["date"] = date
    if payload.get("source"):
        memory["source"] = str(payload["source"])
    if isinstance(hit.get("score"), int | float):
        memory["score"] = round(float(hit["score"]), 3)
    return memory


def search(
    client: MemoryPoolClient,
    agent: str,
    args: Mapping[str, Any],
    *,
    exclude: Sequence[str],
    timeout: float,
) -> dict[str, Any]:
    """/retrieve for the model's query, leaving out the turns already in its context."""
    query = _text_argument(args, "query")
    limit = _limit_argument(args)
    answer = _answer_of(
        client.retrieve(agent, query, exclude_message_ids=exclude, limit=limit, timeout=timeout),
        "hits",
    )
    memories = [_memory(hit) for hit in answer.get("hits") or [] if isinstance(hit, Mapping)]
    result: dict[str, Any] = {"query": query, "count": len(memories), "memories": memories}
    if not memories:
        result["note"] = "No memory matched; try other words, or the user never said it."
    return result


def remember(
    client: MemoryPoolClient,
    agent: str,
    args: Mapping[str, Any],
    *,
    user_id: str | None,
    now_ms: int,
    timeout: float,
) -> dict[str, Any]:
    """/save of one fact (source `hermes`); what memory-pool did with it."""
    message = fact_message(
        _text_argument(args, "fact", MAX_FACT_CHARS), now_ms=now_ms, user_id=user_id
    )
    counts = _answer_of(client.save(agent, [message], source=SOURCE, timeout=timeout), "accepted")
    result: dict[str, Any] = {"message_id": message["message_id"]}
    if counts.get("refused"):
        reasons = [r.get("reason", "") for r in counts.get("refusals") or []]
        return result | {"stored": False, "error": f"memory-pool refused it: {reasons}"}
    if counts.get("skipped"):
        return result | {"stored": False, "reason": "too short to keep as a memory"}
    if counts.get("duplicates"):
        return result | {"stored": True, "duplicate": True, "note": "already kept"}
    note = "kept; searchable once memory-pool writes its chunk (about a minute after the last)"
    return result | {"stored": True, "duplicate": False, "note": note}
