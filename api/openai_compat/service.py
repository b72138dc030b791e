"""Embedding for POST /v1/embeddings: its own slots (apart from /retrieve's), the embedder in
slices, and the answer in OpenAI's shape."""

from __future__ import annotations

import asyncio
import base64
import math
import sys
from array import array
from collections.abc import Iterator
from typing import Any

from starlette.concurrency import run_in_threadpool

from api.openai_compat.errors import OpenAIError
from api.openai_compat.request import Wanted, check_dimensions
from shared.embedding.embedder import Embedder, Vector, embed_after_others
from shared.errors import InputRejected
from shared.settings import Settings

# The local model embeds one call at a time, /retrieve's queries and the worker's chunks too,
# and theirs go first (shared/embedding/turns.py); they still wait for the slice in progress,
# so a slice is a few short texts or one long one (~1,000 characters). Measured on this 2-core
# machine under load, two clients sending 200 long texts at once without pause: /retrieve
# took 1.5-2.5 s (one 503 at 3 s) with slices of 4 texts, 0.15-0.3 s with one (every
# /retrieve was a 503 before recall went first).
LOCAL_SLICE = 16
LOCAL_SLICE_CHARS = 1_000


class EmbeddingSlots:
    """At most `concurrency` embeddings requests embed at once; more wait in the event loop
    (holding no thread) up to `wait` seconds, then answer 503."""

    def __init__(self, concurrency: int, wait: float) -> None:
        self._slots = asyncio.Semaphore(concurrency)
        self._concurrency = concurrency
        self._wait = wait

    async def take(self) -> None:
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout=self._wait)
        except TimeoutError:
            raise OpenAIError(
                503,
                f"{self._concurrency} embeddings requests are already running and none ended "
                f"within {self._wait:g} s; try again (MEMORY_POOL_EMBEDDINGS_CONCURRENCY)",
                code="busy",
            ) from None

    def give_back(self) -> None:
        self._slots.release()


def slice_size(settings: Settings) -> tuple[int, int | None]:
    """Texts and characters per embedder call: the provider's batch, or the local model's
    slice (None: no bound on characters)."""
    if settings.embedding_provider == "openai":
        return settings.embedding_batch_size, None
    return LOCAL_SLICE, LOCAL_SLICE_CHARS


def slices(texts: list[str], most: int, chars: int | None) -> Iterator[tuple[int, list[str]]]:
    """`texts` cut in order into runs of at most `most` texts and `chars` characters (at least
    one text each), with the index of each run's first text."""
    start = 0
    while start < len(texts):
        end, size = start + 1, len(texts[start])
        while end < len(texts) and end - start < most:
            size += len(texts[end])
            if chars is not None and size > chars:
                break
            end += 1
        yield start, texts[start:end]
        start = end


async def embed(
    wanted: Wanted, embedder: Embedder, slots: EmbeddingSlots, settings: Settings
) -> list[Vector]:
    """The vectors of `wanted.texts`, in order, from memory-pool's own embedder."""
    await slots.take()
    try:
        if wanted.dimensions is not None:
            size = await run_in_threadpool(embedder.dimensions)
            check_dimensions(wanted.dimensions, size, embedder.model)
        vectors: list[Vector] = []
        for start, texts in slices(wanted.texts, *slice_size(settings)):
            embedded = await run_in_threadpool(embed_after_others, embedder, texts)
            for index, result in enumerate(embedded):
                if isinstance(result, InputRejected):
                    raise _rejected(start + index, result)
                vectors.append(result)
        return vectors
    finally:
        slots.give_back()


def _rejected(index: int, exc: InputRejected) -> OpenAIError:
    return OpenAIError(
        400,
        f"input[{index}] was refused by the embedding provider: {exc}",
        param="input",
        code=InputRejected.code,
    )


def estimate_tokens(text: str) -> int:
    """Words or a quarter of the characters, whichever is more: about what a tokenizer counts
    (memory-pool runs none; `usage` is an estimate)."""
    return max(len(text.split()), math.ceil(len(text) / 4))


def encoded(vector: Vector, encoding: str) -> list[float] | str:
    """The vector as floats, or base64 of its little-endian float32 bytes (OpenAI's base64)."""
    if encoding == "float":
        return vector
    packed = array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def answer(wanted: Wanted, vectors: list[Vector], model: str) -> dict[str, Any]:
    """OpenAI's embeddings answer; `model` is the model that embedded."""
    tokens = sum(estimate_tokens(text) for text in wanted.texts)
    data = [
        {"object": "embedding", "index": index, "embedding": encoded(vector, wanted.encoding)}
        for index, vector in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}
