"""`memory-pool export`, `import points` and `copy`: where the pool is opened and how.

Against a running serve (`--url`) everything goes over its HTTP API, which writes buffered
messages first. Otherwise the command opens the data folder (or the configured servers)
itself: an embedded folder is opened by one process at a time, so serve must be stopped; its
buffered messages cannot be written without serve's worker, so the command refuses while
any are buffered unless `--force`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import IO

import httpx
import redis
from tqdm import tqdm

from client.http_client import agent_path
from memory_pool.embedded_redis import EmbeddedRedis, EmbeddedRedisError
from shared.agents import Agents
from shared.embedding.bm25 import DEFAULT_LANGUAGE
from shared.embedding.embedder import Embedder
from shared.errors import MemoryPoolError
from shared.format.json_lines import split_lines
from shared.format.naming import COLLECTION_BASE
from shared.pool.format import BadExport, End, Tombstone, read_header, read_record
from shared.pool.marks import RedisMarks, unwritten_messages
from shared.pool.transfer import Moved, check_end, export_lines, import_lines
from shared.runtime import redis_client
from shared.settings import Settings
from shared.state import keys
from shared.state.upgrade import upgrade
from shared.store.interface import Store
from shared.store.open import open_store

# One HTTP import request carries at most this much of the export (MEMORY_POOL_MAX_BODY_BYTES
# is 8 MiB by default).
PART_BYTES = 4 * 1024 * 1024


class CommandFailed(Exception):
    """What the user is told (exit code 1 or 2); the message says what to do."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class OpenPool:
    """A store and the Redis beside it, opened by this process."""

    settings: Settings
    store: Store
    redis: redis.Redis

    @property
    def marks(self) -> RedisMarks:
        return RedisMarks(self.redis)


@contextmanager
def open_pool(settings: Settings, agents: Agents) -> Iterator[OpenPool]:
    """The configured store and Redis; the embedded ones of the data folder when no servers
    are configured (refused while serve holds the folder)."""
    with ExitStack() as stack:
        if not settings.redis_url:
            try:
                embedded = stack.enter_context(EmbeddedRedis(settings.data_dir))
            except EmbeddedRedisError as exc:
                raise CommandFailed(
                    f"{exc}. Is `memory-pool serve` running? Then pass --url (its address), "
                    "or stop it first",
                    code=2,
                ) from exc
            settings = settings.model_copy(update={"redis_url": embedded.url})
        client = redis_client(settings)
        stack.callback(client.close)
        upgrade(client, agents)  # an older data folder's keys in today's layout
        try:
            store = open_store(settings)
        except RuntimeError as exc:  # qdrant-client: a local folder another process holds
            raise CommandFailed(f"cannot open the data folder's Qdrant: {exc}", code=2) from exc
        stack.callback(store.close)
        yield OpenPool(settings, store, client)


def refuse_if_buffered(pool: OpenPool, collection: str, *, force: bool) -> int:
    """Buffered messages can only be written by serve's (or a deployment's) worker: with them
    waiting, moving the pool now would leave them behind. Returns how many are left behind."""
    left = unwritten_messages(pool.redis, collection)
    if not left:
        return 0
    if not force:
        raise CommandFailed(
            f"{left} messages are still buffered in {collection}: start memory-pool and run this "
            "with --url (it writes them first), or pass --force to move the pool without them"
        )
    return left


def _bar(total: int, unit: str) -> tqdm:
    return tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True)


def export_offline(
    settings: Settings, agents: Agents, agent: str, out: IO[str], *, vectors: bool, force: bool
) -> Moved:
    config = agents.get(agent)
    with open_pool(settings, agents) as pool:
        left = refuse_if_buffered(pool, config.collection_name, force=force)
        state = pool.store.collection(config.collection_name)
        total = state.points_count if state else 0
        moved = Moved(config.collection_name)
        with _bar(total, "points") as bar:
            for line in export_lines(
                pool.store,
                pool.marks,
                collection=config.collection_name,
                agent=config.name,
                vectors=vectors,
                progress=bar.update,
                moved=moved,
            ):
                out.write(line)
        if left:
            moved_note(left)
        return moved


def moved_note(left: int) -> None:
    tqdm.write(f"warning: {left} buffered messages were left behind (--force)", file=sys.stderr)


def export_online(
    url: str, api_key: str | None, agent: str, out: IO[str], *, vectors: bool, force: bool
) -> Moved:
    params = {"vectors": str(vectors).lower(), "force": str(force).lower()}
    moved = Moved("")
    with (
        _client(url, api_key) as http,
        http.stream("GET", agent_path(agent, "export"), params=params) as response,
    ):
        _raise_for(response, url)
        lines = split_lines(response.iter_text())  # not iter_lines(): it splits at U+2028
        first = next(lines, "")
        header = read_header(first)
        moved.collection = header.collection
        out.write(first + "\n")
        end: End | None = None
        with _bar(header.points, "points") as bar:
            for line_no, line in enumerate(lines, start=2):
                out.write(line + "\n")
                # keys are sorted: a point line starts with its id (and is the only big one)
                if line.startswith('{"id":'):
                    moved.points += 1
                    bar.update(1)
                elif line.strip():
                    record = read_record(line, line_no)
                    if isinstance(record, End):
                        end = record
                    elif isinstance(record, Tombstone):
                        moved.tombstones += 1
                    else:
                        moved.dedupe += 1
    try:
        check_end(end, moved.points, moved.tombstones + moved.dedupe)
    except BadExport as exc:
        raise CommandFailed(
            f"the export stopped early (memory-pool's log says why): {exc}"
        ) from exc
    return moved


def import_offline(
    settings: Settings,
    agents: Agents,
    lines: Iterator[str],
    *,
    agent: str,
    collection: str | None,
    embedder: Embedder,
) -> Moved:
    """Into the agent's own collection, or into `collection`; BM25 terms in the language of
    the collection's agent (as the backfill would make them)."""
    target = collection or agents.get(agent).collection_name
    with open_pool(settings, agents) as pool:
        return _import(pool, lines, collection=target, embedder=embedder,
                       agent=_own_name(agents, agent, target),
                       language=agents.language_of(target))  # fmt: skip


def _own_name(agents: Agents, name: str, collection: str) -> str | None:
    """`name` when `collection` is that agent's own (so it is listed under it), else None."""
    try:
        return name if agents.get(name).collection_name == collection else None
    except MemoryPoolError:  # a name no agent could have, or not accepted here
        return None


def _import(
    pool: OpenPool,
    lines: Iterator[str],
    *,
    collection: str,
    embedder: Embedder,
    agent: str | None = None,
    language: str = DEFAULT_LANGUAGE,
) -> Moved:
    first = next(lines, "")
    header = read_header(first)
    with _bar(header.points, "points") as bar:

        def chained() -> Iterator[str]:
            yield first
            yield from lines

        return import_lines(
            chained(),
            store=pool.store,
            marks=pool.marks,
            embedder=embedder,
            collection=collection,
            progress=bar.update,
            agent=agent,
            language=language,
        )


def import_online(
    url: str, api_key: str | None, agent: str, lines: Iterator[str], *, collection: str | None
) -> Moved:
    """Sends the header with each part of at most PART_BYTES; checks the counts here."""
    first = next(lines, "")
    header = read_header(first)
    params = {"part": "true", **({"collection": collection} if collection else {})}
    total = Moved(collection or "")
    with _client(url, api_key) as http, _bar(header.points, "points") as bar:

        def send(part: list[str]) -> None:
            body = "".join([first if first.endswith("\n") else first + "\n", *part])
            response = http.post(
                agent_path(agent, "import"),
                params=params,
                content=body.encode(),
                headers={"Content-Type": "application/x-ndjson"},
            )
            _raise_for(response, url)
            got = response.json()
            total.collection = got["collection"]
            for name in ("points", "reembedded", "refused", "tombstones", "dedupe"):
                setattr(total, name, getattr(total, name) + int(got[name]))
            bar.update(int(got["points"]) + int(got["refused"]))

        part: list[str] = []
        size = 0
        end: End | None = None
        for line_no, line in enumerate(lines, start=2):
            if not line.strip():
                continue
            if line.startswith('{"dedupe"'):  # sorted keys: only the end line starts so
                record = read_record(line, line_no)
                if isinstance(record, End):
                    end = record
                    continue
            line = line if line.endswith("\n") else line + "\n"
            if part and size + len(line.encode()) > PART_BYTES:
                send(part)
                part, size = [], 0
            part.append(line)
            size += len(line.encode())
        send(part)
    check_end(end, total.points + total.refused, total.tombstones + total.dedupe)
    return total


def copy_pool(
    source: Settings,
    target: Settings,
    agents: Agents,
    collections: list[tuple[str, str]] | None,
    *,
    embedder: Embedder,
    force: bool,
    echo: Callable[[str], None],
) -> list[tuple[Moved, int, int]]:
    """Every chosen (collection, agent name) of the embedded folder into the target servers;
    (what moved, points in the source, points in the target) for each."""
    results = []
    with open_pool(source, agents) as src, open_pool(target, agents) as dst:
        chosen = collections if collections is not None else known_collections(src, agents)
        for collection, name in chosen:
            if src.store.collection(collection) is None:
                raise CommandFailed(f"the data folder has no collection {collection!r}")
            left = refuse_if_buffered(src, collection, force=force)
            if left:
                moved_note(left)
            source_count = src.store.count(collection)
            moved = _import(
                dst,
                export_lines(src.store, src.marks, collection=collection, agent=name),
                collection=collection,
                embedder=embedder,
                agent=_own_name(agents, name, collection),
                language=agents.language_of(collection),
            )
            results.append((moved, source_count, dst.store.count(collection)))
            echo("\n".join(moved.lines()))
    return results


def known_collections(pool: OpenPool, agents: Agents) -> list[tuple[str, str]]:
    """Every collection of the store, each with its agent's name: as memory-pool recorded it
    in Redis, else as the agents file lists it, else the collection's own name without `mem_`
    (a collection nothing names: an import into `--collection`, a migrated folder); sorted."""
    raw: dict[bytes, bytes] = pool.redis.hgetall(keys.NAMES)  # type: ignore[assignment]
    names = {k.decode(): v.decode() for k, v in raw.items()}
    for agent in agents.listed:
        names.setdefault(agent.collection_name, agent.name)
    return sorted(
        (c, names.get(c) or c.removeprefix(f"{COLLECTION_BASE}_"))
        for c in pool.store.collection_names()
    )


def _client(url: str, api_key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    # a flush before an export may take a minute; reading a page of points does not
    return httpx.Client(
        base_url=url.rstrip("/"), headers=headers, timeout=httpx.Timeout(30, read=180)
    )


def _raise_for(response: httpx.Response, url: str) -> None:
    if response.is_success:
        return
    response.read()
    try:
        body = response.json()
        detail = f"{body.get('error')}: {body.get('detail')}"
    except (ValueError, AttributeError):
        detail = response.text[:500]
    raise CommandFailed(f"{url} answered {response.status_code} {detail}")
