"""Real traffic through a live deployment moves the metrics by exactly what was sent."""

from __future__ import annotations

import time

from tests.support.cluster import FLUSH_DONE, wait_until
from tests.support.deployment import (
    OPS_KEY,
    SCOPED_KEY,
    Deployment,
    messages,
    parse_metrics,
    value,
)


def test_metrics_needs_an_operator_key_once_keys_exist(deployment: Deployment) -> None:
    url = f"{deployment.api_url}/metrics"
    assert deployment.http.get(url).status_code == 401
    scoped = deployment.http.get(url, headers={"Authorization": f"Bearer {SCOPED_KEY}"})
    assert scoped.status_code == 403
    ops = deployment.http.get(url, headers={"X-API-Key": OPS_KEY})
    assert ops.status_code == 200
    assert ops.headers["content-type"].startswith("text/plain")


def test_save_counts_each_message_once_by_outcome(deployment: Deployment) -> None:
    window = messages("count", 30)
    before = deployment.api_metrics()
    first = deployment.save({"bot": "Polaris", "messages": window}).json()
    again = deployment.save({"bot": "Polaris", "messages": window}).json()
    assert (first["accepted"], again["duplicates"]) == (30, 30)
    after = deployment.api_metrics()

    def moved(outcome: str) -> float:
        name = "memory_pool_save_messages_total"
        labels = {"agent": "Polaris", "source": "discord", "outcome": outcome}
        return value(after, name, **labels) - value(before, name, **labels)

    assert (moved("accepted"), moved("duplicate"), moved("refused")) == (30, 30, 0)
    requests = "memory_pool_save_requests_total"
    assert value(after, requests, agent="Polaris") - value(before, requests, agent="Polaris") == 2
    http = {"endpoint": "/save", "status": "202"}
    name = "memory_pool_http_requests_total"
    assert value(after, name, **http) - value(before, name, **http) == 2


def test_a_refused_message_is_counted_with_its_reason(deployment: Deployment) -> None:
    body = messages("refusal", 2)
    body[1]["message_id"] = "a,b"  # a comma cannot be stored in st's messageIds
    before = deployment.api_metrics()
    answer = deployment.save({"bot": "Polaris", "messages": body}).json()
    assert (answer["accepted"], answer["refused"]) == (1, 1)
    after = deployment.api_metrics()
    name = "memory_pool_save_refused_messages_total"
    reason = {"agent": "Polaris", "reason": "invalid_message_id"}
    assert value(after, name, **reason) - value(before, name, **reason) == 1
    name = "memory_pool_save_messages_total"
    refused = {"agent": "Polaris", "outcome": "refused"}
    assert value(after, name, **refused) - value(before, name, **refused) == 1


def test_unlisted_agents_share_one_label_past_the_cap(deployment: Deployment) -> None:
    for n in range(25):
        deployment.save({"bot": f"hostile-{n}", "messages": messages(f"h{n}", 1)})
    samples = deployment.api_metrics()
    agents = {
        dict(labels)["agent"]
        for (name, labels) in samples
        if name == "memory_pool_save_requests_total"
    }
    assert "other" in agents and "Polaris" in agents
    assert len(agents) <= 20 + 2 + 1  # the cap, the listed agents, "other"


def test_a_429_from_the_embedding_provider_is_a_retry(deployment: Deployment) -> None:
    before = deployment.worker_metrics()
    deployment.embeddings.fail_next(429, times=1, retry_after=0.2)
    deployment.save({"bot": "ratelimited", "messages": messages("rl", 3)})
    deployment.flush("ratelimited")
    after = deployment.worker_metrics()
    retries = "memory_pool_flush_retries_total"
    cause = {"cause": "embedding_rate_limited"}
    assert value(after, retries, **cause) - value(before, retries, **cause) == 1
    errors = "memory_pool_embedding_errors_total"
    assert value(after, errors, status="429") - value(before, errors, status="429") == 1
    chunks = "memory_pool_flush_chunks_written_total"
    assert value(after, chunks) > value(before, chunks)


def test_the_backlog_falls_to_zero_after_a_flush(deployment: Deployment) -> None:
    deployment.save({"bot": "backlog", "messages": messages("bl", 4)})
    unwritten = "memory_pool_backlog_unwritten_messages"
    # An open chunk waits for its idle timer: nothing is stored until the flush.
    assert value(deployment.api_metrics(), unwritten, agent="backlog") == 4
    deployment.flush("backlog")

    def drained() -> bool:
        samples = deployment.api_metrics()
        return (
            value(samples, unwritten, agent="backlog") == 0
            and value(samples, "memory_pool_backlog_due_conversations") == 0
            and value(samples, "memory_pool_backlog_queued_tasks") == 0
        )

    wait_until(drained, 20, "the backlog to drain")
    samples = deployment.api_metrics()
    assert value(samples, "memory_pool_backlog_up") == 1


def test_recall_latency_hits_and_the_query_cache(deployment: Deployment) -> None:
    deployment.save({"bot": "Polaris", "messages": messages("recall", 3)})
    deployment.flush("Polaris")
    before = deployment.api_metrics()
    query = {"bot": "Polaris", "query_text": "how many ships did the lighthouse keeper count"}
    for _ in range(2):
        answer = deployment.http.post(f"{deployment.api_url}/retrieve", json=query)
        assert answer.status_code == 200 and answer.json()["hits"], answer.text
    empty = {"bot": "nobody-here", "query_text": "anything at all"}
    assert deployment.http.post(f"{deployment.api_url}/retrieve", json=empty).json()["hits"] == []
    after = deployment.api_metrics()

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    seconds = "memory_pool_retrieve_duration_seconds_count"
    assert moved(seconds, agent="Polaris", outcome="hits") == 2
    assert moved(seconds, outcome="empty") == 1
    assert moved("memory_pool_retrieve_hits_total", agent="Polaris") >= 2
    assert moved("memory_pool_retrieve_query_cache_total", result="hit") >= 1
    assert moved("memory_pool_qdrant_request_duration_seconds_count", operation="query") >= 2


def test_the_scheduler_counts_what_it_hands_out(deployment: Deployment) -> None:
    before = deployment.scheduler_metrics()
    deployment.save({"bot": "sweep", "messages": messages("sw", 2)})
    deployment.flush("sweep")
    time.sleep(0.2)
    after = deployment.scheduler_metrics()
    claimed = "memory_pool_scheduler_claimed_conversations_total"
    assert value(after, claimed) - value(before, claimed) >= 1
    assert value(after, "memory_pool_scheduler_ticks_total", outcome="ok") > 0


def test_each_worker_reports_every_flush_its_pool_ran(deployment: Deployment) -> None:
    # worker1 is a prefork pool of 2: its children's counts reach its one endpoint.
    for n in range(6):
        deployment.save({"bot": "sweep", "messages": messages(f"pool{n}", 2)})
    deployment.flush("sweep")
    for worker, port in deployment.workers:
        text = deployment.http.get(f"http://127.0.0.1:{port}/metrics").text
        counted = value(parse_metrics(text), "memory_pool_flush_tasks_total", outcome="ok")
        logged = len(FLUSH_DONE.findall(worker.log()))
        assert counted == logged, (worker.name, counted, logged)
    assert value(deployment.worker_metrics(), "memory_pool_flush_tasks_total") > 0


def test_edits_are_counted_and_so_are_the_chunks_they_rewrite(deployment: Deployment) -> None:
    window = messages("edits", 2)
    deployment.save({"bot": "Polaris", "messages": window})
    deployment.flush("Polaris")  # one chunk, written (open: a flush writes it again on change)
    name, rewritten = "memory_pool_save_messages_total", "memory_pool_chunks_rewritten_total"
    labels = {"agent": "Polaris", "source": "discord", "outcome": "edited"}
    before, workers_before = deployment.api_metrics(), deployment.worker_metrics()
    # a written closed chunk: long messages, its edit is rewritten by a worker
    long = messages("edits-closed", 2)
    for item in long:
        item["text"] = item["text"] + " and the sea was calm " * 20
    deployment.save({"bot": "Polaris", "messages": long})
    deployment.flush("Polaris")
    edited = [{**window[0], "text": "an edited turn about the lighthouse"},
              {**long[0], "text": "an edited long turn " * 20}]  # fmt: skip
    answer = deployment.save({"bot": "Polaris", "messages": edited}).json()
    assert answer["edited"] == 2
    assert value(deployment.api_metrics(), name, **labels) - value(before, name, **labels) == 2

    def moved() -> float:
        now = value(deployment.worker_metrics(), rewritten, reason="edit")
        return now - value(workers_before, rewritten, reason="edit")

    wait_until(lambda: moved() >= 1, timeout=20, what="the edit's rewrite")
    assert moved() == 1  # the open chunk is written again by its flush, not by a rewrite
