"""The lake-house data of the hybrid recall tests: agents, a name the dense leg ranks low, and
st-qdrant-memory's own collection written with its own REST requests."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from shared.agents import AgentConfig, Agents
from shared.store.edge.engine import EdgeStore
from shared.store.interface import StoredPoint
from tests.support.embedding_server import embed_text
from tests.support.st_memory import BASE_TS, message, st_chunk
from tests.support.stack import Stack

NAME = "Zephyrine"

# Words the filler chunks share with the question, so the dense leg ranks them first.
TRIP = "the trip to the lake house last summer with the canoe and the campfire"

QUESTION = f"what did {NAME} say about the trip to the lake house"


def lake_agents() -> Agents:
    return Agents(
        [
            AgentConfig(name="lake", self_speaker="Mythos"),
            AgentConfig(name="lakedense", self_speaker="Mythos", recall="dense"),
            AgentConfig(name="seraphina", self_speaker="Seraphina"),
            # fusion weights (tests/e2e/test_fusion_weights.py): the agents file's setting
            AgentConfig(name="lakeflat", self_speaker="Mythos", lexical_weight=0.0),
            AgentConfig(name="lakerrf", self_speaker="Mythos", fusion="rrf", lexical_weight=10.0),
        ],
        accept_unlisted=False,
    )


def retrieve(stack: Stack, **body: Any) -> dict[str, Any]:
    response = stack.client.post("/retrieve", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def save_lake_chunks(stack: Stack, bot: str) -> None:
    """40 chunks about the lake trip, and one that names Zephyrine and little else."""
    messages = []
    for n in range(40):
        ts = BASE_TS + n * 60_000
        messages.append(
            message(f"{bot}{n}-1", f"remember {TRIP}, evening {n}", ts, conversation=f"c{n}")
        )
        messages.append(
            message(
                f"{bot}{n}-2", f"yes {TRIP} again {n}", ts + 1, self_=True, conversation=f"c{n}"
            )
        )
    ts = BASE_TS + 99 * 60_000
    messages.append(message(f"{bot}z-1", f"{NAME} brought her violin", ts, conversation="cz"))
    messages.append(
        message(f"{bot}z-2", f"{NAME} played it beautifully", ts + 1, self_=True, conversation="cz")
    )
    assert stack.save({"bot": bot, "messages": messages})["accepted"] == 82
    stack.flush(bot)


def st_collection(stack: Stack, name: str) -> tuple[int, list[str]]:
    """st-qdrant-memory's collection and points, written with its own REST requests."""
    dims = stack.runtime.embedder.dimensions()
    texts = [f"[2024-05-{n + 1:02d}]\nAlex: {TRIP} {n}\nSeraphina: lovely {n}" for n in range(40)]
    texts.append("[2024-05-30]\nAlex: Bartholomew fixed the clock\nSeraphina: Bartholomew did")
    ids = [str(uuid.uuid4()) for _ in texts]
    points = [
        {"id": pid, "vector": embed_text(text, dims),
         "payload": {"text": text, **st_chunk([f"st{n}-a", f"st{n}-b"], BASE_TS + n)}}
        for n, (pid, text) in enumerate(zip(ids, texts, strict=True))
    ]  # fmt: skip
    st_requests(stack, name, dims, points)
    return dims, ids


def st_requests(stack: Stack, name: str, dims: int, points: list[dict[str, Any]]) -> None:
    if stack.settings.qdrant_url:
        with httpx.Client(base_url=stack.settings.qdrant_url) as http:
            if http.get(f"/collections/{name}").status_code == 404:
                body = {"vectors": {"size": dims, "distance": "Cosine"}}
                http.put(f"/collections/{name}", json=body).raise_for_status()
            put = http.put(f"/collections/{name}/points", params={"wait": "true"},
                           json={"points": points})  # fmt: skip
            put.raise_for_status()
        return
    # Qdrant Edge: nobody else writes to serve's shards; points without terms arrive from the
    # previous version's folder (migrated as they were), written here the same way
    store = stack.runtime.store
    assert isinstance(store, EdgeStore)
    if store.collection(name) is None:
        store.create(name, size=dims, model=None)
    store.write_points(
        name, [StoredPoint(p["id"], p["payload"], p["vector"], None) for p in points]
    )
