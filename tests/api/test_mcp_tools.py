"""The MCP tools' definitions and what they work out themselves (README "MCP"); the tools
against a running memory-pool are in tests/e2e/test_mcp.py."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route
from typer.testing import CliRunner

from api.app import create_app
from api.mcp.backend import ToolFailure
from api.mcp.shapes import chosen_message_id, outcome, recalled, time_filter
from api.mcp.tools import build_server
from memory_pool.main import app
from shared.format.ids import message_id_problem
from tests.support.stack import stack_settings

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ["forget", "list_agents", "recall", "remember"]


def readme_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    parts = readme.split("\n## MCP\n")
    assert len(parts) == 2, "README has one section 'MCP'"
    section = parts[1].split("\n## ")[0]
    # just before the Discord plugin's section
    assert parts[1].split("\n## ")[1].startswith("Pointing the Discord plugin at memory-pool")
    return section


def tool_names() -> list[str]:
    def no_backend(_: Any) -> Any:
        raise AssertionError("listing the tools calls no backend")

    tools = asyncio.run(build_server(no_backend).list_tools())
    return sorted(tool.name for tool in tools)


def test_the_server_has_the_four_tools() -> None:
    assert tool_names() == TOOLS


def test_readme_names_every_tool_both_transports_and_a_config_entry() -> None:
    section = readme_section()
    for tool in tool_names():
        assert f"| `{tool}` |" in section, tool
    assert "`/mcp`" in section and "memory-pool mcp --url" in section
    entries = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S)]
    stdio = entries[0]["mcpServers"]["memory-pool"]
    assert stdio["command"] == "memory-pool" and stdio["args"][:3] == [
        "mcp",
        "--url",
        "http://127.0.0.1:3102",
    ]
    http = entries[1]["mcpServers"]["memory-pool"]
    assert http["url"].endswith("/mcp") and http["headers"]["Authorization"].startswith("Bearer ")


def test_the_mcp_command_is_there() -> None:
    result = CliRunner().invoke(app, ["mcp", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--url", "--agent", "--api-key"):
        assert option in result.output


@pytest.mark.parametrize("seconds", ["0", "-1", "0.01"])
def test_the_mcp_command_refuses_a_timeout_no_answer_could_meet(seconds: str) -> None:
    """--timeout 0 made every tool call fail as "unreachable" and -1 as "did not answer as
    memory-pool does" (httpx's ValueError), blaming the server for a typo in the host's
    config: the command refuses it at start, saying so."""
    result = CliRunner().invoke(app, ["mcp", "--timeout", seconds], input="")
    assert result.exit_code == 2, result.output
    assert "--timeout" in result.output


def test_a_chosen_message_id_is_stable_and_storable() -> None:
    first = chosen_message_id("Mira keeps bees ", None, None)
    assert first == chosen_message_id("Mira keeps bees", None, None)  # as stored: trimmed
    assert first.startswith("mcp-") and len(first) == 20 and message_id_problem(first) is None
    assert first != chosen_message_id("Mira keeps bees", "Alex", None)
    assert first != chosen_message_id("Mira keeps bees", None, "c1")


@pytest.mark.parametrize(
    ("given", "ms"),
    [
        (None, None),
        (1_718_000_000_000, 1_718_000_000_000),
        ("1718000000000", 1_718_000_000_000),
        ("2024-06-10", 1_717_977_600_000),
        ("2024-06-10T01:00:00+01:00", 1_717_977_600_000),
        ("2024-06-10T00:00:00", 1_717_977_600_000),
    ],
)
def test_time_filters_take_iso_dates_and_unix_ms(given: int | str | None, ms: int | None) -> None:
    assert time_filter("since", given) == ms


def test_a_time_filter_that_is_no_time_is_a_tool_error() -> None:
    with pytest.raises(ToolFailure, match=r"invalid_request: until: 'soon'"):
        time_filter("until", "soon")


@pytest.mark.parametrize("given", ["9" * 5000, "-" + "1" * 4400, "0" * 4301])
def test_a_time_filter_with_more_digits_than_python_reads_is_a_tool_error(given: str) -> None:
    """int() refuses a string of over 4,300 digits with a ValueError, which escaped the tool as
    an unexpected error: the model read "Error executing tool recall" with no reason, and the
    server's log a traceback."""
    with pytest.raises(ToolFailure, match=r"invalid_request: since: "):
        time_filter("since", given)


def test_outcomes_follow_the_save_counts() -> None:
    assert outcome({"accepted": 1, "duplicates": 0, "skipped": 0}) == "stored"
    assert outcome({"accepted": 0, "duplicates": 1, "skipped": 0}) == "duplicate"
    assert outcome({"accepted": 0, "duplicates": 0, "skipped": 1}) == "skipped"
    assert outcome({"accepted": 0, "duplicates": 0, "skipped": 0, "edited": 1}) == "edited"


def test_a_hit_reads_both_writers_payloads() -> None:
    ours = recalled(
        {
            "id": "p",
            "score": 0.5,
            "payload": {
                "text": "[2024-06-10]\nMythos: hi",
                "speakers": "Mythos, Alex",
                "timestamp": 1_718_000_000_000,
                "messageIds": "1,2",
                "messageIdList": ["1", "2"],
                "source": "mcp",
                "conversationId": "c1",
            },
        }
    )
    assert ours.date == "2024-06-10" and ours.speakers == ["Mythos", "Alex"]
    assert ours.message_ids == ["1", "2"] and ours.conversation_id == "c1" and ours.score == 0.5
    st = recalled(
        {
            "id": "q",
            "score": 0.4,
            "payload": {"text": "hi", "speaker": "user", "messageIds": "9, 8", "timestamp": "x"},
        }
    )
    assert st.speakers == ["user"] and st.message_ids == ["9", "8"] and st.date is None
    assert st.source is None


def test_the_mount_is_one_route_and_no_middleware(tmp_path: Path) -> None:
    """/save and /retrieve pay nothing for the MCP server: it adds no middleware (which every
    request would pass through), only /mcp, out of the OpenAPI schema."""
    settings = stack_settings("redis://127.0.0.1:1", "http://127.0.0.1:1", tmp_path)
    app = create_app(settings)
    middleware = {m.cls.__module__ for m in app.user_middleware}
    assert middleware == {"api.middleware", "api.cors", "api.metrics", "api.request_id"}
    mcp_routes = [r for r in app.routes if getattr(r, "path", "").startswith("/mcp")]
    assert len(mcp_routes) == 1 and isinstance(mcp_routes[0], Route)
    assert not mcp_routes[0].include_in_schema and mcp_routes[0].methods is None
    assert "/mcp" not in app.openapi()["paths"]
