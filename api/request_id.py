"""The request id: taken from `X-Request-ID` (when it is a plain token) or made, set in the log
context for the request's lines, and returned in the response's `X-Request-ID` header."""

from __future__ import annotations

import logging
import re
import uuid

from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from api.middleware import HttpMiddleware, send_error
from shared.ops import log_context

log = logging.getLogger(__name__)

HEADER = "x-request-id"
# A proxy's id is kept only when it cannot forge log lines or carry a payload.
_ACCEPTED = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(headers: Headers) -> str:
    given = headers.get(HEADER, "")
    return given if _ACCEPTED.fullmatch(given) else uuid.uuid4().hex


class RequestId(HttpMiddleware):
    """Outermost middleware: even the door's refusals carry the id, in the header and the log."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        rid = request_id(Headers(scope=scope))
        started = False

        async def tagged(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"x-request-id"]
                message["headers"] = [*headers, (b"x-request-id", rid.encode())]
            await send(message)

        with log_context.bound(request_id=rid, agent=None):
            try:
                await self.app(scope, receive, tagged)
            except Exception as exc:
                # Starlette answers an unforeseen error outside every middleware, where the 500
                # and its traceback would lose the request id: answer it here (api/errors.py's
                # shape), once, unless an answer has begun.
                if started:
                    raise
                log.exception("unexpected error", exc_info=exc)
                detail = f"{type(exc).__name__}: see the server log"
                await send_error(tagged, 500, "internal_error", detail, path=scope["path"])
