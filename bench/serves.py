"""Serves to compare: this checkout's `memory-pool serve` and, with `--before COMMIT`, that
commit's, each on its own copy of one filled Qdrant Edge folder, with one agents file; for the
benches that time one agent's /retrieve while another agent works (`bench.qdrant_upsert_gil`,
`bench.agent_threads`)."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.retrieve_serve import Serve, asks, baseline_code, fill_edge
from bench.stack import Stack


def each_serve(
    args: argparse.Namespace, agents_yaml: str, prefix: str
) -> Iterator[tuple[str, Serve, list[Any]]]:
    """(name, serve, queries) for this version, then `args.before`'s; the recalling agent holds
    `args.size` chunks of `args.dims`, `args.samples` queries are asked of it, and each serve
    is stopped once the caller moves on."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, Stack() as stack:
        embed_url = stack.start_embedding(args.dims)
        agents = Path(tmp) / "agents.yaml"
        agents.write_text(agents_yaml)
        filled = Path(tmp) / "filled"
        filled.mkdir()
        fill_edge(filled, args.size, args.dims)
        queries = asks(filled, embed_url, args.size, args.samples, "random")[5:]
        codes: dict[str, Path | None] = {"this version": None}
        if args.before:
            codes[args.before] = baseline_code(args.before, Path(tmp) / "before")
        for n, (name, code) in enumerate(codes.items()):
            data = Path(tmp) / f"data-{n}"
            shutil.copytree(filled, data)
            serve = Serve(data, embed_url, code=code, MEMORY_POOL_CONFIG=str(agents))
            try:
                yield name, serve, queries
            finally:
                serve.stop()
