"""Test embedding and Qdrant servers that count their requests: `python -m bench.services ...`.

They wrap tests.support's servers and add `GET /bench/stats` (request counts) and
`POST /bench/reset`, so a benchmark can count embedding requests and Qdrant upserts per message.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tests.support import embedding_server as emb
from tests.support import qdrant_server as qs


class CountingEmbeddingServer(emb.EmbeddingServer):
    """The embedding test server plus /bench/stats: requests and inputs seen."""

    def dispatch(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        stopping: threading.Event,
    ) -> Any:
        if path.startswith("/bench/stats"):
            with self._log_lock:
                records = list(self.requests)
            stats = {
                "requests": len(records),
                "inputs": sum(r.n_inputs for r in records),
                "errors": sum(1 for r in records if r.status != 200),
            }
            return emb._Reply(200, stats)
        if path.startswith("/bench/reset"):
            self.reset_log()
            return emb._Reply(200, {"ok": True})
        return super().dispatch(method, path, headers, body, stopping)


def classify(method: str, path: str) -> str:
    """A Qdrant REST call by kind: upsert, query, search, scroll, count, ... ."""
    parts = [p for p in path.split("/") if p]
    if method == "PUT" and len(parts) == 3 and parts[2] == "points":
        return "upsert"
    if len(parts) >= 4 and parts[2] == "points":
        return parts[3]
    return f"{method} /{'/'.join(parts[:1] + ['*'] * (len(parts) > 1) + parts[2:])}"


class Counting:
    """ASGI wrapper counting requests by kind and answering /bench/stats and /bench/reset."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path, method = scope["path"], scope["method"]
            if path.startswith("/bench/"):
                if path == "/bench/reset":
                    self.counts.clear()
                await _json(send, dict(self.counts))
                return
            self.counts[classify(method, path)] += 1
        await self.app(scope, receive, send)


async def _json(send: Any, payload: dict) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _serve_qdrant(path: str | None) -> None:
    original = qs.build_app

    def counting(
        backend: qs.Backend,
        faults: qs.UpsertFaults | None = None,
        version: qs.Version | None = None,
    ) -> Any:
        return Counting(original(backend, faults, version))

    qs.build_app = counting
    with qs.QdrantTestServer(path, 0) as server:
        print(f"READY {server.url}", flush=True)
        _wait_for_signal()


def _serve_embeddings(dims: int) -> None:
    with CountingEmbeddingServer(dims) as server:
        print(f"READY {server.url}", flush=True)
        _wait_for_signal()


def _wait_for_signal() -> None:
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    while not stopping.wait(0.5):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="kind", required=True)
    sub.add_parser("embed").add_argument("--dims", type=int, default=384)
    sub.add_parser("qdrant").add_argument("--path", default=None)
    args = parser.parse_args(argv)
    if args.kind == "embed":
        _serve_embeddings(args.dims)
    else:
        _serve_qdrant(args.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
