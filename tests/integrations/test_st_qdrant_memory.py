"""st-qdrant-memory's own index.js (3.1.3, pinned: tests/support/st_extension.py) run in node
against a running `memory-pool serve` on each store (Qdrant Edge, and a Qdrant server through
QDRANT_URL), its Qdrant URL `http://127.0.0.1:<port>/qdrant` and its key in `api-key`: it
creates its collection, indexes chats, saves live chunks, dedupes and recalls exactly as it
does against a Qdrant server (the Qdrant test server, same scenario, same calls and statuses).
On the pool, /retrieve recalls what it wrote (BM25 terms too), it recalls a chunk the Discord
plugin saved, and its "Delete All Memories" keeps that chunk.

On the pool its embedding calls go to memory-pool's own POST /v1/embeddings ("local" provider),
as README says to set it; against Qdrant, to the embedding test server serve embeds with, so
both runs hold the same vectors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.embedding_server import EmbeddingServer
from tests.support.qdrant_server import QdrantTestServer
from tests.support.serve import Served, serve_env, serving
from tests.support.st_extension import index_js, node, run_scenario
from tests.support.st_memory import message
from tests.support.stores import KINDS

CHARACTER, PERSONA = "Seraphina", "Alex"
COLLECTION = "mem_seraphina"
KEY = "sillytavern-0123456789abcdef"
DAY = 86_400_000
T0 = 1_718_000_000_000
# One topic per chunk, each in words of its own: no chunk is a near-duplicate of another.
TOPICS = {
    "lighthouse": "Bartholomew rowed out to the old lighthouse at dusk, trimmed the brass "
    "lamp, counted gulls on the rocks and wrote tide tables into his leather logbook",
    "orchard": "Marigold pruned apple trees in the walled orchard, pressed cider from "
    "russets, stacked crates beside the barn and chased magpies off ripening plums",
    "violin": "Ottoline restrung her grandfather's violin, practised scales by candlelight, "
    "rosined the bow twice and played a slow waltz for the sleeping cat",
    "comet": "Through the telescope we watched a green comet cross Orion, sketched its "
    "tail in charcoal, and drank cocoa on the frozen observatory roof",
}
WHALES = "the Discord crowd heard harbour whales singing beneath the pier at midnight"


def talk(topic: str, count: int, start: int) -> list[dict[str, Any]]:
    """SillyTavern chat messages, ~330 characters each: four close a chunk of the indexer."""
    return [
        {"name": CHARACTER if n % 2 else PERSONA, "is_user": n % 2 == 0, "is_system": False,
         "send_date": start + n * 60_000,
         "mes": f"{TOPICS[topic]} ({topic} {n}). {TOPICS[topic]}."}
        for n in range(count)
    ]  # fmt: skip


HEADER = {"user_name": "unused", "character_name": "unused", "create_date": "2024-06-10"}
CHATS = {
    "Seraphina - 2024-06-10.jsonl": [
        HEADER, *talk("lighthouse", 4, T0), *talk("orchard", 4, T0 + DAY)
    ],
    "Seraphina - 2024-06-12.jsonl": [HEADER, *talk("violin", 4, T0 + 2 * DAY)],
}  # fmt: skip


def ask(question: str) -> list[dict[str, Any]]:
    return [{"name": PERSONA, "is_user": True, "is_system": False, "send_date": T0 + 30 * DAY,
             "mes": question}]  # fmt: skip


def scenario(qdrant_url: str, embeddings_url: str, steps: list[str], question: str) -> dict:
    """st-qdrant-memory's settings as README tells a user to set them (on the pool, both URLs
    are memory-pool's, one key in both fields), its chats and the steps to run."""
    settings = {
        "qdrantUrl": qdrant_url, "qdrantApiKey": KEY, "usePerCharacterCollections": True,
        "embeddingProvider": "local", "localEmbeddingUrl": embeddings_url,
        "localEmbeddingApiKey": KEY, "embeddingModel": "text-embedding-3-small",
    }  # fmt: skip
    return {"settings": settings, "character": CHARACTER, "persona": PERSONA, "chats": CHATS,
            "live": talk("comet", 2, T0 + 3 * DAY), "recallChat": ask(question),
            "steps": steps}  # fmt: skip


def without_scores(blocks: list[str]) -> list[str]:
    return [re.sub(r"\(score: \d+%\)", "(score)", block) for block in blocks]


@pytest.fixture(scope="module")
def extension() -> Path:
    if node() is None:
        pytest.fail("node is not on the PATH: run scripts/test-tools.sh (Debian package nodejs)")
    found = index_js()
    if found is None:
        pytest.fail("no st-qdrant-memory index.js: run make install-test")
    return found


@pytest.fixture(params=KINDS)
def pool(
    request: pytest.FixtureRequest, tmp_path: Path, embeddings: EmbeddingServer
) -> Iterator[Served]:
    """`memory-pool serve` on each store: Qdrant Edge (its default), and a Qdrant server
    (QDRANT_URL, the Qdrant REST test server)."""
    key = {"name": "sillytavern", "key": KEY, "agents": ["seraphina"]}
    agents = {"agents": [{"name": "seraphina", "self_speaker": CHARACTER}], "api_keys": [key]}
    config = tmp_path / "agents.yaml"
    config.write_text(yaml.safe_dump(agents))
    env = serve_env(embeddings) | {"MEMORY_POOL_CONFIG": str(config)}
    with ExitStack() as stack:
        if request.param == "server":
            server = stack.enter_context(QdrantTestServer(tmp_path / "pool-qdrant"))
            env["QDRANT_URL"] = server.url
        yield stack.enter_context(serving(tmp_path / "data", env, tmp_path / "serve.log"))


FIRST = ["connection", "index", "index", "live", "recall", "info"]
LIGHTHOUSE_QUESTION = "Do you remember Bartholomew at the old lighthouse with the brass lamp?"


def test_st_qdrant_memory_works_on_the_pool_as_on_qdrant(
    extension: Path, pool: Served, embeddings: EmbeddingServer, tmp_path: Path
) -> None:
    base = str(pool.http.base_url).rstrip("/")
    pool_url, pool_embeddings = base + "/qdrant", base + "/v1/embeddings"
    on_pool = run_scenario(
        extension, scenario(pool_url, pool_embeddings, FIRST, LIGHTHOUSE_QUESTION)
    )
    # The same against a Qdrant server, embedding with the provider memory-pool embeds with.
    with QdrantTestServer(tmp_path / "qdrant") as qdrant:
        on_qdrant = run_scenario(
            extension, scenario(qdrant.url, f"{embeddings.url}/embeddings", FIRST,
                                LIGHTHOUSE_QUESTION)
        )  # fmt: skip
    assert on_pool["collection"] == COLLECTION
    assert [p for p in on_pool["problems"] if p[0] == "error"] == [], pool.log_tail()
    results = on_pool["results"]
    assert results["connection"] == {"status": 200, "collections": 0}
    # three chunks indexed, then all three skipped: the scroll dedupe by message id
    assert results["index"] == ["success: Indexed 0 new chunks, skipped 3 existing"]
    assert on_pool["toasts"][0] == ["success", "Indexed 3 new chunks, skipped 0 existing"]
    assert results["live"] == [True, False]  # saved, then a near-duplicate (cosine >= 0.92)
    [block] = results["recall"]
    assert "Bartholomew" in block and "Marigold" not in block
    assert results["info"] == {"points": 4, "size": embeddings.dims}
    # exactly as against Qdrant: the same calls, answered with the same statuses
    assert on_pool["calls"] == on_qdrant["calls"]
    assert on_pool["toasts"] == on_qdrant["toasts"]
    assert without_scores(results["recall"]) == without_scores(on_qdrant["results"]["recall"])
    assert results == {**on_qdrant["results"], "recall": results["recall"]}
    _the_pool_recalls_st_and_st_recalls_the_pool(extension, pool, embeddings, base)


def _the_pool_recalls_st_and_st_recalls_the_pool(
    extension: Path, pool: Served, embeddings: EmbeddingServer, base: str
) -> None:
    # /retrieve recalls st-qdrant-memory's points, by BM25 alone too (no cosine reaches 0.99)
    lexical_only = {"score_threshold": 0.99, "lexical_threshold": 0.01}
    lexical = pool.post("/retrieve", {"bot": "seraphina", "query_text": "Ottoline", **lexical_only})
    assert [hit["payload"]["text"].count("Ottoline") > 0 for hit in lexical["hits"]] == [True]
    discord = [message(f"d{n}", f"{WHALES} ({n})", T0 + 40 * DAY + n, channel="c1")
               for n in range(2)]  # fmt: skip
    assert pool.post("/save", {"bot": "seraphina", "messages": discord})["accepted"] == 2
    assert pool.post("/agents/seraphina/flush?wait=true")["done"]
    steps = ["recall", "deleteAll", "info"]
    question = "Did you hear the harbour whales singing beneath the pier?"
    on_pool = scenario(base + "/qdrant", base + "/v1/embeddings", steps, question)
    later = run_scenario(extension, on_pool)["results"]
    [block] = later["recall"]
    assert "harbour whales singing" in block  # the Discord plugin's chunk, in st's block
    assert later["deleteAll"] is True
    assert later["info"] == {"points": 1, "size": embeddings.dims}  # only the Discord chunk
    [kept] = pool.post("/retrieve", {"bot": "seraphina", "query_text": question})["hits"]
    assert kept["payload"]["source"] == "discord"
