"""The `memory-pool` commands that move memories in and out: `import sillytavern`, `export`,
`import points` and `copy`, each a thin call into memory_pool.importer and pool_commands."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from memory_pool.cli_common import ConfigOption, load_settings
from shared.agents import load_agents
from shared.settings import Settings

if TYPE_CHECKING:
    from shared.pool.transfer import Moved

import_app = typer.Typer(
    help="Import into an agent's memory: SillyTavern chats, or a memory-pool export.",
    no_args_is_help=True,
)


@import_app.command("sillytavern")
def import_sillytavern(
    paths: Annotated[
        list[Path], typer.Argument(help="Chat .jsonl files, or folders of them (a character's).")
    ],
    agent: Annotated[str, typer.Option("--agent", help="The agent (bot) to import into.")],
    persona: Annotated[
        str | None, typer.Option(help="The user's name in chunks; default: see the README.")
    ] = None,
    url: Annotated[str, typer.Option(help="The running memory-pool.")] = "http://127.0.0.1:3102",
    api_key: Annotated[
        str | None, typer.Option("--api-key", help="A key the agent accepts (`api_keys`).")
    ] = None,
    config: ConfigOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the chunks it would store; send nothing.")
    ] = False,
) -> None:
    """Import SillyTavern chats: one conversation per file, each message stored exactly once."""
    import httpx

    from client.http_client import MemoryPoolClient, MemoryPoolError
    from memory_pool.importer import ImportFailed, preview, read_chats, run_import
    from shared.errors import InvalidAgentName, UnknownAgent

    settings = load_settings(config)
    try:
        agent_config = load_agents(settings.config_path).get(agent)
        plans, summary = read_chats(paths, agent_config, persona)
    except (ImportFailed, UnknownAgent, InvalidAgentName) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    for problem in summary.problems:
        typer.echo(f"skipped {problem}", err=True)
    if dry_run:
        shown = preview(plans, agent_config, summary)
        typer.echo("\n".join([*summary.lines()[:2], *shown]))
        return
    try:
        with MemoryPoolClient(url, api_key=api_key, timeout=60) as client:
            run_import(client, agent_config.name, plans, summary)
    except (MemoryPoolError, httpx.HTTPError) as exc:
        typer.echo("\n".join(summary.lines()), err=True)
        typer.echo(f"error: {url}: {exc} (importing again is safe)", err=True)
        raise typer.Exit(code=1) from exc
    typer.echo("\n".join(summary.lines()))


UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="A running memory-pool (it writes buffered messages first); without it the "
        "data folder or the configured servers are opened here (stop serve first).",
    ),
]
ApiKeyOption = Annotated[
    str | None, typer.Option("--api-key", help="With --url: a key the agent accepts.")
]
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Without --url: the data folder; MEMORY_POOL_DATA_DIR."),
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Move the pool even if messages are still buffered.")
]


def _pool_failure(exc: Exception) -> typer.Exit:
    from memory_pool.pool_commands import CommandFailed

    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code=exc.code if isinstance(exc, CommandFailed) else 1)


def _pool_errors() -> tuple[type[Exception], ...]:
    import httpx
    import redis

    from memory_pool.pool_commands import CommandFailed
    from shared.errors import MemoryPoolError
    from shared.pool.format import BadExport
    from shared.pool.transfer import TransferRefused

    return (
        CommandFailed, BadExport, TransferRefused, MemoryPoolError, httpx.HTTPError, OSError,
        UnicodeDecodeError, redis.RedisError,
    )  # fmt: skip


def export_pool(
    agent: Annotated[str, typer.Option("--agent", help="The agent whose pool to export.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="The file to write; default: standard output.")
    ] = None,
    no_vectors: Annotated[
        bool, typer.Option("--no-vectors", help="Leave the vectors out (import re-embeds).")
    ] = False,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = None,
    force: ForceOption = False,
    config: ConfigOption = None,
) -> None:
    """Export an agent's pool as JSON Lines: its points, tombstones and dedupe marks."""
    from memory_pool.pool_commands import export_offline, export_online

    settings = load_settings(config, data_dir=data_dir)
    target = out.with_name(out.name + ".partial") if out else None
    try:
        with target.open("w", encoding="utf-8") if target else _stdout() as stream:
            if url:
                moved = export_online(
                    url, api_key, agent, stream, vectors=not no_vectors, force=force
                )
            else:
                agents = load_agents(settings.config_path)
                moved = export_offline(
                    settings, agents, agent, stream, vectors=not no_vectors, force=force
                )
    except _pool_errors() as exc:
        if target:
            target.unlink(missing_ok=True)
        raise _pool_failure(exc) from exc
    if out and target:
        target.replace(out)  # a file named `out` is always a whole export
    typer.echo("\n".join(moved.lines()), err=True)


def _stdout() -> AbstractContextManager[TextIO]:
    return nullcontext(sys.stdout)


@import_app.command("points")
def import_points(
    file: Annotated[Path, typer.Argument(help="An export (`memory-pool export`).")],
    agent: Annotated[str, typer.Option("--agent", help="The agent to import into.")],
    collection: Annotated[
        str | None,
        typer.Option("--collection", help="Load into this collection instead of the agent's own."),
    ] = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
) -> None:
    """Load an export into the configured store; another embedding model re-embeds the text."""
    from memory_pool.pool_commands import import_offline, import_online
    from shared.embedding.embedder import make_embedder

    settings = load_settings(config, data_dir=data_dir)
    try:
        with file.open(encoding="utf-8") as stream:
            if url:
                moved = import_online(url, api_key, agent, iter(stream), collection=collection)
            else:
                agents = load_agents(settings.config_path)
                agents.get(agent)  # an unknown agent is refused before the model loads
                embedder = make_embedder(settings)
                try:
                    moved = import_offline(
                        settings, agents, iter(stream), agent=agent, collection=collection,
                        embedder=embedder,
                    )  # fmt: skip
                finally:
                    embedder.close()
    except _pool_errors() as exc:
        raise _pool_failure(exc) from exc
    typer.echo("\n".join(moved.lines()))


def copy_pool(
    from_data_dir: Annotated[
        Path, typer.Option("--from-data-dir", help="serve's data folder (serve stopped).")
    ],
    to_url: Annotated[str, typer.Option("--to-url", help="The Qdrant server to copy into.")],
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only this agent; default: every agent.")
    ] = None,
    to_redis_url: Annotated[
        str | None,
        typer.Option(
            "--to-redis-url", help="The target's Redis (tombstones, dedupe); default REDIS_URL."
        ),
    ] = None,
    to_qdrant_api_key: Annotated[
        str | None, typer.Option("--to-qdrant-api-key", help="Default QDRANT_API_KEY.")
    ] = None,
    force: ForceOption = False,
    config: ConfigOption = None,
) -> None:
    """Copy an embedded data folder (memory-pool serve) to a Qdrant server and its Redis."""
    from memory_pool.pool_commands import copy_pool as run_copy
    from shared.embedding.embedder import make_embedder

    settings = load_settings(config)
    source, target = _copy_ends(settings, from_data_dir, to_url, to_redis_url, to_qdrant_api_key)
    agents = load_agents(settings.config_path)
    embedder = make_embedder(settings)
    try:
        chosen = None
        if agent is not None:
            found = agents.get(agent)
            chosen = [(found.collection_name, found.name)]
        results = run_copy(
            source, target, agents, chosen, embedder=embedder, force=force, echo=typer.echo
        )
        _report_copy(results, to_url)
    except _pool_errors() as exc:
        raise _pool_failure(exc) from exc
    finally:
        embedder.close()


def _copy_ends(
    settings: Settings,
    from_data_dir: Path,
    to_url: str,
    to_redis_url: str | None,
    to_qdrant_api_key: str | None,
) -> tuple[Settings, Settings]:
    """The settings of the data folder copied from and of the servers copied to."""
    redis_url = to_redis_url or settings.redis_url
    if not redis_url:
        typer.echo(
            "error: the target's Redis is needed for tombstones and dedupe marks: "
            "pass --to-redis-url or set REDIS_URL",
            err=True,
        )
        raise typer.Exit(code=2)
    source = settings.model_copy(
        update={"data_dir": from_data_dir, "qdrant_url": None, "redis_url": None}
    )
    target = settings.model_copy(
        update={
            "qdrant_url": to_url,
            "redis_url": redis_url,
            "qdrant_api_key": to_qdrant_api_key or settings.qdrant_api_key,
        }
    )
    return source, target


def _report_copy(results: list[tuple[Moved, int, int]], to_url: str) -> None:
    """Each collection's counts on both sides; a copy that moved nothing or left other counts
    on the target fails."""
    from memory_pool.pool_commands import CommandFailed

    for moved, in_source, in_target in results:
        verdict = "counts match" if in_source == in_target else "COUNTS DIFFER"
        typer.echo(
            f"{moved.collection}: {in_source} points in the data folder, "
            f"{in_target} on {to_url}: {verdict}"
        )
    if not results:
        raise CommandFailed("the data folder holds no collection: nothing copied")
    if any(in_source != in_target for _, in_source, in_target in results):
        raise CommandFailed(
            "the target holds another number of points than the data folder (points it "
            "had before the copy?); see above"
        )


def register(app: typer.Typer) -> None:
    """The pool's commands on the `memory-pool` command: export, import, copy."""
    app.command("export")(export_pool)
    app.add_typer(import_app, name="import")
    app.command("copy")(copy_pool)
