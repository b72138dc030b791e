"""The plugin's settings: environment over $HERMES_HOME/memory-pool.json over defaults."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .memory_pool_client import DEFAULT_URL as MEMORY_POOL_DEFAULT_URL

logger = logging.getLogger(__name__)

CONFIG_FILE = "memory-pool.json"
DEFAULT_URL = MEMORY_POOL_DEFAULT_URL
DEFAULT_TIMEOUT = 3.0
# key in memory-pool.json -> environment variable that overrides it
ENV_VARS = {
    "url": "MEMORY_POOL_URL",
    "agent": "MEMORY_POOL_AGENT",
    "timeout": "MEMORY_POOL_TIMEOUT",
    "api_key": "MEMORY_POOL_API_KEY",
}
# Secrets live in $HERMES_HOME/.env (Hermes writes them there), never in the JSON file.
FILE_KEYS = ("url", "agent", "timeout")

CONFIG_SCHEMA: list[dict[str, Any]] = [
    {"key": "url", "description": "memory-pool URL", "default": DEFAULT_URL},
    {
        "key": "agent",
        "description": "Agent name in memory-pool (the `bot` key; selects the collection)",
        "required": True,
    },
    {
        "key": "timeout",
        "description": "Seconds a recall may take before the turn goes on without memories",
        "default": str(DEFAULT_TIMEOUT),
    },
    {
        "key": "api_key",
        "description": "memory-pool API key (only if the agent requires one)",
        "secret": True,
        "env_var": ENV_VARS["api_key"],
    },
]


@dataclass(frozen=True)
class PluginConfig:
    url: str = DEFAULT_URL
    agent: str = ""
    timeout: float = DEFAULT_TIMEOUT
    api_key: str = ""


def default_hermes_home() -> str:
    """Hermes' own answer when running inside Hermes, else $HERMES_HOME or ~/.hermes."""
    try:
        from hermes_constants import get_hermes_home
    except ImportError:
        return os.environ.get("HERMES_HOME") or str(Path.home() / ".hermes")
    return str(get_hermes_home())


def _read_file(hermes_home: str) -> dict[str, Any]:
    path = Path(hermes_home) / CONFIG_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("memory-pool: ignoring unreadable %s: %s", path, exc)
        return {}
    return raw if isinstance(raw, dict) else {}


def _timeout(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        logger.warning("memory-pool: timeout %r is not a number; using %s", value, DEFAULT_TIMEOUT)
        return DEFAULT_TIMEOUT
    return seconds if seconds > 0 else DEFAULT_TIMEOUT


def load_config(hermes_home: str, environ: Mapping[str, str] | None = None) -> PluginConfig:
    """Each value from its environment variable, else the JSON file, else the default."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {k: v for k, v in _read_file(hermes_home).items() if k in FILE_KEYS}
    values.update({key: env[var] for key, var in ENV_VARS.items() if env.get(var, "").strip()})
    return PluginConfig(
        url=str(values.get("url") or DEFAULT_URL).strip(),
        agent=str(values.get("agent") or "").strip(),
        timeout=_timeout(values.get("timeout", DEFAULT_TIMEOUT)),
        api_key=str(values.get("api_key") or "").strip(),
    )


def save_config(values: Mapping[str, Any], hermes_home: str) -> Path:
    """Merge the non-secret values into $HERMES_HOME/memory-pool.json (atomically)."""
    path = Path(hermes_home) / CONFIG_FILE
    merged = _read_file(hermes_home)
    merged.update({k: v for k, v in values.items() if k in FILE_KEYS and v not in (None, "")})
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(staging, path)
    return path
