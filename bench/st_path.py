"""st-qdrant-memory's write path, done for real: per chunk one embedding, one search, one upsert."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import openai
from qdrant_client import QdrantClient, models

DUPLICATE_COSINE = 0.92  # st-qdrant-memory skips a chunk this close to an existing point


def chunk_texts(qdrant_url: str, collections: Sequence[str]) -> tuple[list[str], int]:
    """The texts of every chunk memory-pool stored, and how many messages they hold."""
    client = QdrantClient(url=qdrant_url, prefer_grpc=False, timeout=60)
    texts, messages = [], 0
    for name in collections:
        offset = None
        while True:
            page, offset = client.scroll(name, limit=256, offset=offset, with_payload=True)
            for point in page:
                payload = point.payload or {}
                texts.append(str(payload["text"]))
                messages += int(payload["messageCount"])
            if offset is None:
                break
    client.close()
    return texts, messages


def per_chunk(embed_url: str, qdrant_url: str, texts: Sequence[str], dims: int) -> float:
    """Seconds to write `texts` the way st-qdrant-memory does, one chunk after another."""
    embedder = openai.OpenAI(base_url=embed_url, api_key="bench", max_retries=0)
    client = QdrantClient(url=qdrant_url, prefer_grpc=False, timeout=60)
    name = f"st_path_{uuid.uuid4().hex[:8]}"
    client.create_collection(name, models.VectorParams(size=dims, distance=models.Distance.COSINE))
    started = time.perf_counter()
    for text in texts:
        vector = embedder.embeddings.create(model="text-embedding-3-small", input=text)
        vec = vector.data[0].embedding
        found = client.query_points(name, query=vec, limit=1, score_threshold=DUPLICATE_COSINE)
        if not found.points:
            payload = {"text": text, "isChunk": True, "timestamp": int(time.time() * 1000)}
            point = models.PointStruct(id=str(uuid.uuid4()), vector=vec, payload=payload)
            client.upsert(name, [point], wait=True)
    elapsed = time.perf_counter() - started
    client.delete_collection(name)
    client.close()
    embedder.close()
    return elapsed
