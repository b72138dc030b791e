"""One qdrant-client connection: a lock around every call in local mode (it is not thread-safe),
and Qdrant's answers read as memory-pool's errors (unreachable, refused, missing)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeVar

import httpx
from qdrant_client import QdrantClient
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from shared.errors import StoreRefused, UpstreamUnavailable
from shared.store.qdrant.rules import is_missing

# Statuses with which Qdrant refuses a write for what it holds (a name, a point, a size).
CONTENT_REFUSALS = frozenset({400, 413, 422})

T = TypeVar("T")


class Connection:
    """The client and its lock."""

    def __init__(self, client: QdrantClient, *, local: bool) -> None:
        self.client = client
        # local mode is not thread-safe (qdrant-client issue 1193): every call takes one lock
        self.lock: AbstractContextManager[Any] = threading.Lock() if local else nullcontext()

    def close(self) -> None:
        with self.lock:
            self.client.close()

    @contextmanager
    def io(self) -> Iterator[QdrantClient]:
        """The client, under the local-mode lock, with connection trouble as UpstreamUnavailable."""
        with self.lock:
            try:
                yield self.client
            except ResourceExhaustedResponse as e:
                raise UpstreamUnavailable(
                    f"Qdrant is rate limiting: {e}", retry_after=e.retry_after_s
                ) from e
            except (ResponseHandlingException, httpx.HTTPError) as e:
                raise UpstreamUnavailable(f"Qdrant cannot be reached: {e}") from e
            except UnexpectedResponse as e:
                if e.status_code is None or e.status_code >= 500 or e.status_code == 429:
                    raise UpstreamUnavailable(f"Qdrant is unavailable: {e}") from e
                raise

    def read(self, name: str, call: Callable[[QdrantClient], T], *, missing: T) -> T:
        """`call` through `io`; `missing` when the collection does not exist."""
        try:
            with self.io() as client:
                return call(client)
        except (UnexpectedResponse, ValueError) as e:
            if is_missing(e, name):
                return missing
            raise


def refused(error: Exception) -> Exception:
    """Qdrant's refusal of the content of a write (400/413/422) as the store's StoreRefused;
    anything else (a 5xx, a refused key) as it is."""
    if isinstance(error, UnexpectedResponse) and error.status_code in CONTENT_REFUSALS:
        return StoreRefused(f"Qdrant refused the write ({error.status_code}): {message(error)}")
    return error


def message(error: UnexpectedResponse) -> str:
    try:
        return str(json.loads(error.content)["status"]["error"])
    except (ValueError, KeyError, TypeError):
        return error.content.decode("utf-8", "replace")[:500]
