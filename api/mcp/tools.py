"""The four MCP tools, defined once for both transports: what each tells a model about when to
call it, its arguments, and how it turns them into HTTP API bodies for a Backend."""

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from api.mcp.backend import Backend, ToolFailure
from api.mcp.shapes import (
    MCP_SOURCE,
    AgentsResult,
    ForgetResult,
    RecallResult,
    RememberResult,
    chosen_message_id,
    outcome,
    recalled,
    time_filter,
)
from shared.format.ids import one_line_name

Connect = Callable[[Context], Backend]

INSTRUCTIONS = (
    "memory-pool is this character's long-term memory, shared with its other interfaces "
    "(Discord, SillyTavern, Hermes and other MCP hosts). Use `recall` to look up what was said "
    "or learned before this conversation, `remember` to keep something worth knowing later, "
    "`forget` only when asked to erase something, and `list_agents` to see which characters "
    "(agents) you may reach."
)

RECALL = (
    "Search the character's long-term memory: past conversations on every interface, and "
    "notes kept with `remember`. Call it before answering when the user refers to something "
    'from before this conversation (a person, an event, a preference, "do you remember…"), '
    "or when earlier context would help and is not in the conversation. Answers `formatted`, "
    "a block ready to read, and `hits`: each memory's text, date, speakers and message ids, "
    "best first. Narrow it with source (one interface), channel_id, or since/until."
)
REMEMBER = (
    "Keep something in the character's long-term memory, for this and every other interface "
    '(stored as a message from source "mcp"). Call it when the user tells you something worth '
    "recalling in a later conversation (a fact about them, a preference, a plan, an event) or "
    "asks you to remember it. Write `text` as a statement that stands on its own (\"Alex's "
    "sister is called Mira\"). Without `speaker` it is the character's own note; with it, "
    "that person's words. Recall finds it once its chunk is written (seconds to minutes). The "
    "same message_id again is a duplicate; without one, an id is derived from the text, "
    "speaker and conversation, so the same note twice is kept once."
)
FORGET = (
    "Delete part of the character's memory for good: forgotten message ids are never stored "
    "again. Call it only when the user asks to forget something, or to erase a person's "
    "messages. Give exactly one scope: message_id (every memory holding that message; ids are "
    "in recall's hits and remember's answer), user_id (every memory that person speaks in), or "
    'source (everything from one interface: "mcp", "discord", …), narrowed, if wanted, with '
    "channel_id or conversation_id, which need their source."
)
LIST_AGENTS = (
    "The characters (agents) whose memory this connection may reach, and the one a call without "
    "`agent` uses. Call it when unsure which agent to name, or when a tool asks for one."
)

Agent = Annotated[
    str | None,
    Field(
        description="The character (agent) whose memory this is. Optional when the server was "
        "started for one (memory-pool mcp --agent), the API key is scoped to one, or only one "
        "is visible."
    ),
]
Id = Annotated[str | None, Field(description="A platform id, as stored.")]


async def _agent(backend: Backend, given: str | None) -> str:
    """The agent a call is for: the one named, else the setup's, else the only visible one."""
    if given:
        return given
    default = backend.default_agent()
    if default:
        return default
    visible = [entry["name"] for entry in (await backend.agents())["agents"]]
    if len(visible) == 1:
        return str(visible[0])
    named = ", ".join(visible) if visible else "none visible to this key"
    raise ToolFailure("agent_required", f"name the agent (`agent`): one of {named}")


def _present(**values: Any) -> dict[str, Any]:
    return {name: value for name, value in values.items() if value is not None}


QUERY = (
    "What to look for, in plain words; English time words "
    '("last weekend", "in May") put the memories of that time first.'
)


def _recall_tool(connect: Connect) -> Callable[..., Any]:
    async def recall(
        ctx: Context,
        query: Annotated[str, Field(description=QUERY)],
        agent: Agent = None,
        limit: Annotated[int, Field(description="How many memories at most (1-100).")] = 5,
        exclude_message_ids: Annotated[
            list[str] | None, Field(description="Message ids already in your context: skipped.")
        ] = None,
        source: Annotated[
            str | None, Field(description='Only memories from this interface ("discord", …).')
        ] = None,
        channel_id: Annotated[str | None, Field(description="Only this channel's.")] = None,
        since: Annotated[
            int | str | None,
            Field(description="Only memories from then on: ISO 8601 (2026-05-01) or Unix ms."),
        ] = None,
        until: Annotated[
            int | str | None,
            Field(description="Only memories up to then: ISO 8601 or Unix ms."),
        ] = None,
    ) -> RecallResult:
        backend = connect(ctx)
        name = await _agent(backend, agent)
        body: dict[str, Any] = {"bot": name, "query_text": query, "limit": limit}
        body["exclude_message_ids"] = exclude_message_ids or []
        body |= _present(source=source, channel_id=channel_id)
        body |= _present(since=time_filter("since", since), until=time_filter("until", until))
        try:
            found = await backend.retrieve(body)
        except ToolFailure as failure:  # /retrieve's reason, by the argument the model sent
            raise ToolFailure(failure.code, _QUERY_FIELD.sub("query", failure.detail)) from None
        hits = [recalled(hit) for hit in found.get("hits", [])]
        return RecallResult(agent=name, formatted=found.get("formatted", ""), hits=hits)

    return recall


# /retrieve's name for recall's `query`, as its refusals spell it
_QUERY_FIELD = re.compile(r"\bquery_text\b")


def _refusal(counts: dict[str, Any]) -> ToolFailure:
    refusals = counts.get("refusals") or [{}]
    return ToolFailure("refused", str(refusals[0].get("reason", "the message cannot be stored")))


def _remember_tool(connect: Connect) -> Callable[..., Any]:
    async def remember(
        ctx: Context,
        text: Annotated[str, Field(description="What to remember, as a statement on its own.")],
        agent: Agent = None,
        message_id: Annotated[
            str | None,
            Field(
                description="Your id for it (the same id again is a duplicate); default: "
                "derived from the text, speaker and conversation."
            ),
        ] = None,
        speaker: Annotated[
            str | None, Field(description="Whose words these are; default: the character's own.")
        ] = None,
        conversation_id: Annotated[
            str | None, Field(description="The conversation it belongs to, if any.")
        ] = None,
    ) -> RememberResult:
        if speaker is not None and not one_line_name(speaker):
            # /save would store it under "User": a model that meant someone learns why instead
            raise ToolFailure(
                "invalid_request",
                "speaker is blank: leave it out for the character's own note, or name who said it",
            )
        backend = connect(ctx)
        name = await _agent(backend, agent)
        chosen = not message_id
        mid = chosen_message_id(text, speaker, conversation_id) if chosen else message_id
        message: dict[str, Any] = {"message_id": mid, "text": text, "speaker_kind": "self"}
        if speaker:
            message |= {"speaker_kind": "user", "speaker_name": speaker}
        message |= _present(conversation_id=conversation_id)
        counts = await backend.save({"bot": name, "source": MCP_SOURCE, "messages": [message]})
        if counts.get("refused"):
            raise _refusal(counts)
        return RememberResult(
            agent=name, message_id=str(mid), message_id_chosen=chosen, outcome=outcome(counts)
        )

    return remember


def _forget_tool(connect: Connect) -> Callable[..., Any]:
    async def forget(
        ctx: Context,
        agent: Agent = None,
        message_id: Annotated[str | None, Field(description="Every memory holding it.")] = None,
        user_id: Annotated[str | None, Field(description="Everything this person said.")] = None,
        source: Annotated[
            str | None, Field(description='Everything from this interface ("mcp", …).')
        ] = None,
        conversation_id: Annotated[
            str | None, Field(description="With source: one conversation.")
        ] = None,
        channel_id: Annotated[str | None, Field(description="With source: one channel.")] = None,
    ) -> ForgetResult:
        backend = connect(ctx)
        name = await _agent(backend, agent)
        scope = _present(
            message_id=message_id,
            user_id=user_id,
            source=source,
            conversation_id=conversation_id,
            channel_id=channel_id,
        )
        return ForgetResult(agent=name, **await backend.delete(name, scope))

    return forget


def _list_agents_tool(connect: Connect) -> Callable[..., Any]:
    async def list_agents(ctx: Context) -> AgentsResult:
        backend = connect(ctx)
        found = await backend.agents()
        default = backend.default_agent()
        if default is None and len(found["agents"]) == 1:
            default = found["agents"][0]["name"]
        return AgentsResult(agents=found["agents"], default_agent=default)

    return list_agents


@contextmanager
def _root_logging_kept() -> Iterator[None]:
    """MCPServer() calls logging.basicConfig (a handler on the root logger, when it has none):
    how memory-pool logs is its own to set (MEMORY_POOL_LOG_FORMAT), so that is undone."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def build_server(connect: Connect, *, name: str = "memory-pool") -> MCPServer:
    """The MCP server with the four tools, each calling the Backend `connect` gives for the
    call's context (a request's key on HTTP, the one client on stdio)."""
    with _root_logging_kept():
        server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS, version="0.1.0")
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(_recall_tool(connect), description=RECALL, annotations=reading)
    server.add_tool(
        _remember_tool(connect),
        description=REMEMBER,
        annotations=ToolAnnotations(idempotent_hint=True, open_world_hint=False),
    )
    server.add_tool(
        _forget_tool(connect),
        description=FORGET,
        annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False),
    )
    server.add_tool(_list_agents_tool(connect), description=LIST_AGENTS, annotations=reading)
    return server
