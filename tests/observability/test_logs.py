"""Logs of a live deployment in JSON: context fields, one line each, nothing private."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from tests.support.cluster import wait_until
from tests.support.deployment import OPS_KEY, SCOPED_KEY, Deployment, messages, value

TEXT_MARKER = "zebracrossing-private-words"
NAME_MARKER = "Marguerite-secret-handle"
REJECTED_MARKER = "refuse-this-chunk-please"


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every log line (Celery's start banner goes to stdout in its own form)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_a_json_line_carries_the_request_id(deployment: Deployment) -> None:
    body = messages("rid", 2)
    body[1]["message_id"] = "x,y"  # refused (a comma): the route logs a warning
    response = deployment.save({"bot": "Polaris", "messages": body}, **{"X-Request-ID": "req-42.a"})
    assert response.headers["x-request-id"] == "req-42.a"

    def logged() -> list[dict[str, Any]]:
        lines = json_lines(deployment.api.log())
        return [line for line in lines if line.get("request_id") == "req-42.a"]

    lines = wait_until(logged, 10, "the request's log lines")
    warning = next(line for line in lines if line["logger"] == "api.routes.save")
    assert warning["level"] == "WARNING" and "refused 1 of 2" in warning["message"]
    assert warning["agent"] == "Polaris"
    assert {"time", "level", "logger", "message"} <= warning.keys()
    assert any(line["logger"] == "uvicorn.access" for line in lines)


def test_a_request_id_is_made_when_none_or_an_unsafe_one_is_given(deployment: Deployment) -> None:
    made = deployment.save({"bot": "Polaris", "messages": messages("rid2", 1)})
    assert re.fullmatch(r"[0-9a-f]{32}", made.headers["x-request-id"])
    forged = deployment.save(
        {"bot": "Polaris", "messages": messages("rid3", 1)}, **{"X-Request-ID": "a b\tc"}
    )
    assert re.fullmatch(r"[0-9a-f]{32}", forged.headers["x-request-id"])
    # The door's own refusals carry one too.
    refused = deployment.http.post(
        f"{deployment.api_url}/save", json={}, headers={"X-API-Key": "wrong", "X-Request-ID": "r1"}
    )
    assert refused.status_code == 401 and refused.headers["x-request-id"] == "r1"


def test_no_message_text_user_names_or_keys_in_logs(deployment: Deployment) -> None:
    deployment.embeddings.reject_inputs_containing(REJECTED_MARKER)
    dead_before = value(deployment.worker_metrics(), "memory_pool_flush_dead_letters_total")
    body = [*messages("private", 2), *messages("rejected", 1)]  # two chunks
    body[0]["text"] = f"I will tell you about {TEXT_MARKER} now"
    body[1]["speaker_name"] = NAME_MARKER
    body[2]["text"] = f"{REJECTED_MARKER} and {TEXT_MARKER} again"  # a dead letter
    deployment.save({"bot": "vault", "messages": body}, Authorization=f"Bearer {SCOPED_KEY}")
    flushed = deployment.http.post(
        f"{deployment.api_url}/agents/vault/flush",
        params={"wait": "true", "timeout": "30"},
        headers={"X-API-Key": OPS_KEY},
    )
    assert flushed.status_code == 200, flushed.text
    query = {"bot": "vault", "query_text": f"what about {TEXT_MARKER}"}
    found = deployment.http.post(
        f"{deployment.api_url}/retrieve", json=query, headers={"X-API-Key": SCOPED_KEY}
    )
    assert found.status_code == 200 and TEXT_MARKER in found.text  # it was stored
    wait_until(lambda: "rejected" in deployment.logs(), 10, "the rejection to be logged")
    dead_after = value(deployment.worker_metrics(), "memory_pool_flush_dead_letters_total")
    assert dead_after - dead_before == 1
    assert value(deployment.api_metrics(), "memory_pool_backlog_dead_letters") >= 1
    logs = deployment.logs()
    for secret in (TEXT_MARKER, NAME_MARKER, REJECTED_MARKER, OPS_KEY, SCOPED_KEY,
                   "embedding-key-SECRET-99"):  # fmt: skip
        assert secret not in logs, secret


def test_celery_lines_go_through_the_one_configuration_once(deployment: Deployment) -> None:
    deployment.save({"bot": "Polaris", "messages": messages("once", 2)})
    deployment.flush("Polaris")
    for worker, _ in deployment.workers:
        lines = json_lines(worker.log())
        ready = [line for line in lines if line["message"].endswith(" ready.")]
        assert len(ready) == 1, ready
        done = Counter(
            line["message"].split(" succeeded")[0]
            for line in lines
            if line["logger"] == "celery.app.trace"
        )
        assert all(n == 1 for n in done.values()), done  # a worker may have had no task
        with_task = [line for line in lines if "task_id" in line]
        assert all(line["task_id"] in line["message"] for line in with_task if
                   line["logger"] == "celery.app.trace")  # fmt: skip
    tasks = [json_lines(w.log()) for w, _ in deployment.workers]
    assert any(line.get("task_id") for lines in tasks for line in lines)
    assert any(line["logger"] == "celery.app.trace" for lines in tasks for line in lines)
