"""Bounded labels, the JSON log line, retry causes and the multiprocess folder."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from shared.errors import UpstreamUnavailable
from shared.ops import log_context
from shared.ops.log_setup import TEXT_FORMAT, JsonFormatter
from shared.ops.metered import FlushCauses, embedding_status
from shared.ops.metrics import OTHER, BoundedLabel
from workers.metrics import retry_cause

ROOT = Path(__file__).resolve().parents[3]


def test_a_bounded_label_names_the_fixed_ones_and_caps_the_rest() -> None:
    label = BoundedLabel(["Polaris"], cap=2)
    seen = [label(name) for name in ["a", "Polaris", "b", "c", "a", "d", "Polaris"]]
    assert seen == ["a", "Polaris", "b", OTHER, "a", OTHER, "Polaris"]


def test_no_cap_means_only_fixed_names() -> None:
    label = BoundedLabel(["x"], cap=0)
    assert (label("x"), label("y")) == ("x", OTHER)


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("api.routes.save", logging.WARNING, __file__, 1, message, args, None)
    for key, value in extra.items():
        setattr(made, key, value)
    return made


def test_a_json_line_has_level_logger_message_and_context() -> None:
    with log_context.bound(request_id="r-1", agent="Polaris"):
        line = json.loads(JsonFormatter().format(record("refused %d", 2, channel="c9")))
    assert line["level"] == "WARNING" and line["logger"] == "api.routes.save"
    assert line["message"] == "refused 2"
    assert (line["request_id"], line["agent"], line["channel"]) == ("r-1", "Polaris", "c9")
    assert line["time"].endswith("Z")
    assert "request_id" not in json.loads(JsonFormatter().format(record("later")))


def test_structured_extras_stay_out_of_the_line() -> None:
    # Celery passes a task's arguments as `data`: a structure, never logged whole.
    line = json.loads(JsonFormatter().format(record("done", data={"args": ["text"]})))
    assert "data" not in line


def test_text_stays_the_default_format() -> None:
    assert TEXT_FORMAT == "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _status_error(status: int) -> UpstreamUnavailable:
    import httpx

    response = httpx.Response(status, request=httpx.Request("POST", "http://x/v1/embeddings"))
    cause = openai.APIStatusError("no", response=response, body=None)
    error = UpstreamUnavailable("embedding provider unavailable")
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(("status", "label"), [(429, "429"), (503, "503"), (401, "401")])
def test_embedding_errors_are_labelled_by_the_provider_status(status: int, label: str) -> None:
    assert embedding_status(_status_error(status)) == label
    assert embedding_status(UpstreamUnavailable("down")) == "error"


@pytest.mark.parametrize(
    ("seen", "cause"),
    [([], "other"), (["embedding_rate_limited"], "embedding_rate_limited"),
     (["embedding_rate_limited", "qdrant_unavailable"], "qdrant_unavailable")],
)  # fmt: skip
def test_retries_count_under_the_last_failure_seen(seen: list[str], cause: str) -> None:
    assert retry_cause(FlushCauses(seen)) == cause


def test_each_start_gets_a_fresh_multiprocess_folder(tmp_path: Path) -> None:
    folder = tmp_path / "mp"
    folder.mkdir()
    (folder / "counter_123.db").write_bytes(b"stale values of an earlier run")
    script = (
        "from memory_pool.metrics_server import use_fresh_multiprocess_dir\n"
        "import os, sys\n"
        "path = use_fresh_multiprocess_dir()\n"
        "from shared.ops import metrics\n"
        "metrics.FLUSH_CHUNKS.inc(3)\n"
        "print(sorted(p.name for p in path.iterdir()))\n"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    files = out.stdout.strip()
    assert "counter_123.db" not in files  # the earlier run's values are gone
    assert "counter_" in files  # this process's values live in the folder
