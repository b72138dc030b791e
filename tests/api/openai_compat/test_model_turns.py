"""POST /v1/embeddings and recall share the local model, which embeds one call at a time: a
recall's query (or a flush) waiting for it goes before the embeddings requests' next slices, so
a client sending batches without pause (two at once, MEMORY_POOL_EMBEDDINGS_CONCURRENCY) never
keeps recall from the model. Measured before: with two such clients, every /retrieve of the
pool answered 503 after its 3 s (the Discord plugin's recall starved)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from shared.embedding.embedder import LocalEmbedder
from shared.settings import LOCAL_DEFAULT_MODEL
from tests.support.door import MakeApp, client_for
from tests.support.minilm import model_folder

URL = "/v1/embeddings"
SETTLE = 0.3  # for a thread to reach its wait for the model


class HeldModel:
    """A local model whose embeds run one after another and record their order; an embed of a
    text starting "hold" waits until `released` is set."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.released = threading.Event()

    def embed(self, texts: Sequence[str], batch_size: int) -> list[Any]:
        self.order.append(texts[0])
        if texts[0].startswith("hold"):
            assert self.released.wait(timeout=10)
        return [np.ones(4, dtype=np.float32) for _ in texts]


def local_app(make_app: MakeApp) -> Any:
    folder = model_folder()
    assert folder is not None, "no MiniLM folder: run `python -m tests.support.minilm`"
    return make_app(
        EMBEDDING_PROVIDER="local",
        EMBEDDING_MODEL=LOCAL_DEFAULT_MODEL,
        EMBEDDING_MODEL_PATH=str(folder),
        MEMORY_POOL_EMBEDDINGS_CONCURRENCY=2,
    )


def started(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    time.sleep(SETTLE)
    return thread


def test_a_recall_query_goes_before_the_next_embeddings_request(make_app: MakeApp) -> None:
    with client_for(local_app(make_app)) as client:
        embedder = client.app.state.runtime.embedder  # type: ignore[attr-defined]
        assert isinstance(embedder, LocalEmbedder)
        model = HeldModel()
        embedder._engine = model  # type: ignore[assignment]
        answers: list[int] = []

        def request(text: str, client: TestClient = client) -> None:
            answers.append(client.post(URL, json={"model": "m", "input": text}).status_code)

        threads = [
            started(request, "hold: a batch client's slice"),  # embedding
            started(request, "next: the other client's slice"),  # waiting for the model
            started(embedder.embed, ["query: a recall's question"]),  # waiting after it
        ]
        model.released.set()
        for thread in threads:
            thread.join(timeout=10)
    assert answers == [200, 200]
    assert [text.split(":")[0] for text in model.order] == ["hold", "query", "next"]
