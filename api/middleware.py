"""The door: ASGI middleware that refuses a request before its body is read (host, key, size)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
from collections.abc import Iterable

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.auth import find_key, presented_key
from api.errors import error_body_for
from api.qdrant.access import key_headers
from api.qdrant.shape import is_qdrant_path
from shared.agents import Agents
from shared.errors import RequestTooLarge, Unauthorized
from shared.format.ids import shown
from shared.settings import Settings

log = logging.getLogger(__name__)

# What a browser on this machine calls a loopback server; a DNS-rebinding page calls it by the
# attacker's own name, which is what the host check refuses.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class HttpMiddleware:
    """An ASGI middleware of HTTP requests: anything else (the lifespan) passes through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


async def send_error(
    send: Send, status: int, code: str, detail: str, *, path: str = "", close: bool = False
) -> None:
    """Answer in the error shape of the request's `path` without the app; `close` ends the
    connection after it."""
    body = json.dumps(error_body_for(path, status, code, detail)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def host_name(host: str) -> str:
    """The name in a Host header or an allowed-hosts entry: no port, no brackets, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") > 1:  # a bare IPv6 address (only in a setting)
        return host
    return host.partition(":")[0].rstrip(".")


def _is_loopback(server: Iterable[object] | None) -> bool:
    if not server:
        return False
    address = str(next(iter(server)))
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class HostCheck:
    """Refuses requests addressed to a host name that is not allowed (DNS rebinding).

    `allowed` None: the loopback names on a loopback connection (`memory-pool serve` binds
    127.0.0.1), any name otherwise. "*" allows any name.
    """

    def __init__(self, app: ASGIApp, allowed: frozenset[str] | None) -> None:
        self.app = app
        self.allowed = None if allowed is None else frozenset(host_name(h) for h in allowed)

    def _allowed_for(self, scope: Scope) -> frozenset[str] | None:
        if self.allowed is not None:
            return None if "*" in self.allowed else self.allowed
        return LOOPBACK_NAMES if _is_loopback(scope.get("server")) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        allowed = self._allowed_for(scope) if scope["type"] == "http" else None
        host = Headers(scope=scope).get("host") if allowed is not None else None
        if allowed is None or host is None or host_name(host) in allowed:
            await self.app(scope, receive, send)
            return
        # A refused page of the plugin's would go unnoticed (it ignores answers): say so.
        log.warning(
            "refused a request for host %r (allowed: %s); set MEMORY_POOL_ALLOWED_HOSTS",
            shown(host), ", ".join(sorted(allowed)),
        )  # fmt: skip
        detail = (
            f"host {shown(host)!r} is not allowed here; allowed: {', '.join(sorted(allowed))} "
            "(MEMORY_POOL_ALLOWED_HOSTS)"
        )
        await send_error(send, 400, "host_not_allowed", detail, path=scope["path"])


class KeyCheck:
    """A presented API key that matches no configured key is 401 before the body is read.

    Whether a valid key may reach the agent is only known once `bot` is parsed (api/deps.py).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        agents = self._agents(scope) if scope["type"] == "http" else None
        key = self._presented(scope) if agents is not None else None
        if agents is not None and key is not None and find_key(agents, key) is None:
            detail = "the API key is not valid"
            await send_error(send, 401, Unauthorized.code, detail, path=scope["path"])
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _presented(scope: Scope) -> str | None:
        """The key as the endpoint reads it: under /qdrant, st-qdrant-memory's `api-key` too
        (when neither Bearer nor X-API-Key is there, api/qdrant/access.py)."""
        headers = Headers(scope=scope)
        return presented_key(key_headers(headers) if is_qdrant_path(scope["path"]) else headers)

    @staticmethod
    def _agents(scope: Scope) -> Agents | None:
        runtime = getattr(scope["app"].state, "runtime", None) if "app" in scope else None
        return runtime.agents if runtime is not None else None


class _BodyTooLarge(Exception):
    """Raised into the app from `receive` when the body passes the limit."""


class BodyLimit(HttpMiddleware):
    """413 as soon as the declared length or the bytes received pass `max_bytes`: the rest is
    never read, and the connection is closed so the client stops sending."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def refuse(self, scope: Scope, send: Send) -> None:
        detail = f"the request body is over {self.max_bytes} bytes (MEMORY_POOL_MAX_BODY_BYTES)"
        await send_error(send, 413, RequestTooLarge.code, detail, path=scope["path"], close=True)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self.refuse(scope, send)
            return
        state = {"received": 0, "exceeded": False, "started": False}

        async def limited() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.max_bytes:
                    state["exceeded"] = True
                    raise _BodyTooLarge
            return message

        async def guarded(message: Message) -> None:
            # The app's own answer to a body cut short (FastAPI: a 400) is replaced by the 413.
            if state["exceeded"] and not state["started"]:
                return
            state["started"] = state["started"] or message["type"] == "http.response.start"
            await send(message)

        # Unless the app turned it into an answer of its own, which `guarded` has dropped.
        with contextlib.suppress(_BodyTooLarge):
            await self.app(scope, limited, guarded)
        if state["exceeded"] and not state["started"]:
            await self.refuse(scope, send)


def install_door(app: FastAPI, settings: Settings) -> None:
    """The three checks, outermost first: the host, then the key, then the body as it streams."""
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(KeyCheck)
    app.add_middleware(HostCheck, allowed=settings.allowed_host_names)
