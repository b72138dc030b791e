"""`memory-pool import sillytavern` against a running `memory-pool serve`, end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, cast

import redis
from qdrant_client import QdrantClient, models

from client.http_client import MemoryPoolClient
from memory_pool.importer import Outgoing, PlannedChat, Summary, sort_known
from memory_pool.sillytavern import parse_chat
from shared.format.fingerprint import text_fingerprint
from shared.state import keys
from shared.store.edge.engine import EdgeStore
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer
from tests.support.serve import ROOT, Served, serve_env, serving

COLLECTION = "mem_mythos"
AGENTS = """\
accept_unlisted_agents: false
agents:
  - name: mythos
    self_speaker: Mythos
    speaker_aliases: {"111": "Alex"}
"""
UNUSED = {
    "user_name": "unused",
    "character_name": "unused",
    "create_date": "x",
    "chat_metadata": {},
}
NAMED = {**UNUSED, "user_name": "Robin", "character_name": "Mythos"}
FILE_A = "Mythos - 2024-07-12@01h31m37s123ms.jsonl"
FILE_B = "Mythos - 2023-5-20 @15h 30m 45s 123ms.jsonl"


def _message(is_user: bool, send_date: object, mes: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "Alex" if is_user else "Mythos", "is_user": is_user, "is_system": False,
        "send_date": send_date, "mes": mes, "swipes": [mes, "a swipe never stored"], "swipe_id": 0,
        **extra,
    }  # fmt: skip


CHAT_A = [  # SillyTavern's own date forms: file-and-line ids
    UNUSED,
    _message(True, "2024-7-12 @1h 31m 37s 123ms", "I found an old brass key under the stairs."),
    _message(False, "2024-07-12@01h32m05s9ms", "Then we try it on the keeper's chest tonight."),
    {**_message(False, "2024-07-12@01h33m00s0ms", "[Alex joined]"), "is_system": True},
    _message(True, "July 12, 2024 1:40am", "ok"),
    _message(False, "yesterday", "A line whose date cannot be read at all."),
    _message(True, "July 12, 2024 1:45am", "Let us go before the tide comes in."),
    _message(False, "2024-07-12T01:46:00.000", "The tide waits for no keeper; I take the lantern."),
]
CHAT_B = [  # epoch and ISO dates: st-qdrant-memory's ids
    NAMED,
    _message(True, 1684596645123, "Do you remember the purple tomatoes in the greenhouse?"),
    _message(False, 1684596700, "Of course, she grew them beside the lemon tree."),
    _message(True, "2023-05-20T15:33:00.000Z", "She gave us a basket every single summer."),
    _message(False, "2023-05-20T15:34:00.000Z", "And we ate them with salt on the porch."),
]
INDEXED_BY_STQM = ["Mythos_1684596645123_1", "Mythos_1684596700000_2"]
IMPORTED = {
    FILE_A: [f"st:{FILE_A}:{line}" for line in (2, 3, 7, 8)],
    FILE_B: ["Mythos_1684596780000_3", "Mythos_1684596840000_4"],
}


def _write_chats(folder: Path) -> None:
    folder.mkdir()
    for name, records in ((FILE_A, CHAT_A), (FILE_B, CHAT_B)):
        (folder / name).write_text("\n".join(json.dumps(r) for r in records) + "\n")


def _seed_st_qdrant_memory_point(data_dir: Path) -> None:
    """The chunk st-qdrant-memory wrote when it indexed FILE_B's first exchange, in a data
    folder of the previous version (qdrant-client's local mode), which serve migrates."""
    client = QdrantClient(path=str(data_dir / "qdrant"))
    vectors = models.VectorParams(size=EMBEDDING_DIMS, distance=models.Distance.COSINE)
    client.create_collection(COLLECTION, vectors_config=vectors)
    payload = {"text": "[2023-05-20]\nRobin: Do you remember…\nMythos: Of course…",
               "speakers": "Robin, Mythos", "messageCount": 2, "timestamp": 1684596645123,
               "messageIds": ",".join(INDEXED_BY_STQM), "isChunk": True}  # fmt: skip
    point = models.PointStruct(id=str(uuid.uuid4()), vector=[0.1] * EMBEDDING_DIMS, payload=payload)
    client.upsert(COLLECTION, [point])
    client.close()


class _KnownClient:
    """known_fingerprints as a server answers it (no server needed to sort)."""

    def __init__(self, known: dict[str, str | None]) -> None:
        self.known = known
        self.asked: list[tuple[list[str], str]] = []

    def known_fingerprints(self, bot: str, ids: list[str], *, source: str) -> dict[str, Any]:
        self.asked.append((ids, source))
        return {mid: self.known[mid] for mid in ids if mid in self.known}


def test_sort_known_sends_new_ones_edits_changed_ones_and_counts_the_rest_duplicates() -> None:
    texts = {"new": "never stored", "same": "stored as it is", "edited": "edited in the chat",
             "theirs": "st-qdrant-memory holds it", "cleaned": "a NUL\x00 dropped  "}  # fmt: skip
    plan = PlannedChat(
        parse_chat("c.jsonl", []),
        [Outgoing(mid, text, 1718000000000, True, "Alex") for mid, text in texts.items()],
    )
    client = _KnownClient({
        "same": text_fingerprint("stored as it is"), "edited": text_fingerprint("the old text"),
        "theirs": None,  # no chunkMessages: nothing to compare
        "cleaned": text_fingerprint("a NUL dropped"),  # as /save cleaned and trimmed it
    })  # fmt: skip
    summary = Summary()
    sort_known(cast(MemoryPoolClient, client), "mythos", [plan], summary)
    assert client.asked == [(sorted(texts), "sillytavern")]
    assert [item.id for item in plan.outgoing] == ["new"]
    assert [item.id for item in plan.edits] == ["edited"]
    assert (summary.duplicates, summary.edited) == (3, 0)  # edits are counted when answered


def _import(served: Served, env: dict[str, str], config: Path, *args: str) -> tuple[str, str]:
    command = [sys.executable, "-m", "memory_pool.main", "import", "sillytavern", *args, "--agent",
               "mythos", "--url", str(served.http.base_url), "--config", str(config)]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{served.log_tail()}"
    return result.stdout, result.stderr


def _stats(served: Served) -> dict[str, Any]:
    stats = served.http.get("/agents/mythos/stats").json()
    # the BM25 backfill gives st-qdrant-memory's point its terms whenever it runs
    stats.pop("points_without_bm25", None)
    return stats


def _stored_points(data_dir: Path) -> list[dict[str, Any]]:
    """What serve stored: in its Qdrant Edge shard (the seeded local-mode point was migrated
    there on its first start)."""
    store = EdgeStore(data_dir / "edge", optimize_in_background=False)
    try:
        return [payload for _, payload in store.scroll_payloads(COLLECTION)]
    finally:
        store.close()


def _chats_and_config(
    data_dir: Path, chats: Path, config: Path, embeddings: EmbeddingServer
) -> dict[str, str]:
    """The two chat files, the agents file and st-qdrant-memory's point; serve's environment."""
    config.write_text(AGENTS)
    _write_chats(chats)
    _seed_st_qdrant_memory_point(data_dir)
    return serve_env(embeddings) | {"MEMORY_POOL_CONFIG": str(config)}


def test_import_stores_each_message_once_and_recognises_st_qdrant_memory(
    tmp_path: Path, embeddings: EmbeddingServer
) -> None:
    data_dir, chats, config = tmp_path / "data", tmp_path / "chats", tmp_path / "agents.yaml"
    env = _chats_and_config(data_dir, chats, config, embeddings)
    with serving(data_dir, env, tmp_path / "serve.log") as served:
        before = _stats(served)
        out, err = _import(served, env, config, str(chats), "--dry-run")
        assert _stats(served) == before
        assert "dry run: 2 chunks would be stored (nothing was sent)" in out
        assert "[2024-07-12]\nAlex: I found an old brass key under the stairs." in out
        assert f"{FILE_A}:6: unparseable send_date 'yesterday'" in err

        out, err = _import(served, env, config, str(chats))
        assert f"skipped {FILE_A}:6: unparseable send_date 'yesterday'" in err
        assert "files: 2, messages: 11" in out
        assert "skipped: 3 (1 system, 1 too short, 1 unparseable date)" in out, out
        # the 2 st-qdrant-memory indexed: its chunk keeps no text to compare, so not an edit
        assert "accepted: 6, duplicates: 2, edited: 0" in out
        assert "chunks written: 2" in out

        again, _ = _import(served, env, config, str(chats))
        assert "skipped: 3 (1 system, 1 too short, 1 unparseable date)" in again
        assert "accepted: 0, duplicates: 8, edited: 0" in again
        assert "chunks written: 0" in again
        assert _stats(served)["points_by_source"] == {"sillytavern": 2}
        assert served.interrupt() == 0, served.log_tail()

    _check_stored(_stored_points(data_dir))


def _check_stored(payloads: list[dict[str, Any]]) -> None:
    ours = [p for p in payloads if p.get("source") == "sillytavern"]
    assert len(payloads) == len(ours) + 1  # plus st-qdrant-memory's own point
    by_file = {p["conversationId"]: p for p in ours}
    assert set(by_file) == {FILE_A, FILE_B}
    for name, ids in IMPORTED.items():
        assert by_file[name]["messageIdList"] == ids
    every_id = Counter(i for p in ours for i in p["messageIdList"])
    assert set(every_id.values()) == {1}
    assert by_file[FILE_A]["text"] == (
        "[2024-07-12]\n"
        "Alex: I found an old brass key under the stairs.\n"
        "Mythos: Then we try it on the keeper's chest tonight.\n"
        "Alex: Let us go before the tide comes in.\n"
        "Mythos: The tide waits for no keeper; I take the lantern."
    )
    assert by_file[FILE_B]["text"] == (
        "[2023-05-20]\n"
        "Robin: She gave us a basket every single summer.\n"
        "Mythos: And we ate them with salt on the porch."
    )
    assert by_file[FILE_B]["speakers"] == "Robin, Mythos"


EDITED = "I found an old iron key under the loose stair, not the brass one."
SWIPED = "And we ate them warm, straight from the vine, with a pinch of salt."
SWIPED_ID = IMPORTED[FILE_B][1]


def _edit_and_swipe(chats: Path) -> None:
    """In SillyTavern: FILE_A's first message edited; FILE_B's last reply swiped to its second
    version (same line, same id, new `mes`); FILE_B's first message, which only
    st-qdrant-memory's chunk holds, edited too."""
    chat_a = [dict(r) for r in CHAT_A]
    chat_a[1]["mes"] = EDITED
    chat_b = [dict(r) for r in CHAT_B]
    chat_b[4] |= {"mes": SWIPED, "swipes": [chat_b[4]["mes"], SWIPED], "swipe_id": 1}
    chat_b[1]["mes"] = "Do you remember the purple tomatoes, and the lemon tree beside them?"
    for name, records in ((FILE_A, chat_a), (FILE_B, chat_b)):
        (chats / name).write_text("\n".join(json.dumps(r) for r in records) + "\n")


def _texts(served: Served) -> dict[str, str]:
    """conversationId -> chunk text of memory-pool's points, through the API."""
    response = served.http.get("/agents/mythos/memories", params={"source": "sillytavern"})
    assert response.status_code == 200, response.text
    return {m["conversation_id"]: m["text"] for m in response.json()["memories"]}


def _wait_for_texts(served: Served, *wanted: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(any(w in text for text in _texts(served).values()) for w in wanted):
        assert time.monotonic() < deadline, f"{_texts(served)}\n{served.log_tail()}"
        time.sleep(0.1)


def _expire_mark(data_dir: Path, message_id: str) -> None:
    r = redis.Redis(unix_socket_path=str(data_dir / "redis" / "redis.sock"))
    try:
        assert r.delete(keys.seen(COLLECTION, "sillytavern", message_id)) == 1
    finally:
        r.close()


def test_importing_again_after_an_edit_and_a_swipe_edits_those_messages_in_place(
    tmp_path: Path, embeddings: EmbeddingServer
) -> None:
    data_dir, chats, config = tmp_path / "data", tmp_path / "chats", tmp_path / "agents.yaml"
    env = _chats_and_config(data_dir, chats, config, embeddings)
    with serving(data_dir, env, tmp_path / "serve.log") as served:
        first, _ = _import(served, env, config, str(chats))
        assert "accepted: 6, duplicates: 2, edited: 0" in first
        _edit_and_swipe(chats)
        _expire_mark(data_dir, SWIPED_ID)  # the dedupe window passed: only the store knows it

        again, _ = _import(served, env, config, str(chats))
        assert "skipped: 3 (1 system, 1 too short, 1 unparseable date)" in again
        assert "accepted: 0, duplicates: 6, edited: 2\n" in again, again
        assert "chunks written: 0" in again
        _wait_for_texts(served, EDITED, SWIPED)
        assert _stats(served)["points_by_source"] == {"sillytavern": 2}

        unchanged, _ = _import(served, env, config, str(chats))
        assert "accepted: 0, duplicates: 8, edited: 0" in unchanged
        assert served.interrupt() == 0, served.log_tail()

    payloads = _stored_points(data_dir)
    ours = {p["conversationId"]: p for p in payloads if p.get("source") == "sillytavern"}
    assert len(payloads) == len(ours) + 1
    every_id = Counter(i for p in payloads for i in str(p["messageIds"]).split(","))
    assert set(every_id.values()) == {1}, every_id  # no message in two points
    for name, ids in IMPORTED.items():
        assert ours[name]["messageIdList"] == ids
    assert ours[FILE_A]["text"].split("\n")[1] == f"Alex: {EDITED}"
    assert "brass key" not in ours[FILE_A]["text"]
    assert ours[FILE_B]["text"].split("\n")[2] == f"Mythos: {SWIPED}"
    assert "on the porch" not in ours[FILE_B]["text"]
    [theirs] = [p for p in payloads if "source" not in p]
    assert theirs["text"].startswith("[2023-05-20]\nRobin: Do you remember…")  # kept as written
