"""CORS for the paths a browser page calls (st-qdrant-memory in SillyTavern): /v1/... and
/qdrant/..., for the allowed origins only. Every other path, and every other origin, gets no
CORS header: the rest of the API stays closed to web pages."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.middleware import HttpMiddleware

# The path prefixes a page may call: the embeddings and the Qdrant API.
BROWSER_PREFIXES = ("/v1", "/qdrant")
ALLOWED_METHODS = "GET, POST, PUT, DELETE"
# What st-qdrant-memory sends: JSON, its embedding key (Bearer), its Qdrant key (api-key); and
# memory-pool's own key header.
ALLOWED_HEADERS = "Content-Type, Authorization, api-key, X-API-Key"
MAX_AGE_SECONDS = "600"


def for_pages(path: str) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in BROWSER_PREFIXES)


def _preflight_headers(origin: str, asks_private_network: bool) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-methods", ALLOWED_METHODS.encode()),
        (b"access-control-allow-headers", ALLOWED_HEADERS.encode()),
        (b"access-control-max-age", MAX_AGE_SECONDS.encode()),
        (b"vary", b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
        (b"content-length", b"0"),
    ]
    if asks_private_network:  # Chrome's Private Network Access: a page of the LAN
        headers.append((b"access-control-allow-private-network", b"true"))
    return headers


class Cors(HttpMiddleware):
    """Answers the preflights of allowed origins itself and marks their answers readable;
    passes everything else through untouched."""

    def __init__(self, app: ASGIApp, origins: frozenset[str]) -> None:
        super().__init__(app)
        self.origins = origins

    def _allowed_origin(self, headers: Headers) -> str | None:
        origin = headers.get("origin")
        if origin is None:
            return None
        return origin if origin.rstrip("/").lower() in self.origins else None

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the path first: every other request (/save's firehose) passes without a header read
        if not for_pages(scope["path"]):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = self._allowed_origin(headers)
        if origin is None:
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            private = headers.get("access-control-request-private-network", "") == "true"
            start = {"type": "http.response.start", "status": 204,
                     "headers": _preflight_headers(origin, private)}  # fmt: skip
            await send(start)
            await send({"type": "http.response.body", "body": b""})
            return

        async def readable(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    (b"access-control-allow-origin", origin.encode("latin-1")),
                    (b"vary", b"Origin"),
                ]
            await send(message)

        await self.app(scope, receive, readable)
