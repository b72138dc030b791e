"""A service that is not memory-pool at the URL a client was given: 200 and the same body for
every GET and POST (a web UI's page, another API's JSON)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _handler(content_type: str, body: bytes) -> type[BaseHTTPRequestHandler]:
    class NotMemoryPool(BaseHTTPRequestHandler):
        def _page(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _page

        def log_message(self, *args: Any) -> None:
            pass

    return NotMemoryPool


@contextmanager
def serving_not_memory_pool(content_type: str, body: bytes) -> Iterator[str]:
    """Its URL while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(content_type, body))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
