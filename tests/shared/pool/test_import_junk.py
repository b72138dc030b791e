"""An export from elsewhere with junk in its point lines, on both stores: numbers no store can
hold (a NaN, a sparse index beyond u32, a repeated one, a number of 400 digits, in a vector or a
payload) and nesting deeper than a store reads are refused with the line, never a crash
mid-import or a point one store keeps and the other refuses; lone surrogates in a payload
(valid JSON that no UTF-8 can carry) are stored as U+FFFD, as /save stores them, and the point
gets its BM25 terms."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest

from shared.pool.format import BadExport
from shared.pool.marks import RedisMarks
from shared.pool.transfer import import_lines
from shared.store.bm25_terms import lacking_terms
from shared.store.interface import Store
from tests.shared.pool.test_transfer import MODEL, embedder_for
from tests.support.embedding_server import EMBEDDING_DIMS, EmbeddingServer, embed_text

TARGET = "mem_junk"


def header() -> str:
    return json.dumps({
        "format": "memory-pool-export", "version": 1, "collection": TARGET, "agent": "junk",
        "model": MODEL, "dimensions": EMBEDDING_DIMS, "bm25": {"encoding": "v1:english"},
        "vectors": True, "counts": {"points": 2, "tombstones": 0, "dedupe": 0},
    })  # fmt: skip


def point(text: str = "the harbour and its whales", **fields: Any) -> str:
    """A point line; `fields` replace its JSON members as raw JSON text."""
    members = {
        "kind": '"point"', "id": json.dumps(str(uuid.uuid4())),
        "payload": json.dumps({"text": text}),
        "vector": json.dumps(embed_text(text, EMBEDDING_DIMS)),
        "sparse": '{"indices": [7, 9], "values": [0.5, 0.25]}',
    } | fields  # fmt: skip
    return "{" + ", ".join(f'"{k}": {v}' for k, v in members.items()) + "}"


def imported(store: Store, marks: RedisMarks, embeddings: EmbeddingServer, *lines: str) -> int:
    end = json.dumps({"kind": "end", "points": len(lines), "tombstones": 0, "dedupe": 0})
    text = "\n".join([header(), *lines, end]) + "\n"
    moved = import_lines(io.StringIO(text), store=store, marks=marks,
                         embedder=embedder_for(embeddings), collection=TARGET)  # fmt: skip
    return moved.points


VECTOR = embed_text("x", EMBEDDING_DIMS)
JUNK = {
    "sparse index beyond u32": {"sparse": '{"indices": [4294967296], "values": [1.0]}'},
    "repeated sparse index": {"sparse": '{"indices": [5, 5], "values": [1.0, 2.0]}'},
    "NaN sparse value": {"sparse": '{"indices": [5], "values": [NaN]}'},
    "infinite sparse value": {"sparse": '{"indices": [5], "values": [Infinity]}'},
    "400-digit sparse value": {"sparse": '{"indices": [5], "values": [' + "9" * 400 + "]}"},
    "NaN in the vector": {"vector": json.dumps(VECTOR[:-1])[:-1] + ", NaN]"},
    "400-digit number in the vector": {"vector": "[" + "9" * 400 + "]"},
    "nesting beyond the parser": {"payload": '{"text": "x", "deep": ' + "[" * 100_000 + "]"},
    # a Qdrant server reads JSON 128 levels deep at most (the REST test server fails at 300,
    # Edge takes 900): 64 at most, everywhere
    "a payload nested 100 deep": {"payload": '{"d": ' + "[" * 100 + "1" + "]" * 100 + "}"},
    "NaN in the payload": {"payload": '{"text": "x", "n": NaN}'},
    "400-digit number in the payload": {"payload": '{"text": "x", "n": ' + "9" * 400 + "}"},
}


@pytest.mark.parametrize("junk", list(JUNK))
def test_numbers_no_store_holds_are_refused_with_their_line(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer, junk: str
) -> None:
    with pytest.raises(BadExport, match=r"^line 3: "):
        imported(store, marks, embeddings, point(), point(**JUNK[junk]))


def test_lone_surrogates_in_a_payload_are_stored_as_replacement_characters(
    store: Store, marks: RedisMarks, embeddings: EmbeddingServer
) -> None:
    broken = point(payload='{"text": "a whale \\ud83d in the harbour", "\\udc00key": ["\\ud800"]}')
    # a pair is one character (an emoji), kept; nesting a store reads is kept too
    kept = point(payload='{"text": "a \\ud83d\\ude00", "d": ' + "[" * 60 + "1" + "]" * 60 + "}")
    assert imported(store, marks, embeddings, broken, kept) == 2
    payloads = [p.payload for p in store.iter_points(TARGET)]
    assert {"text": "a whale \ufffd in the harbour", "\ufffdkey": ["\ufffd"]} in payloads
    assert any(p["text"] == "a \U0001f600" for p in payloads)
    assert lacking_terms(store, TARGET) == 0
