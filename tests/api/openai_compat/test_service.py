"""The embeddings service's rules: slots, slices, base64, the token estimate, the answer."""

from __future__ import annotations

import asyncio
import base64
import struct

import pytest

from api.openai_compat.errors import OpenAIError
from api.openai_compat.request import Wanted
from api.openai_compat.service import (
    LOCAL_SLICE,
    LOCAL_SLICE_CHARS,
    EmbeddingSlots,
    answer,
    encoded,
    estimate_tokens,
    slice_size,
    slices,
)
from shared.settings import Settings


def test_slots_bound_the_requests_and_come_back() -> None:
    async def scenario() -> None:
        slots = EmbeddingSlots(2, wait=0.05)
        await slots.take()
        await slots.take()
        with pytest.raises(OpenAIError) as busy:
            await slots.take()
        assert busy.value.status == 503 and busy.value.code == "busy"
        slots.give_back()
        await asyncio.wait_for(slots.take(), timeout=1)  # the slot came back

    asyncio.run(scenario())


def test_a_waiting_request_gets_the_slot_given_back() -> None:
    async def scenario() -> None:
        slots = EmbeddingSlots(1, wait=2)
        await slots.take()
        waiting = asyncio.create_task(slots.take())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        slots.give_back()
        await asyncio.wait_for(waiting, timeout=1)

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("provider", "expected"),
    [("local", (LOCAL_SLICE, LOCAL_SLICE_CHARS)), ("openai", (100, None))],
)
def test_the_local_model_embeds_a_few_texts_at_a_time(
    provider: str, expected: tuple[int, int | None]
) -> None:
    settings = Settings(EMBEDDING_PROVIDER=provider, MEMORY_POOL_EMBEDDING_BATCH_SIZE=100)
    assert slice_size(settings) == expected


@pytest.mark.parametrize(
    ("sizes", "most", "chars", "cut"),
    [
        ([], 4, 10, []),
        ([3, 3, 3, 3, 3], 2, None, [[3, 3], [3, 3], [3]]),
        ([3, 3, 3, 3, 3], 16, 10, [[3, 3, 3], [3, 3]]),  # 9 characters, then 6
        ([30, 2, 2, 30], 16, 10, [[30], [2, 2], [30]]),  # a long text alone
        ([10, 1], 16, 10, [[10], [1]]),
    ],
)
def test_slices_bound_texts_and_characters(
    sizes: list[int], most: int, chars: int | None, cut: list[list[int]]
) -> None:
    texts = [str(n) * size for n, size in enumerate(sizes)]
    found = list(slices(texts, most, chars))
    assert [[len(text) for text in run] for _, run in found] == cut
    assert [start for start, _ in found] == [
        sum(len(run) for run in cut[:i]) for i in range(len(cut))
    ]
    assert [text for _, run in found for text in run] == texts


def test_base64_is_little_endian_float32() -> None:
    vector = [0.5, -1.0, 0.25]
    assert encoded(vector, "float") is vector
    assert struct.unpack("<3f", base64.b64decode(encoded(vector, "base64"))) == (0.5, -1.0, 0.25)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("a", 1), ("the lighthouse keeper", 6), ("a b c d e f g h", 8), ("雪" * 9, 3)],
)
def test_tokens_are_estimated_from_words_and_characters(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_the_answer_is_openais_with_the_model_that_embedded() -> None:
    wanted = Wanted(["a b", "c"], "float", None)
    assert answer(wanted, [[1.0], [0.0]], "mini") == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": [1.0]},
            {"object": "embedding", "index": 1, "embedding": [0.0]},
        ],
        "model": "mini",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
