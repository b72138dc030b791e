"""memory-pool's HTTP API as Python calls: one place that knows the endpoints and their bodies.

Self-contained (only httpx), so an integration such as the Hermes plugin can carry a copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:3102"


def _segment(value: str) -> str:
    """One path segment: "/", "?", "#" and "%" escaped, and "." too, since httpx resolves
    "." and ".." segments (an id "../../other/memories/X" would name another agent's point)."""
    return quote(value, safe="").replace(".", "%2E")


def agent_path(bot: str, *rest: str) -> str:
    """/agents/{bot}/... with every part escaped as one segment."""
    return "/".join(["/agents", *(_segment(part) for part in (bot, *rest))])


class MemoryPoolError(Exception):
    """An answer other than 2xx, with memory-pool's {error, detail} when it sent one."""

    def __init__(self, status: int, error: str, detail: str) -> None:
        super().__init__(f"{status} {error}: {detail}")
        self.status = status
        self.error = error
        self.detail = detail


class MemoryPoolClient:
    """Synchronous client; thread-safe (httpx.Client is), reuse one per process."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> MemoryPoolClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.is_success:
            return response.json()
        try:
            body = response.json()
            error, detail = str(body["error"]), str(body["detail"])
        except (ValueError, KeyError, TypeError):
            error, detail = "http_error", response.text[:500]
        raise MemoryPoolError(response.status_code, error, detail)

    def save(
        self,
        bot: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        source: str | None = None,
        batch_import: bool = False,
        timeout: float | None = None,
    ) -> dict[str, int]:
        """POST /save; returns the counts accepted, duplicates and skipped."""
        body: dict[str, Any] = {"bot": bot, "messages": list(messages)}
        if source is not None:
            body["source"] = source
        if batch_import:
            body["batch_import"] = True
        extra = {"timeout": timeout} if timeout is not None else {}
        return self._call("POST", "/save", json=body, **extra)

    def retrieve(
        self,
        bot: str,
        query_text: str,
        *,
        exclude_message_ids: Iterable[str] = (),
        timeout: float | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """POST /retrieve; options: limit, score_threshold, source, channel_id, guild_id,
        since, until. Returns {"hits": [...], "formatted": "..."}."""
        body = {"bot": bot, "query_text": query_text, **options}
        body["exclude_message_ids"] = list(exclude_message_ids)
        extra = {"timeout": timeout} if timeout is not None else {}
        return self._call("POST", "/retrieve", json=body, **extra)

    def flush(self, bot: str, *, wait: bool = True, timeout: float = 30.0) -> dict[str, Any]:
        """Write every open chunk of an agent now; with `wait`, once they are stored."""
        params = {"wait": str(wait).lower(), "timeout": timeout}
        return self._call("POST", agent_path(bot, "flush"), params=params, timeout=timeout + 5)

    def delete(self, bot: str, **scope: str) -> dict[str, int]:
        """Delete one scope: source (+ channel_id or conversation_id), message_id or user_id."""
        return self._call("POST", agent_path(bot, "delete"), json=scope)

    def edit(
        self, bot: str, message_id: str, text: str, *, source: str | None = None
    ) -> dict[str, str]:
        """Give a message the agent saw a new text, wherever it is (buffered, or in a written
        chunk, rewritten within seconds). Returns {"message_id", "source", "outcome"}; outcome:
        edited, unchanged, emptied (too short to keep: it left its chunk) or stale (its chunk
        cannot be rebuilt: written before edits were kept, or by st-qdrant-memory). Raises
        MemoryPoolError 404 message_not_found (ids are per source: the default source when
        `source` is None), 410 message_deleted, 413 request_too_large (a text over the server's
        MEMORY_POOL_MAX_CHARS, what /save takes for one message)."""
        body: dict[str, Any] = {"text": text}
        if source is not None:
            body["source"] = source
        return self._call("PATCH", agent_path(bot, "messages", message_id), json=body)

    def known_ids(self, bot: str, message_ids: Iterable[str]) -> list[str]:
        """Which of these message ids the agent's collection already holds (any writer)."""
        body = {"message_ids": list(message_ids)}
        return self._call("POST", agent_path(bot, "known-ids"), json=body)["known"]

    def known_fingerprints(
        self, bot: str, message_ids: Iterable[str], *, source: str
    ) -> dict[str, str | None]:
        """Each of these ids the collection holds -> the fingerprint of the text the source's
        chunks hold for it, or None where there is none to compare (st-qdrant-memory's points,
        older ones, another source's, or a server without fingerprints)."""
        body = {"message_ids": list(message_ids), "source": source}
        answer = self._call("POST", agent_path(bot, "known-ids"), json=body)
        fingerprints = answer.get("fingerprints") or {}
        return {mid: fingerprints.get(mid) for mid in answer["known"]}

    def agents(self) -> list[dict[str, Any]]:
        """The agents this client's key may reach: name, collection, listed, blocked."""
        return self._call("GET", "/agents")["agents"]

    def memories(
        self, bot: str, *, limit: int = 50, cursor: str | None = None, **filters: Any
    ) -> dict[str, Any]:
        """One page of an agent's chunks, newest first: {"memories": [...], "next_cursor"}.
        Filters: source, channel_id, guild_id, conversation_id, user_id, since, until."""
        params = {"limit": limit, **{k: v for k, v in filters.items() if v is not None}}
        if cursor is not None:
            params["cursor"] = cursor
        return self._call("GET", agent_path(bot, "memories"), params=params)

    def all_memories(self, bot: str, *, page_size: int = 200, **filters: Any) -> Iterator[dict]:
        """Every matching chunk, newest first, page by page."""
        cursor = None
        while True:
            page = self.memories(bot, limit=page_size, cursor=cursor, **filters)
            yield from page["memories"]
            if (cursor := page["next_cursor"]) is None:
                return

    def memory(self, bot: str, point_id: str) -> dict[str, Any]:
        return self._call("GET", agent_path(bot, "memories", point_id))

    def delete_memory(self, bot: str, point_id: str, *, dry_run: bool = False) -> dict[str, int]:
        """Delete one chunk (its messages are never stored again); `dry_run` only counts."""
        params = {"dry_run": "true"} if dry_run else {}
        return self._call("DELETE", agent_path(bot, "memories", point_id), params=params)

    def delete_preview(self, bot: str, **scope: str) -> dict[str, int]:
        """What `delete(bot, **scope)` would remove: points, message_ids, points_without_source."""
        return self._call("POST", agent_path(bot, "delete", "preview"), json=scope)

    def timeline(self, bot: str, *, days: int = 30) -> list[dict[str, Any]]:
        """Chunks per day (UTC) and source, oldest first."""
        return self._call("GET", agent_path(bot, "timeline"), params={"days": days})["days"]

    def stats(self, bot: str) -> dict[str, Any]:
        return self._call("GET", agent_path(bot, "stats"))

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/health")

    def dead_letters(self, *, offset: int = 0, limit: int = 100) -> dict[str, Any]:
        return self._call("GET", "/dead-letters", params={"offset": offset, "limit": limit})

    def replay_dead_letters(self, bot: str | None = None) -> dict[str, int]:
        return self._call("POST", "/dead-letters/replay", json={"bot": bot})

    def quarantine(
        self, bot: str | None = None, *, offset: int = 0, limit: int = 100
    ) -> dict[str, Any]:
        """Conversations set aside by a flush failure retrying cannot fix, with the reason."""
        params: dict[str, Any] = {"offset": offset, "limit": limit}
        if bot is not None:
            params["bot"] = bot
        return self._call("GET", "/quarantine", params=params)

    def release_quarantine(
        self, bot: str | None = None, conversation: str | None = None
    ) -> dict[str, int]:
        """Try quarantined conversations again (after a fix): by agent and/or conversation."""
        body = {"bot": bot, "conversation": conversation}
        return self._call("POST", "/quarantine/release", json=body)
