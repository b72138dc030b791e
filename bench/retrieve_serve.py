"""/retrieve through a running `memory-pool serve`, on Qdrant Edge (this version) and on
qdrant-client's local mode (the previous version, run from its own commit), same run, with the
Discord plugin's 30 exclusions; and Edge's bare query on the same folder for the ratio.

Each row: a data folder filled with N chunks of D dimensions, then serve started on it and
/retrieve asked over HTTP (the embedding comes from the bench's OpenAI-compatible server, timed
alone as `embed`); then serve stopped and the same queries sent straight to the Edge shard
(`EdgeShard.query`, same filter, limit and payload: none of memory-pool's code).

The 30 excluded ids (`--exclude`): `random` (one message of 30 random chunks), `top` (one
message of each of the query's 30 best-matching chunks: the plugin excludes the conversation it
is in, which is what the question is most like) or `none`. `--before COMMIT` adds the same Edge
rows with serve run from that commit's files, on the same folder.

Run: .venv/bin/python -m bench.retrieve_serve --sizes 10000,50000 --dims 384,3072
     [--baseline-commit a8181a6] [--samples 200] [--local-samples 20]
     [--exclude random,top,none] [--before e722070]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import qdrant_edge as edge

from api.recall.query_filter import RecallFilters, recall_filter
from bench.machine import describe
from bench.procs import ROOT, base_env
from bench.recall import _payloads
from bench.stack import Stack
from bench.stats import median, pct, ratio, table
from bench.traffic import BASE_ID, WORDS
from shared.embedding.bm25 import document_terms
from shared.store.edge.engine import EdgeStore
from shared.store.edge.filters import to_edge
from shared.store.edge.tuning import RESCORED
from shared.store.interface import PointToWrite
from tests.support.redis_server import free_port

BOT = "recall"
COLLECTION = "mem_recall"
MODEL = "text-embedding-3-small"
BATCH = 256
# the previous version: serve on qdrant-client's local mode (before Qdrant Edge)
BASELINE_COMMIT = "a8181a6"


def _vectors(start: int, count: int, dims: int) -> np.ndarray:
    gen = np.random.default_rng(start + dims)
    vectors = gen.standard_normal((count, dims), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _pid(n: int) -> str:
    return str(uuid.UUID(int=n + 1))


def fill_edge(data: Path, size: int, dims: int, *, terms: bool = True) -> None:
    """`size` chunks in serve's Edge folder; without `terms`, as a writer that gives none leaves
    them (a bare collection, for the backfill to find)."""
    store = EdgeStore(data / "edge", optimize_in_background=False)
    try:
        if terms:
            store.ensure_collection(COLLECTION, size=dims, model=MODEL)
        else:
            store.create(COLLECTION, size=dims, model=MODEL)
        rng = random.Random(dims)
        for start in range(0, size, BATCH):
            n = min(BATCH, size - start)
            payloads = _payloads(start, n, rng)
            vectors = _vectors(start, n, dims)
            store.upsert(COLLECTION, [
                PointToWrite(_pid(start + i), v.tolist(), p,
                             document_terms(p["text"]) if terms else None)
                for i, (v, p) in enumerate(zip(vectors, payloads, strict=True))
            ])  # fmt: skip
        store.optimize(COLLECTION)
    finally:
        store.close()


def fill_local(data: Path, size: int, dims: int) -> None:
    """The previous version's folder: qdrant-client's local mode under data/qdrant."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(data / "qdrant"))
    try:
        client.create_collection(
            COLLECTION,
            models.VectorParams(size=dims, distance=models.Distance.COSINE),
            metadata={"memory_pool": {"embedding_model": MODEL, "dimensions": dims}},
        )
        rng = random.Random(dims)
        for start in range(0, size, 1000):
            n = min(1000, size - start)
            payloads = _payloads(start, n, rng)
            client.upsert(COLLECTION, [
                models.PointStruct(id=BASE_ID + start + i, vector=v.tolist(), payload=p)
                for i, (v, p) in enumerate(zip(_vectors(start, n, dims), payloads, strict=True))
            ])  # fmt: skip
    finally:
        client.close()


Ask = tuple[str, list[str]]  # a query's text and its excluded message ids


def _query(i: int, size: int) -> Ask:
    rng = random.Random(i)
    text = f"do you remember the {rng.choice(WORDS)} and the {rng.choice(WORDS)}? ({i})"
    return text, [str(BASE_ID + rng.randrange(size) * 10) for _ in range(30)]


def asks(data: Path, embed_url: str, size: int, samples: int, exclude: str) -> list[Ask]:
    """The queries of a row (five more first, to warm up), with their exclusions; `top` reads
    each query's 30 nearest chunks straight from the Edge shard (serve not running)."""
    chosen = [_query(i, size) for i in range(-5, samples)]
    if exclude == "none":
        return [(text, []) for text, _ in chosen]
    if exclude == "random":
        return chosen
    shard = edge.EdgeShard.load(str(data / "edge" / COLLECTION))
    try:
        with httpx.Client(timeout=60, trust_env=False) as http:
            out = []
            for text, _ in chosen:
                reply = http.post(f"{embed_url}/embeddings", json={"model": MODEL, "input": [text]})
                vector = reply.json()["data"][0]["embedding"]
                best = shard.query(edge.QueryRequest(
                    limit=30, query=edge.Query.Nearest(vector), with_payload=True, params=RESCORED,
                ))  # fmt: skip
                out.append((text, [str((p.payload or {})["messageIdList"][0]) for p in best]))
            return out
    finally:
        shard.close()


class Serve:
    """`memory-pool serve` on a data folder (its own embedded Redis), from this checkout or
    from another commit's files."""

    def __init__(self, data: Path, embed_url: str, code: Path | None = None, **extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = base_env(
            MEMORY_POOL_DATA_DIR=str(data), EMBEDDING_PROVIDER="openai",
            EMBEDDING_BASE_URL=embed_url, OPENAI_API_KEY="bench", EMBEDDING_MODEL=MODEL, **extra,
        )  # fmt: skip
        env.pop("REDIS_URL", None)
        env.pop("QDRANT_URL", None)
        if code is not None:
            env["PYTHONPATH"] = str(code)
        argv = [sys.executable, "-m", "memory_pool.main", "serve", "--port", str(self.port)]
        self.log = open(data / "serve.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv, env=env, cwd=str(code or ROOT), stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 600  # the previous version loads local mode's folder
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"serve did not start: {(data / 'serve.log').read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def retrieve(serve: Serve, embed_url: str, queries: list[Ask]) -> dict[str, list[float]]:
    took: dict[str, list[float]] = {"retrieve": [], "embed": []}
    with httpx.Client(timeout=60, trust_env=False) as http:
        for i, (text, excluded) in enumerate(queries, start=-5):
            body = {"bot": BOT, "query_text": text, "exclude_message_ids": excluded,
                    "score_threshold": 0}  # fmt: skip
            t0 = time.perf_counter()
            response = http.post(f"{serve.url}/retrieve", json=body)
            t1 = time.perf_counter()
            http.post(f"{embed_url}/embeddings", json={"model": MODEL, "input": [text]})
            t2 = time.perf_counter()
            if i < 0:  # the first five warm connections and caches (a cold one may time out)
                continue
            if response.status_code != 200 or not response.json()["hits"]:
                raise RuntimeError(f"/retrieve failed: {response.status_code} {response.text}")
            took["retrieve"].append((t1 - t0) * 1000)
            took["embed"].append((t2 - t1) * 1000)
    return took


def bare(data: Path, embed_url: str, queries: list[Ask]) -> list[float]:
    """Edge's own query on serve's folder, serve stopped: same filter, limit and payload."""
    with httpx.Client(timeout=60, trust_env=False) as http:
        vectors = []
        for text, excluded in queries[5:]:
            reply = http.post(f"{embed_url}/embeddings", json={"model": MODEL, "input": [text]})
            vectors.append((reply.json()["data"][0]["embedding"], excluded))
    shard = edge.EdgeShard.load(str(data / "edge" / COLLECTION))
    try:
        took = []
        for vector, excluded in vectors:
            request = edge.QueryRequest(
                limit=20, query=edge.Query.Nearest(vector), with_payload=True,
                filter=to_edge(recall_filter(RecallFilters(), excluded)), score_threshold=0.0,
            )  # fmt: skip
            t = time.perf_counter()
            shard.query(request)
            took.append((time.perf_counter() - t) * 1000)
        return took
    finally:
        shard.close()


def baseline_code(commit: str, into: Path) -> Path:
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


HEADER = ["chunks", "serve", "excluded", "/retrieve p50", "p95", "embed p50",
          "/retrieve - embed p50", "bare p50", "bare p95", "p95 / bare p95",
          "(p50 - embed) / bare p50"]  # fmt: skip


def edge_rows(
    data: Path, embed_url: str, size: int, args: argparse.Namespace, codes: dict[str, Path | None]
) -> list[list[Any]]:
    """One row per exclusion kind and per serve (this checkout, `--before`'s commit): each
    serve started once and asked every kind's queries; the bare query after."""
    kinds = args.exclude.split(",")
    queries = {kind: asks(data, embed_url, size, args.samples, kind) for kind in kinds}
    rows = []
    for name, code in codes.items():
        serve = Serve(data, embed_url, code=code)
        try:
            got = {kind: retrieve(serve, embed_url, queries[kind]) for kind in kinds}
        finally:
            serve.stop()
        for kind in kinds:
            own = bare(data, embed_url, queries[kind])
            rec, embed = got[kind]["retrieve"], got[kind]["embed"]
            rest = median(rec) - median(embed)
            rows.append([
                name, kind, median(rec), pct(rec, 95), median(embed), rest, median(own),
                pct(own, 95), ratio(pct(rec, 95), pct(own, 95)), ratio(rest, median(own)),
            ])  # fmt: skip
    return rows


def local_row(
    tmp: Path, embed_url: str, size: int, dims: int, args: argparse.Namespace, old: Path
) -> list[Any]:
    data = tmp / f"local-{size}-{dims}"
    data.mkdir()
    fill_local(data, size, dims)
    serve = Serve(data, embed_url, code=old)
    try:
        queries = asks(data, embed_url, size, args.local_samples, "random")
        got = retrieve(serve, embed_url, queries)
    finally:
        serve.stop()
    rec = got["retrieve"]
    return [
        f"local mode ({args.baseline_commit})", "random", median(rec), pct(rec, 95),
        median(got["embed"]), median(rec) - median(got["embed"]), "", "", "", "",
    ]  # fmt: skip


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,50000")
    parser.add_argument("--dims", default="384,3072")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--local-samples", type=int, default=20)
    parser.add_argument("--baseline-commit", default=BASELINE_COMMIT)
    parser.add_argument("--no-local", action="store_true", help="Edge rows only")
    parser.add_argument(
        "--local-max", type=int, default=0,
        help="local-mode rows only where chunks x dims is at most this (0: every row)",
    )  # fmt: skip
    parser.add_argument("--exclude", default="random,top", help="none, random, top")
    parser.add_argument("--before", default=None, help="Edge rows also from this commit")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    print(describe(), flush=True)
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory(prefix="mp-serve-") as tmp:
        old = None if args.no_local else baseline_code(args.baseline_commit, Path(tmp) / "old")
        codes: dict[str, Path | None] = {"Edge (this version)": None}
        if args.before:
            codes[f"Edge ({args.before})"] = baseline_code(args.before, Path(tmp) / "before")
        for dims in [int(d) for d in args.dims.split(",")]:
            with Stack() as stack:
                embed_url = stack.start_embedding(dims)
                for size in [int(s) for s in args.sizes.split(",")]:
                    label = f"{size // 1000}k x {dims}"
                    data = Path(tmp) / f"edge-{size}-{dims}"
                    data.mkdir()
                    fill_edge(data, size, dims)
                    for row in edge_rows(data, embed_url, size, args, codes):
                        rows.append([label, *row])
                    print(table(HEADER, rows), flush=True)
                    if old is None or (args.local_max and size * dims > args.local_max):
                        continue
                    rows.append([label, *local_row(Path(tmp), embed_url, size, dims, args, old)])
                    print(table(HEADER, rows), flush=True)


if __name__ == "__main__":
    main()
