"""Each write-path script (shared/state/scripts/*.lua) run against real Redis, table-driven: due
rules, dedupe, tombstones, held agents, generation checks and leases."""

from __future__ import annotations

import json
import time

import pytest
import redis

from shared.errors import AgentBlocked
from shared.format.messages import Message
from shared.state import keys
from shared.state.buffers import (
    AgentRef,
    Buffers,
    Claim,
    Commit,
    CommitOutcome,
    ConversationSettings,
    LeaseCheck,
    refresh_after_ms,
)
from shared.state.conversations import ConversationRef
from shared.state.quarantine import FailOutcome, Quarantine
from shared.state.scripts import SOURCES
from tests.support.buffer_save import IncomingMessage, buffer_save
from tests.support.marks import run_down as run_down_mark
from tests.support.marks import step_of

REF = ConversationRef(collection="mem_polaris", source="discord", channel_id="c1")
AGENT = AgentRef("Polaris", REF.collection)
QUIET = ConversationSettings(min_chars=100_000, gap_seconds=3600, idle_seconds=60)


@pytest.fixture
def buffers(r: redis.Redis) -> Buffers:
    return Buffers(r, dedupe_ttl_seconds=600, lease_seconds=30)


def now_ms() -> int:
    return int(time.time() * 1000)


def incoming(*messages: Message) -> list[IncomingMessage]:
    return [IncomingMessage(REF, message) for message in messages]


def msg(mid: str, ts: int, text: str = "hello there") -> Message:
    return Message(mid, text, ts, "A")


# --- save.lua: when a conversation becomes due ---------------------------------------------
# (settings, messages as (id, ms before now, text), due: "now" | "idle")
DUE_RULES = [
    ("quiet: waits for the idle timer", QUIET, [("a", 0, "hi")], "idle"),
    ("a chunk closes: due at once", ConversationSettings(10, 3600, 60),
     [("a", 0, "x" * 20)], "now"),
    ("a gap in time: due at once", ConversationSettings(100_000, 5, 60),
     [("a", 20_000, "hi"), ("b", 0, "hi")], "now"),
    ("an import: no idle timer of its own, the stored rule reads idle_ms",
     ConversationSettings(100_000, 3600, 60, idle_timer=False), [("a", 0, "hi")], "idle"),
]  # fmt: skip


@pytest.mark.parametrize(("conv", "sent", "due"), [case[1:] for case in DUE_RULES],
                         ids=[case[0] for case in DUE_RULES])  # fmt: skip
def test_save_schedules_the_flush(
    r: redis.Redis, buffers: Buffers, conv: ConversationSettings, sent: list, due: str
) -> None:
    before = now_ms()
    counts = buffer_save(
        buffers, AGENT, incoming(*(msg(i, before - ago, t) for i, ago, t in sent)), conv
    )
    assert (counts.accepted, counts.duplicates) == (len(sent), 0)
    score = r.zscore(keys.DUE, REF.key)
    assert score is not None
    if due == "now":
        assert before <= score <= now_ms()
    else:
        assert before + conv.idle_seconds * 1000 <= score <= now_ms() + conv.idle_seconds * 1000
    meta = r.hgetall(keys.meta(REF.key))
    assert meta["agent"] == "Polaris" and meta["source"] == "discord" and meta["channel"] == "c1"
    assert meta.get("noidle", "") == ("" if conv.idle_timer else "1")
    assert "cid" not in meta and "guild" not in meta  # empty fields are not written
    assert r.hget(keys.NAMES, REF.collection) == "Polaris"


def test_a_backing_off_conversation_keeps_its_retry_time(r: redis.Redis, buffers: Buffers) -> None:
    retry_at = now_ms() + 3_600_000
    r.hset(keys.meta(REF.key), "retry_at", retry_at)
    buffer_save(
        buffers, AGENT, incoming(msg("a", now_ms(), "x" * 20)), ConversationSettings(10, 5, 1)
    )
    assert r.zscore(keys.DUE, REF.key) == retry_at


def test_a_quarantined_conversation_buffers_but_is_not_scheduled(
    r: redis.Redis, buffers: Buffers
) -> None:
    r.zadd(keys.QUARANTINE, {REF.key: 1})
    assert buffer_save(buffers, AGENT, incoming(msg("a", now_ms())), QUIET).accepted == 1
    assert r.zscore(keys.DUE, REF.key) is None and r.llen(keys.buffer(REF.key)) == 1


# --- save.lua: dedupe, tombstones, held agents ----------------------------------------------
def test_dedupe_stores_once_and_a_resend_refreshes_the_ttl(
    r: redis.Redis, buffers: Buffers
) -> None:
    sent = incoming(msg("a", 1_000), msg("b", 2_000))
    first = buffer_save(buffers, AGENT, sent, QUIET)
    seen = keys.seen(REF.collection, REF.source, "a")
    run_down_mark(r, seen, 5_000, ttl_seconds=600)
    again = buffer_save(buffers, AGENT, sent, QUIET)
    assert (first.accepted, first.duplicates, again.accepted, again.duplicates) == (2, 0, 0, 2)
    assert r.ttl(seen) > 5  # re-sent: remembered for the full TTL again
    stored = [json.loads(raw) for raw in r.lrange(keys.buffer(REF.key), 0, -1)]
    assert [m["i"] for m in stored] == ["a", "b"]
    assert r.lrange(keys.buffer(REF.key), 0, -1)[0] == msg("a", 1_000).to_json()  # byte for byte
    assert r.hget(keys.meta(REF.key), "chars") == str(2 * msg("a", 0).size)


# The fixture's TTL is 600 s, so a mark's step is 6 s (1% of it; a minute for the default 30
# days). The clock is set 3 s into a step: (case, ms from the first save to the re-send, or the
# mark's state before it) -> whether the re-send writes the mark again with the full TTL.
STEP_MS = 6_000
NOW = 1_800_000_000_000 // STEP_MS * STEP_MS + 3_000
REFRESH = [
    ("later in the same step: left as it is (no write)", 2_000, False),
    ("in the next step: renewed to the full TTL", 4_000, True),
    ("nearly expired: renewed", 599_000, True),
    ("longer than the TTL (the setting since lowered): brought down to it", "longer", True),
    ("a tombstone: keeps no expiry", "tombstone", False),
]


@pytest.mark.parametrize(("later", "renewed"), [c[1:] for c in REFRESH],
                         ids=[c[0] for c in REFRESH])  # fmt: skip
def test_a_resend_renews_a_marker_once_a_step(
    r: redis.Redis, buffers: Buffers, monkeypatch: pytest.MonkeyPatch, later: int | str,
    renewed: bool,
) -> None:  # fmt: skip
    assert refresh_after_ms(600) == STEP_MS and refresh_after_ms(30 * 86_400) == 60_000
    seen = keys.seen(REF.collection, REF.source, "a")
    monkeypatch.setattr("shared.state.buffers._now_ms", lambda: NOW)
    assert buffer_save(buffers, AGENT, incoming(msg("a", 1_000)), QUIET).accepted == 1
    assert r.get(seen).split(" ")[2] == str(step_of(NOW + 600_000, 600))
    at = NOW
    if later == "tombstone":
        r.set(seen, keys.TOMBSTONE)
    elif later == "longer":
        # written under a TTL of 700 s: a step later than the one the re-send would write
        run_down_mark(r, seen, 700_000, ttl_seconds=600, now_ms=NOW)
    else:
        at = NOW + int(later)
        r.pexpire(seen, 600_000 - int(later))  # Redis' clock ran as the script's did
    value, before = r.get(seen), r.pttl(seen)
    monkeypatch.setattr("shared.state.buffers._now_ms", lambda: at)
    assert buffer_save(buffers, AGENT, incoming(msg("a", 1_000)), QUIET).duplicates == 1
    after = r.pttl(seen)
    if later == "tombstone":
        assert after == -1 and r.get(seen) == keys.TOMBSTONE
    elif renewed:
        assert 599_000 <= after <= 600_000
        assert r.get(seen).split(" ")[2] == str(step_of(at + 600_000, 600))
    else:
        assert before - 1_000 <= after <= before and r.get(seen) == value


def test_a_mark_of_the_version_before_is_written_once_in_steps(
    r: redis.Redis, buffers: Buffers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Marks written before steps hold their expiry in ms: the first re-send with the same text
    counts a duplicate and writes the mark in steps; the next one writes nothing."""
    monkeypatch.setattr("shared.state.buffers._now_ms", lambda: NOW)
    assert buffer_save(buffers, AGENT, incoming(msg("a", 1_000)), QUIET).accepted == 1
    seen = keys.seen(REF.collection, REF.source, "a")
    state, fingerprint, _, member = r.get(seen).split(" ", 3)
    r.set(seen, f"{state} {fingerprint} {NOW + 590_000} {member}", px=590_000)
    writes = []
    for _ in range(2):
        r.config_resetstat()
        assert buffer_save(buffers, AGENT, incoming(msg("a", 1_000)), QUIET).duplicates == 1
        writes.append(r.info("commandstats").get("cmdstat_set", {}).get("calls", 0))
    assert writes == [1, 0]
    assert r.get(seen) == f"{state} {fingerprint} {step_of(NOW + 600_000, 600)} {member}"
    assert r.pttl(seen) > 595_000


def test_a_tombstoned_id_never_returns_and_stays_tombstoned(
    r: redis.Redis, buffers: Buffers
) -> None:
    seen = keys.seen(REF.collection, REF.source, "gone")
    r.set(seen, "deleted")  # a tombstone: no expiry
    counts = buffer_save(buffers, AGENT, incoming(msg("gone", 1_000)), QUIET)
    assert (counts.accepted, counts.duplicates) == (0, 1)
    assert r.ttl(seen) == -1 and not r.exists(keys.buffer(REF.key))


def test_a_held_agent_is_refused_and_nothing_changes(r: redis.Redis, buffers: Buffers) -> None:
    r.set(keys.blocked(REF.collection), "held for review")
    with pytest.raises(AgentBlocked, match="held for review"):
        buffer_save(buffers, AGENT, incoming(msg("a", 1_000)), QUIET)
    assert sorted(r.keys("*")) == [keys.blocked(REF.collection)]


def test_save_lua_takes_its_arguments_by_name(r: redis.Redis) -> None:
    """The script's interface as its header documents it, called without the Python wrapper."""
    plan = {"now": 5_000, "ttl": 60, "collection": "mem_x", "meta_prefix": "m:",
            "buf_prefix": "b:", "groups": [{
        "meta": "m:conv", "buf": "b:conv", "convs": "cs", "member": "conv", "agent": "X",
        "fields": {"agent": "X", "source": "s"}, "min_chars": 100, "gap_ms": 10, "idle_ms": 10,
        "seen_prefix": "seen:", "ids": ["1", "2"], "fps": ["aa", "bb"], "short": [],
        "edit_prefix": "s:",
    }]}  # fmt: skip
    one = '{"i":"1","t":"one!!","s":"A","ts":4000,"z":3}'
    two = '{"i":"2","t":"two!!","s":"A","ts":4001,"z":5}'
    lines = f"{one}\n{two}"
    script_keys = ["due", "blocked", "names", "quarantine", "edits", "edits_due", "emptied"]
    assert r.eval(SOURCES["save"], 7, *script_keys, json.dumps(plan), lines) == [2, 0, 0, 0, 0]
    assert r.eval(SOURCES["save"], 7, *script_keys, json.dumps(plan), lines) == [0, 2, 0, 0, 0]
    assert r.lrange("b:conv", 0, -1) == lines.split("\n")
    assert r.ttl("seen:1") == 60 and r.get("seen:2") == "=b bb 65000 conv"
    assert r.zscore("due", "conv") == 5_010
    assert r.hgetall("m:conv") == {"agent": "X", "source": "s", "last": "5000", "newest": "4001",
                                   "chars": "8"}  # fmt: skip
    # the second one again with another text: an edit of the buffered message, in place
    plan["groups"][0]["fps"] = ["aa", "cc"]
    # (its speaker and time stay the first version's; its size is its new text's with them)
    edited = f'{one}\n{{"i":"2","t":"TWO!!!","s":"Bob","ts":9,"z":7}}'
    assert r.eval(SOURCES["save"], 7, *script_keys, json.dumps(plan), edited) == [0, 1, 1, 0, 0]
    assert r.lindex("b:conv", 1) == '{"i":"2","t":"TWO!!!","s":"A","ts":4001,"z":5}'


# --- claim / begin / renew / commit / settle / release: leases and generations ----------------
def due_conversation(r: redis.Redis, buffers: Buffers, n: int = 2) -> None:
    buffer_save(buffers, AGENT, incoming(*(msg(f"m{i}", 1_000 + i) for i in range(n))), QUIET)
    r.zadd(keys.DUE, {REF.key: 0})


def test_a_claimed_conversation_is_leased_to_one_worker(r: redis.Redis, buffers: Buffers) -> None:
    due_conversation(r, buffers)
    [claim] = buffers.claim_due(10)
    assert claim.conversation == REF.key and r.get(keys.lease(REF.key)) == claim.token
    assert buffers.claim_due(10) == []  # held: looked at again when the lease would expire
    assert r.zscore(keys.DUE, REF.key) > now_ms() + 20_000
    assert buffers.begin(Claim(REF.key, "someone-else")) is None
    state = buffers.begin(claim)
    assert state is not None and [m.id for m in state.messages] == ["m0", "m1"]


def test_a_quarantined_due_conversation_is_not_claimed(r: redis.Redis, buffers: Buffers) -> None:
    due_conversation(r, buffers)
    r.zadd(keys.QUARANTINE, {REF.key: 1})
    assert buffers.claim_due(10) == [] and r.zscore(keys.DUE, REF.key) is None


# (a delete runs before the step?, the lease is someone else's?) -> renew's answer
RENEW = [(False, False, LeaseCheck.KEPT), (True, False, LeaseCheck.CHANGED),
         (False, True, LeaseCheck.LOST)]  # fmt: skip


@pytest.mark.parametrize(("deleted", "stolen", "expected"), RENEW)
def test_renew_checks_lease_and_generation(
    r: redis.Redis, buffers: Buffers, deleted: bool, stolen: bool, expected: LeaseCheck
) -> None:
    due_conversation(r, buffers)
    [claim] = buffers.claim_due(10)
    state = buffers.begin(claim)
    assert state is not None
    if deleted:
        r.hincrby(keys.meta(REF.key), "gen", 1)
    if stolen:
        r.set(keys.lease(REF.key), "other")
    assert buffers.renew(state, ["p1"]) is expected
    inflight = r.hget(keys.meta(REF.key), "inflight")
    assert inflight == ('["p1"]' if expected is LeaseCheck.KEPT else None)


COMMIT = [(False, False, CommitOutcome.DONE), (True, False, CommitOutcome.CHANGED),
          (False, True, CommitOutcome.LEASE_LOST)]  # fmt: skip


@pytest.mark.parametrize(("deleted", "stolen", "expected"), COMMIT)
def test_commit_checks_lease_and_generation(
    r: redis.Redis, buffers: Buffers, deleted: bool, stolen: bool, expected: CommitOutcome
) -> None:
    due_conversation(r, buffers, n=3)
    [claim] = buffers.claim_due(10)
    state = buffers.begin(claim)
    assert state is not None
    r.hset(keys.meta(REF.key), "written", 5)
    if deleted:
        r.hincrby(keys.meta(REF.key), "gen", 1)
    if stolen:
        r.set(keys.lease(REF.key), "other")
    size = msg("m", 0).size
    commit = Commit(consumed=2, consumed_chars=2 * size, open_count=1, written=1,
                    idle_seconds=60, wrote_points=True, dead_letters=['{"dead":1}'])  # fmt: skip
    assert buffers.commit(state, commit) is expected
    meta = r.hgetall(keys.meta(REF.key))
    if expected is CommitOutcome.DONE:
        assert r.llen(keys.buffer(REF.key)) == 1 and meta["written"] == "1"
        assert meta["chars"] == str(size) and r.lrange(keys.DEAD_LETTERS, 0, -1) == ['{"dead":1}']
        assert r.zscore(keys.DUE, REF.key) is None  # only the stored open chunk is left
        assert not r.exists(keys.lease(REF.key))
    else:
        assert r.llen(keys.buffer(REF.key)) == 3 and not r.exists(keys.DEAD_LETTERS)
        assert meta["written"] == ("0" if expected is CommitOutcome.CHANGED else "5")
        assert r.exists(keys.lease(REF.key))  # CHANGED: kept to take the points back


@pytest.mark.parametrize("failed", [False, True])
def test_release_reschedules_and_counts_failures(
    r: redis.Redis, buffers: Buffers, failed: bool
) -> None:
    due_conversation(r, buffers)
    [claim] = buffers.claim_due(10)
    assert buffers.release(claim, retry_in=100, failed=failed)
    assert not buffers.release(claim, retry_in=100, failed=failed)  # no longer ours
    meta = r.hgetall(keys.meta(REF.key))
    due = r.zscore(keys.DUE, REF.key)
    assert due is not None and due > now_ms() + 90_000 and not r.exists(keys.lease(REF.key))
    assert ("attempts" in meta, "retry_at" in meta) == (failed, failed)
    if failed:
        assert meta["retry_at"] == str(int(due))


# quarantine_fail.lua: (failures before, threshold, the flush read generation?, a delete
# meanwhile?, the lease someone else's?) -> its answer
FAIL = [
    (0, 3, True, False, False, FailOutcome.RETRIED),
    (2, 3, True, False, False, FailOutcome.QUARANTINED),
    (0, 1, False, False, False, FailOutcome.QUARANTINED),
    (2, 3, True, True, False, FailOutcome.CHANGED),
    (2, 3, False, True, False, FailOutcome.QUARANTINED),  # no generation read: no check
    (0, 3, True, False, True, FailOutcome.LEASE_LOST),
]


@pytest.mark.parametrize(("before", "threshold", "read", "deleted", "stolen", "expected"), FAIL)
def test_a_failed_flush_is_counted_retried_or_quarantined(
    r: redis.Redis,
    buffers: Buffers,
    before: int,
    threshold: int,
    read: bool,
    deleted: bool,
    stolen: bool,
    expected: FailOutcome,
) -> None:
    due_conversation(r, buffers)
    [claim] = buffers.claim_due(10)
    meta = keys.meta(REF.key)
    r.hset(meta, mapping={"failures": before, "gen": 4})
    if deleted:
        r.hincrby(meta, "gen", 1)
    if stolen:
        r.set(keys.lease(REF.key), "other")
    generation = "4" if read else ""
    outcome = Quarantine(r).fail(
        claim, "the reason", threshold=threshold, retry_in=100, generation=generation
    )
    assert outcome is expected
    state = r.hgetall(meta)
    due = r.zscore(keys.DUE, REF.key)
    quarantined = r.zscore(keys.QUARANTINE, REF.key) is not None
    assert quarantined == (expected is FailOutcome.QUARANTINED)
    assert r.exists(keys.lease(REF.key)) == (expected is FailOutcome.LEASE_LOST)
    assert int(state["failures"]) == before + (expected in (FailOutcome.RETRIED,
                                                             FailOutcome.QUARANTINED))  # fmt: skip
    if expected is FailOutcome.QUARANTINED:
        assert state["quarantined"] == "the reason" and due is None
    elif expected is FailOutcome.RETRIED:
        assert due is not None and due > now_ms() + 90_000
        assert state["retry_at"] == str(int(due))
    elif expected is FailOutcome.CHANGED:
        assert due is not None and due <= now_ms()


def test_settle_forgets_the_points_of_an_unfinished_flush(r: redis.Redis, buffers: Buffers) -> None:
    due_conversation(r, buffers)
    [claim] = buffers.claim_due(10)
    r.hset(keys.meta(REF.key), mapping={"inflight": '["p"]', "written": 2})
    assert not buffers.settle(Claim(REF.key, "other"))
    assert buffers.settle(claim)
    meta = r.hgetall(keys.meta(REF.key))
    assert "inflight" not in meta and meta["written"] == "0"


def test_force_marks_only_conversations_with_buffered_messages(
    r: redis.Redis, buffers: Buffers
) -> None:
    due_conversation(r, buffers)
    r.sadd(keys.conversations(REF.collection), "mem_polaris:discord:chan%3Dempty")
    before = now_ms()
    assert buffers.force_flush(REF.collection) == sorted(
        r.smembers(keys.conversations(REF.collection))
    )
    assert r.hget(keys.meta(REF.key), "force") == "1"
    assert r.zscore(keys.DUE, REF.key) == 0  # already due earlier: kept
    r.zadd(keys.DUE, {REF.key: before + 10_000})
    buffers.force_flush(REF.collection)
    assert before <= r.zscore(keys.DUE, REF.key) <= now_ms()


def test_newlines_unicode_and_odd_ids_are_stored_byte_for_byte(
    r: redis.Redis, buffers: Buffers
) -> None:
    odd = [Message("a:b%c", "line one\nline two\r\n", 1_000, "Zoë"),
           Message("ид", "🎉 \u2028 and \\n", 2_000, "B", user_id="u1", is_self=True)]  # fmt: skip
    assert buffer_save(buffers, AGENT, incoming(*odd), QUIET).accepted == 2
    assert r.lrange(keys.buffer(REF.key), 0, -1) == [m.to_json() for m in odd]
    assert r.exists(*(keys.seen(REF.collection, REF.source, m.id) for m in odd)) == 2
    assert r.hget(keys.meta(REF.key), "chars") == str(sum(m.size for m in odd))
    assert buffer_save(buffers, AGENT, incoming(*odd), QUIET).duplicates == 2


def test_an_edit_finds_its_message_deep_in_a_long_buffer(r: redis.Redis, buffers: Buffers) -> None:
    """The save script looks for an edited message from the newest back, a page at a time: one
    far from the end (an outage grew the buffer) is found all the same."""
    sent = [msg(f"m{i}", 1_000 + i) for i in range(150)]
    assert buffer_save(buffers, AGENT, incoming(*sent), QUIET).accepted == 150
    old = sent[3]
    changed = Message(id=old.id, text="a new text for it", ts=old.ts, speaker=old.speaker)
    again = buffer_save(buffers, AGENT, incoming(changed, sent[140]), QUIET)
    assert (again.edited, again.duplicates) == (1, 1)
    stored = [Message.from_json(raw) for raw in r.lrange(keys.buffer(REF.key), 0, -1)]
    assert stored[3].text == "a new text for it" and len(stored) == 150
    assert [m.id for m in stored] == [m.id for m in sent]
