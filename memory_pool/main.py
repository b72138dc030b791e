"""The `memory-pool` command: its subcommands, each a thin call into the service."""

from __future__ import annotations

import logging
import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, Any, TextIO, cast

import typer

from shared.agents import load_agents
from shared.errors import ConfigError
from shared.settings import Settings

app = typer.Typer(
    help="memory-pool: one long-term memory for an AI character across all its interfaces.",
    no_args_is_help=True,
    add_completion=False,
)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="Agents file (YAML or TOML); default MEMORY_POOL_CONFIG."),
]


def _settings(config: Path | None = None) -> Settings:
    overrides = {"MEMORY_POOL_CONFIG": str(config)} if config else {}
    # keys are the settings' environment names (aliases), which mypy's pydantic plugin can't see
    settings = Settings(**cast(dict[str, Any], overrides))
    try:
        load_agents(settings.config_path)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    return settings


def _logging(settings: Settings, level: str = "INFO") -> None:
    """One configuration for every command (MEMORY_POOL_LOG_FORMAT: text or json)."""
    from shared.log_setup import configure_logging

    configure_logging(settings.log_format, level)


def _celery_logging(settings: Settings, level: str) -> None:
    """Celery configures no logging of its own once a setup_logging receiver exists: its lines
    go through ours, once each."""
    from celery.signals import setup_logging

    def ours(**_: object) -> None:
        _logging(settings, level)

    setup_logging.connect(ours, weak=False)


MetricsPort = Annotated[
    int | None,
    typer.Option("--metrics-port", help="Serve Prometheus metrics on this port (off by default)."),
]
MetricsHost = Annotated[
    str, typer.Option("--metrics-host", help="Address for --metrics-port (compose: 0.0.0.0).")
]


def _require_servers(settings: Settings, role: str) -> None:
    """Workers and the scheduler of a deployment need shared Redis and a Qdrant server."""
    if not settings.redis_url:
        typer.echo(f"error: `memory-pool {role}` needs REDIS_URL (the shared broker)", err=True)
        raise typer.Exit(code=2)
    if role == "worker" and not settings.qdrant_url:
        typer.echo(
            "error: `memory-pool worker` needs QDRANT_URL. Without it Qdrant runs embedded "
            "(Qdrant Edge), which only one process may open: `memory-pool serve` runs its "
            "worker inside itself.",
            err=True,
        )
        raise typer.Exit(code=2)


@app.callback()
def _root() -> None:
    """Subcommands below; each has --help."""


@app.command("check-config")
def check_config(config: ConfigOption = None) -> None:
    """Check the settings and the agents file, and list each agent's collection and speaker."""
    settings = _settings(config)
    agents = load_agents(settings.config_path)
    typer.echo(f"embedding: {settings.embedding_provider} {settings.embedding_model}")
    if settings.config_path is None:
        typer.echo("no agents file: any agent name is accepted (set MEMORY_POOL_CONFIG)")
    for agent in agents.listed:
        typer.echo(f"agent {agent.name}: collection {agent.collection_name}, self {agent.speaker}")
    if settings.config_path is not None:
        unlisted = "accepted" if agents.accept_unlisted else "refused"
        typer.echo(f"unlisted agents: {unlisted}")


@app.command()
def api(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (the Discord plugin's default).")] = 3102,
    config: ConfigOption = None,
) -> None:
    """Run only the HTTP API against REDIS_URL and QDRANT_URL (the compose `api` service)."""
    import uvicorn

    from api.app import create_app

    settings = _settings(config)
    _require_servers(settings, "api")
    _logging(settings)
    # log_config=None: uvicorn's lines go through the one configuration above.
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info", log_config=None)


@app.command()
def worker(
    concurrency: Annotated[int, typer.Option(help="Worker processes (or threads).")] = 2,
    pool: Annotated[str, typer.Option(help="Celery pool: prefork, threads or solo.")] = "prefork",
    loglevel: Annotated[str, typer.Option(help="Log level.")] = "INFO",
    config: ConfigOption = None,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run a Celery worker that flushes conversations (scale with more of these)."""
    from memory_pool import metrics_server

    settings = _settings(config)
    _require_servers(settings, "worker")
    _logging(settings, loglevel)
    _celery_logging(settings, loglevel)
    if metrics_port is not None:
        # Before any metric exists: the pool's children write theirs to files.
        metrics_server.use_fresh_multiprocess_dir()
    from workers.celery_app import make_celery

    celery_app = make_celery(settings)
    if metrics_port is not None:
        metrics_server.mark_dead_children()
        metrics_server.serve_multiprocess_metrics(metrics_host, metrics_port)
    argv = ["worker", f"--concurrency={concurrency}", f"--loglevel={loglevel}", f"--pool={pool}"]
    celery_app.worker_main(argv)


@app.command()
def scheduler(
    config: ConfigOption = None,
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
) -> None:
    """Run the sweep that hands due conversations to workers (exactly one per deployment)."""
    from memory_pool.metrics_server import serve_process_metrics
    from shared.buffers import Buffers
    from shared.runtime import redis_client
    from workers.celery_app import make_celery
    from workers.metrics import meter_scheduler
    from workers.scheduler import celery_scheduler

    settings = _settings(config)
    _require_servers(settings, "scheduler")
    _logging(settings)
    if metrics_port is not None:
        serve_process_metrics(metrics_host, metrics_port)
    buffers = Buffers(
        redis_client(settings),
        dedupe_ttl_seconds=settings.dedupe_ttl_seconds,
        lease_seconds=settings.lease_seconds,
    )
    sweep = meter_scheduler(celery_scheduler(buffers, make_celery(settings), settings))
    logging.getLogger(__name__).info("scheduler started")
    try:
        sweep.run()
    except KeyboardInterrupt:
        sweep.stop()


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (the Discord plugin's default).")] = 3102,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Where Redis and Qdrant keep data; MEMORY_POOL_DATA_DIR."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run everything in one process with its data in one folder (what `make run` starts)."""
    from memory_pool.embedded_redis import EmbeddedRedisError
    from memory_pool.serve import ServeError, run_in_one_process

    settings = _settings(config)
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    _logging(settings)
    try:
        code = run_in_one_process(settings, host=host, port=port)
    except (EmbeddedRedisError, ServeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    raise typer.Exit(code=code)


@app.command()
def health(
    url: Annotated[str, typer.Option(help="The running memory-pool.")] = "http://127.0.0.1:3102",
) -> None:
    """Ask a running memory-pool for /health; exit 1 unless everything is ok."""
    import json

    import httpx

    try:
        response = httpx.get(f"{url.rstrip('/')}/health", timeout=10)
    except httpx.HTTPError as exc:
        typer.echo(f"error: {url} is not answering: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    report = response.json()
    typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    raise typer.Exit(code=0 if report.get("status") == "ok" else 1)


import_app = typer.Typer(
    help="Import into an agent's memory: SillyTavern chats, or a memory-pool export.",
    no_args_is_help=True,
)
app.add_typer(import_app, name="import")


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

    settings = _settings(config)
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
    from shared.pool_format import BadExport
    from shared.pool_transfer import TransferRefused

    return (
        CommandFailed, BadExport, TransferRefused, MemoryPoolError, httpx.HTTPError, OSError,
        UnicodeDecodeError, redis.RedisError,
    )  # fmt: skip


@app.command("export")
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

    settings = _settings(config)
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
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
    from shared.embedder import make_embedder

    settings = _settings(config)
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
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


@app.command("copy")
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
    from memory_pool.pool_commands import CommandFailed
    from memory_pool.pool_commands import copy_pool as run_copy
    from shared.embedder import make_embedder

    settings = _settings(config)
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
        mismatched = [(m, s, t) for m, s, t in results if s != t]
        for moved, in_source, in_target in results:
            verdict = "counts match" if in_source == in_target else "COUNTS DIFFER"
            typer.echo(
                f"{moved.collection}: {in_source} points in the data folder, "
                f"{in_target} on {to_url}: {verdict}"
            )
        if not results:
            raise CommandFailed("the data folder holds no collection: nothing copied")
        if mismatched:
            raise CommandFailed(
                "the target holds another number of points than the data folder (points it "
                "had before the copy?); see above"
            )
    except _pool_errors() as exc:
        raise _pool_failure(exc) from exc
    finally:
        embedder.close()


hermes_app = typer.Typer(help="The Hermes Agent memory provider plugin.", no_args_is_help=True)
app.add_typer(hermes_app, name="hermes")

HERMES_PLUGIN = "memory-pool"
HERMES_PLUGIN_SOURCE = Path(__file__).resolve().parents[1] / "integrations" / "hermes"


def install_hermes_plugin(hermes_home: Path) -> Path:
    """Copy the plugin and memory-pool's HTTP client (as memory_pool_client.py) into
    <hermes_home>/plugins/memory-pool/, replacing an earlier install; returns the folder."""
    import shutil

    from client import http_client

    if not (HERMES_PLUGIN_SOURCE / "plugin.yaml").is_file():
        raise FileNotFoundError(f"no plugin sources at {HERMES_PLUGIN_SOURCE} (a checkout has)")
    target = hermes_home.expanduser() / "plugins" / HERMES_PLUGIN
    if target.exists() and not (target / "memory_pool_client.py").is_file():
        raise FileExistsError(f"{target} holds something else; move it away first")
    staging = target.with_name(f".{HERMES_PLUGIN}.installing")  # Hermes skips dot folders
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(
        HERMES_PLUGIN_SOURCE, staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    shutil.copyfile(http_client.__file__, staging / "memory_pool_client.py")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


@hermes_app.command("install")
def hermes_install(
    hermes_home: Annotated[
        Path | None,
        typer.Option("--hermes-home", help="Hermes' home; default $HERMES_HOME, else ~/.hermes."),
    ] = None,
) -> None:
    """Install the memory-pool memory provider into Hermes' plugins folder."""
    import os

    home = hermes_home or Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes")
    try:
        target = install_hermes_plugin(home)
    except OSError as exc:  # also the FileNotFoundError / FileExistsError above
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    typer.echo(f"installed the Hermes plugin in {target}")
    typer.echo(
        f"next: set `memory.provider: {HERMES_PLUGIN}` in {home / 'config.yaml'} and the agent "
        "(`hermes memory setup`, or MEMORY_POOL_AGENT); see integrations/hermes/README.md"
    )


def main() -> None:
    app(prog_name="memory-pool")


if __name__ == "__main__":
    main()
