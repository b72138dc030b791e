"""The MCP server on the API: streamable HTTP at /mcp, one route and nothing around it, so every
other path is served exactly as before; the app's lifespan runs its session manager.

The app's own middleware applies to /mcp as to every path: the door (host, key, body size),
request ids, metrics. The SDK's own host check is off (the door's is the one, with the same
setting) and its body limit is the door's. Stateless, with JSON answers: every tool call is one
POST judged by its own key, and nothing is kept between calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from api.mcp import in_process
from api.mcp.tools import build_server
from api.middleware import send_error
from shared.errors import UpstreamUnavailable

MCP_PATH = "/mcp"


class McpEndpoint:
    """The ASGI app at /mcp: each request goes to the session manager the lifespan started."""

    def __init__(self, server: MCPServer, max_body_bytes: int) -> None:
        self.server = server
        self.max_body_bytes = max_body_bytes
        self.manager: StreamableHTTPSessionManager | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self.manager
        if manager is None:  # only between the app's start and its lifespan, or after it
            detail = "the MCP server is not running (the app's lifespan has not started it)"
            await send_error(send, 503, UpstreamUnavailable.code, detail, path=scope["path"])
            return
        if scope["method"] == "GET":
            # stateless: no server-to-client stream to offer, and the SDK's would stay open,
            # silent, for as long as the caller keeps it (the spec's answer: 405)
            body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"use POST"}}'
            headers = [(b"content-type", b"application/json"), (b"allow", b"POST")]
            await send({"type": "http.response.start", "status": 405, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await manager.handle_request(scope, receive, send)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """A session manager for one run of the app (a manager runs once only)."""
        self.server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=self.max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.server.session_manager
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None


def install_mcp(app: FastAPI, max_body_bytes: int) -> McpEndpoint:
    """/mcp on the app, out of its OpenAPI schema (MCP is described by its own tools/list)."""
    endpoint = McpEndpoint(build_server(in_process.connect), max_body_bytes)
    app.router.routes.append(Route(MCP_PATH, endpoint=endpoint, include_in_schema=False))
    return endpoint
