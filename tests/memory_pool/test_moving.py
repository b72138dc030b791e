"""Moving a pool with the real commands: export from a running serve (its buffered messages
written first), copy of its stopped data folder to a Qdrant server, import into another data
folder; afterwards the plugin's re-sent messages are not stored again and a deleted message
does not come back, both through the real /save."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from memory_pool.pool_commands import PART_BYTES
from shared.agents import AgentConfig, Agents
from shared.state import keys
from shared.store.edge.engine import EdgeStore
from shared.store.interface import PointToWrite
from tests.support.embedding_server import EmbeddingServer, embed_text
from tests.support.qdrant_server import QdrantTestServer
from tests.support.serve import ROOT, Served, serve_env, serving
from tests.support.stack import running_stack, stack_settings

COLLECTION = "mem_mythos"


def body(message_id: str, channel: str) -> dict[str, Any]:
    """The Discord plugin's /save body for one message."""
    message = {
        "speaker_kind": "user", "discord_user_id": "1", "speaker_name": "Alex",
        "text": f"message {message_id}: the lighthouse keeper counted {message_id} whales",
        "message_id": message_id, "ts": 1718000000000 + int(message_id) * 1000,
        "channel_id": channel,
    }  # fmt: skip
    return {"bot": "mythos", "messages": [message]}


# One conversation per message, so deleting one message deletes only its own chunk.
SENT = [("1", "c1"), ("2", "c2"), ("3", "c3"), ("4", "c4")]
DELETED = "3"


def cli(env: dict[str, str], *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "memory_pool.main", *args]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if ok:
        assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    return result


def fill(served: Served) -> None:
    """Three chunks stored, one message deleted (a tombstone), one still buffered."""
    for message_id, channel in SENT:
        served.post("/save", body(message_id, channel))
    served.flush()
    served.post("/agents/mythos/delete", {"message_id": DELETED})
    served.post("/save", body("5", "c5"))  # buffered: no flush, the idle timer is long


def stored_ids(lines: list[str]) -> set[str]:
    found: set[str] = set()
    for line in lines[1:]:
        record = json.loads(line)
        if record.get("kind") == "point":
            found.update(record["payload"]["messageIdList"])
    return found


def _export_once_terms_are_recorded(env: dict[str, str], url: str, export: Path) -> None:
    """The BM25 backfill records a new collection's term encoding within its 5 s cadence; an
    export before that says `null`, and the server's export after the move (made from the
    folder as serve left it) would differ by that alone: export once it is recorded."""
    deadline = time.monotonic() + 30
    while True:
        cli(env, "export", "--agent", "mythos", "--url", url, "--out", str(export))
        header = json.loads(export.read_text().splitlines()[0])
        if (header.get("bm25") or {}).get("encoding") or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def test_export_copy_and_resend(
    tmp_path: Path, embeddings: EmbeddingServer, redis_url: str
) -> None:
    env = serve_env(embeddings)
    data = tmp_path / "data"
    export = tmp_path / "pool.jsonl"
    with serving(data, env, tmp_path / "serve.log") as served:
        fill(served)
        # serve holds the data folder: the command says so and how to go on
        refused = cli(env, "export", "--agent", "mythos", "--data-dir", str(data), ok=False)
        assert refused.returncode == 2 and "--url" in refused.stderr
        url = str(served.http.base_url)
        _export_once_terms_are_recorded(env, url, export)
        assert served.interrupt() == 0
    lines = export.read_text().splitlines()
    header = json.loads(lines[0])
    # the buffered message was written first, the deleted one is gone
    assert stored_ids(lines) == {"1", "2", "4", "5"}
    assert header["counts"]["points"] == 4 and header["counts"]["tombstones"] == 1
    assert header["counts"]["dedupe"] == 4

    with QdrantTestServer(tmp_path / "q") as qdrant:
        copied = cli(
            env, "copy", "--from-data-dir", str(data), "--to-url", qdrant.url,
            "--to-redis-url", redis_url,
        )  # fmt: skip
        assert f"{COLLECTION}: 4 points in the data folder, 4 on {qdrant.url}: counts match" in (
            copied.stdout
        ), copied.stdout
        client = redis.Redis.from_url(redis_url)
        assert client.hget(keys.NAMES, COLLECTION) == b"mythos"  # listed by /agents, /health
        assert client.ttl(keys.seen(COLLECTION, "discord", DELETED)) == -1
        assert 0 < client.ttl(keys.seen(COLLECTION, "discord", "1")) <= 30 * 86400
        client.close()

        # exported from the server now: the same bytes as from serve before the move
        again = tmp_path / "again.jsonl"
        server_env = env | {"QDRANT_URL": qdrant.url, "REDIS_URL": redis_url}
        cli(server_env, "export", "--agent", "mythos", "--out", str(again))
        assert again.read_bytes() == export.read_bytes()

        # the compose deployment on the server: the plugin re-sends its last messages
        settings = stack_settings(
            redis_url, embeddings.url, tmp_path / "stack", QDRANT_URL=qdrant.url,
            EMBEDDING_MODEL="text-embedding-3-small",
        )  # fmt: skip
        agents = Agents([AgentConfig(name="mythos")], accept_unlisted=False)
        with running_stack(settings, agents) as stack:
            for message_id, channel in [*SENT, ("5", "c5")]:
                assert stack.save(body(message_id, channel))["accepted"] == 0
            stack.flush("mythos")
            ids = {i for p in stack.payloads(COLLECTION) for i in p["messageIdList"]}
            assert ids == {"1", "2", "4", "5"}
            # and the moved pool answers a recall
            found = stack.client.post(
                "/retrieve",
                json={"bot": "mythos", "query_text": "the lighthouse keeper counted 4 whales"},
            )
            assert found.status_code == 200 and "whales" in found.text


def test_import_into_another_data_folder_and_resend(
    tmp_path: Path, embeddings: EmbeddingServer
) -> None:
    env = serve_env(embeddings)
    first, second = tmp_path / "first", tmp_path / "second"
    export = tmp_path / "pool.jsonl"
    with serving(first, env, tmp_path / "first.log") as served:
        fill(served)
        assert served.interrupt() == 0
    # serve is stopped with a message still buffered: refused unless --force
    refused = cli(env, "export", "--agent", "mythos", "--data-dir", str(first), ok=False)
    assert refused.returncode == 1
    assert "1 messages are still buffered in mem_mythos" in refused.stderr
    assert not export.exists()
    cli(env, "export", "--agent", "mythos", "--data-dir", str(first), "--out", str(export),
        "--force")  # fmt: skip
    assert stored_ids(export.read_text().splitlines()) == {"1", "2", "4"}
    imported = cli(env, "import", "points", str(export), "--agent", "mythos",
                   "--data-dir", str(second))  # fmt: skip
    assert "collection mem_mythos: 3 points" in imported.stdout
    assert "tombstones (deleted message ids): 1" in imported.stdout
    with serving(second, env, tmp_path / "second.log") as served:
        # the moved agent is listed (the memory viewer, /health) before it saves anything here
        listed = served.http.get("/agents").json()["agents"]
        assert [(a["name"], a["collection"]) for a in listed] == [("mythos", COLLECTION)]
        # importing again, now over the running serve's HTTP API, is harmless
        url = str(served.http.base_url)
        again = cli(env, "import", "points", str(export), "--agent", "mythos", "--url", url)
        assert "collection mem_mythos: 3 points" in again.stdout
        for message_id, channel in SENT:
            assert served.post("/save", body(message_id, channel))["accepted"] == 0
        served.flush()
        stats = served.http.get("/agents/mythos/stats").json()
        assert stats["points"] == 3, stats
        assert served.interrupt() == 0


@pytest.mark.parametrize("kind", ["no header", "not json", "empty"])
def test_import_of_a_bad_file_says_why(
    tmp_path: Path, embeddings: EmbeddingServer, kind: str
) -> None:
    env = serve_env(embeddings)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        {"no header": '{"kind":"tombstone"}\n', "not json": "{oops\n", "empty": ""}[kind]
    )
    result = cli(env, "import", "points", str(bad), "--agent", "mythos", "--data-dir",
                 str(tmp_path / "d"), ok=False)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr


def test_copy_without_an_agent_takes_every_collection_of_the_folder(
    tmp_path: Path, embeddings: EmbeddingServer, redis_url: str
) -> None:
    """A collection nothing names (no agent in the agents file, no name in Redis: an import
    into `--collection`, or a folder migrated from the previous version) is memory too: a copy
    of the whole folder took only the named ones and left it behind without a word."""
    data = tmp_path / "data"
    store = EdgeStore(data / "edge", optimize_in_background=False)
    try:
        store.ensure_collection("mem_lyra", size=embeddings.dims, model="text-embedding-3-small")
        text = "Alex: the lighthouse at dawn"
        store.upsert("mem_lyra", [
            PointToWrite(str(uuid.UUID(int=n + 1)), embed_text(f"{text} {n}", embeddings.dims),
                         {"text": f"{text} {n}", "messageIds": f"st-{n}", "isChunk": True}, None)
            for n in range(3)
        ])  # fmt: skip
    finally:
        store.close()
    env = serve_env(embeddings)
    with QdrantTestServer(tmp_path / "q") as qdrant:
        copied = cli(
            env, "copy", "--from-data-dir", str(data), "--to-url", qdrant.url,
            "--to-redis-url", redis_url,
        )  # fmt: skip
        assert f"mem_lyra: 3 points in the data folder, 3 on {qdrant.url}: counts match" in (
            copied.stdout
        ), copied.stdout


def test_an_export_over_4_mib_is_imported_over_http_in_parts(
    tmp_path: Path, embeddings: EmbeddingServer
) -> None:
    """The command sends a large export to a running serve in parts of at most 4 MiB (a body
    limit is 8 MiB), each with the header; every point arrives once and the counts add up."""
    env = serve_env(embeddings)
    first, second = tmp_path / "first", tmp_path / "second"
    points = 4_000
    store = EdgeStore(first / "edge", optimize_in_background=False)
    try:
        store.ensure_collection(COLLECTION, size=embeddings.dims, model="text-embedding-3-small")
        filler = "the lighthouse keeper counted whales all night long " * 40  # ~2 KB
        unit = [1.0] + [0.0] * (embeddings.dims - 1)
        store.upsert(COLLECTION, [
            PointToWrite(str(uuid.UUID(int=n + 1)), unit,
                         {"text": f"Alex: {n} {filler}", "messageIdList": [f"m{n}"]}, None)
            for n in range(points)
        ])  # fmt: skip
    finally:
        store.close()
    export = tmp_path / "pool.jsonl"
    cli(env, "export", "--agent", "mythos", "--data-dir", str(first), "--out", str(export))
    assert export.stat().st_size > 2 * PART_BYTES  # three parts at least
    with serving(second, env, tmp_path / "second.log") as served:
        url = str(served.http.base_url)
        imported = cli(env, "import", "points", str(export), "--agent", "mythos", "--url", url)
        assert f"collection {COLLECTION}: {points} points" in imported.stdout, imported.stdout
        assert served.http.get("/agents/mythos/stats").json()["points"] == points
        assert served.interrupt() == 0
