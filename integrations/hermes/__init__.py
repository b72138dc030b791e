"""memory-pool as a Hermes Agent memory provider: each turn to /save, /retrieve before each turn,
and two tools for the model (memory_pool_search, memory_pool_remember).

Two ways in: `pip install memory-pool-hermes` (this package as `memory_pool_hermes`, found by the
`hermes_agent.memory_providers` entry point, or by the folder `memory-pool-hermes install` puts
in $HERMES_HOME/plugins/ for Hermes releases that read only that), or `memory-pool hermes
install` from a memory-pool checkout (a copy in $HERMES_HOME/plugins/memory-pool/). Either way
memory_pool_client.py beside this file is memory-pool's client/http_client.py, the one place
that knows the HTTP API. Activate with `memory.provider: memory-pool` in Hermes' config.yaml.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from agent.memory_provider import MemoryProvider

from . import tools
from .config import CONFIG_SCHEMA, PluginConfig, default_hermes_home, load_config, save_config
from .memory_pool_client import MemoryPoolClient
from .sender import Sender, spawn_thread
from .turns import SOURCE, SessionTurns, strip_recall, turn_messages

logger = logging.getLogger(__name__)

PROVIDER_NAME = "memory-pool"
SHUTDOWN_DRAIN_SECONDS = 5.0
MAX_SESSIONS = 64  # sessions whose last turns one provider remembers (gateway agents serve many)


class MemoryPoolProvider(MemoryProvider):
    """Writes the primary agent's turns to memory-pool and recalls them before each turn."""

    def __init__(self) -> None:
        self._config = PluginConfig()
        self._client: MemoryPoolClient | None = None
        self._sender: Sender | None = None
        self._writes = False
        self._agent_context = "primary"
        self._session_id = ""
        self._user_id: str | None = None
        self._user_name: str | None = None
        self._sessions: dict[str, SessionTurns] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return PROVIDER_NAME

    def is_available(self) -> bool:
        """Configured with an agent name; no network."""
        try:
            return bool(load_config(default_hermes_home()).agent)
        except Exception:
            return False

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        self._config = load_config(kwargs.get("hermes_home") or default_hermes_home())
        self._session_id = session_id or ""
        # Older hosts do not say; Hermes passes "primary" for the agent the user talks to.
        self._agent_context = str(kwargs.get("agent_context") or "primary")
        self._writes = self._agent_context == "primary"
        self._user_id = str(kwargs["user_id"]) if kwargs.get("user_id") else None
        self._user_name = str(kwargs["user_name"]) if kwargs.get("user_name") else None
        if self._client is None:
            self._client = MemoryPoolClient(
                self._config.url,
                api_key=self._config.api_key or None,
                timeout=self._config.timeout,
            )
        if self._sender is None and self._writes:
            self._sender = Sender(self._save)

    # -- the model's tools ---------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """memory_pool_search and memory_pool_remember (asked before initialize: always both)."""
        return [copy.deepcopy(schema) for schema in tools.SCHEMAS]

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """The tool's result as a JSON string; a failure is a result with its reason too."""
        try:
            arguments = args if isinstance(args, Mapping) else {}
            result = self._tool_call(tool_name, arguments, str(kwargs.get("session_id") or ""))
        except Exception as exc:
            logger.debug("memory-pool: tool %s failed", tool_name, exc_info=True)
            result = tools.failure(exc, self._config.url)
        return tools.tool_result(result)

    def _tool_call(
        self, tool_name: str, args: Mapping[str, Any], session_id: str
    ) -> dict[str, Any]:
        client, agent = self._client, self._config.agent
        if tool_name not in tools.TOOL_NAMES:
            return {"error": f"memory-pool has no tool {tool_name!r}"}
        if client is None or not agent:
            return {"error": "memory-pool is not set up: no agent name (MEMORY_POOL_AGENT)"}
        if tool_name == tools.SEARCH_TOOL:
            with self._lock:
                exclude = self._session(session_id).recent_ids()
            return tools.search(client, agent, args, exclude=exclude, timeout=self._config.timeout)
        if not self._writes:
            reason = (
                f"not stored: this is a {self._agent_context} agent, and only the primary "
                "agent (the one the user talks to) writes to memory-pool"
            )
            return {"stored": False, "reason": reason}
        return tools.remember(
            client,
            agent,
            args,
            user_id=self._user_id,
            now_ms=int(time.time() * 1000),
            timeout=self._config.timeout,
        )

    # -- recall --------------------------------------------------------------

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """/retrieve's `formatted` block within the timeout; "" on anything else."""
        client, agent = self._client, self._config.agent
        if client is None or not agent or not query or not query.strip():
            return ""
        with self._lock:
            exclude = self._session(session_id).recent_ids()
        result: dict[str, str] = {}

        def recall() -> None:
            try:
                answer = client.retrieve(
                    agent, query, exclude_message_ids=exclude, timeout=self._config.timeout
                )
                formatted = answer.get("formatted")
                result["formatted"] = formatted if isinstance(formatted, str) else ""
            except Exception as exc:
                logger.debug("memory-pool: recall failed: %s", exc)

        worker = spawn_thread(recall, "memory-pool-recall")
        worker.join(self._config.timeout)
        if worker.is_alive():
            logger.debug("memory-pool: recall took over %.1fs", self._config.timeout)
        formatted = result.get("formatted", "")
        if formatted:
            with self._lock:  # so that a turn handed back with it is saved without it
                self._session(session_id).recalled.append(formatted)
        return formatted

    # -- writes --------------------------------------------------------------

    def sync_turn(
        self,
        user_content: str,
        assistant_content: str,
        *,
        session_id: str = "",
        messages: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        """Queue the turn for the background sender; returns at once, never raises."""
        try:
            if not (self._writes and self._sender and self._config.agent):
                return
            with self._lock:
                session = self._session(session_id)
                user = strip_recall(user_content or "", session.recalled)
                assistant = strip_recall(assistant_content or "", session.recalled)
                if not user.strip() and not assistant.strip():
                    return
                turn = session.next_turn(messages)
                body = turn_messages(
                    session.session_id,
                    turn,
                    user,
                    assistant,
                    now_ms=session.stamp(int(time.time() * 1000)),
                    user_id=self._user_id,
                    user_name=self._user_name,
                )
                batch = session.add(body)
            self._sender.submit(batch)
        except Exception:
            logger.warning("memory-pool: could not queue a turn", exc_info=True)

    def on_session_switch(
        self,
        new_session_id: str,
        *,
        parent_session_id: str = "",
        reset: bool = False,
        rewound: bool = False,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            if reset:
                self._sessions.pop(new_session_id or self._session_id, None)
            self._session_id = new_session_id or self._session_id

    def shutdown(self) -> None:
        """Give queued saves a few seconds, then close the connection."""
        sender, self._sender = self._sender, None
        if sender is not None:
            sender.close(SHUTDOWN_DRAIN_SECONDS)
        client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- configuration -------------------------------------------------------

    def get_config_schema(self) -> list[dict[str, Any]]:
        return [dict(field) for field in CONFIG_SCHEMA]

    def save_config(self, values: dict[str, Any], hermes_home: str) -> None:
        save_config(values, hermes_home)

    # -- internals -----------------------------------------------------------

    def _session(self, session_id: str) -> SessionTurns:
        """The session's turns (created on first use); the caller holds the lock."""
        key = session_id or self._session_id or "default"
        session = self._sessions.get(key)
        if session is None:
            while len(self._sessions) >= MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))
            session = self._sessions[key] = SessionTurns(key)
        return session

    def _save(self, batch: list[dict[str, Any]]) -> None:
        client = self._client
        if client is not None:
            client.save(self._config.agent, batch, source=SOURCE)


def register(ctx: Any) -> None:
    """Hermes' plugin entry point."""
    ctx.register_memory_provider(MemoryPoolProvider())
