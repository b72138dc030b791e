"""Setting one failed conversation aside, so the rest of its flush task carries on.

What to do is judged by the pure table in workers/failures.py; this applies it in Redis (a
retry with backoff, a hold, or the quarantine) with the conversation's lease.
"""

from __future__ import annotations

import logging

from shared.ops import log_context
from shared.state.buffers import Buffers, Claim
from shared.state.conversation_meta import ConversationMeta
from shared.state.quarantine import FailOutcome, Quarantine
from workers.backoff import retry_delay
from workers.failures import (
    UNKNOWN_FAILURES_ALLOWED,
    Action,
    Verdict,
    judge,
    unknown_retry_delay,
)

log = logging.getLogger(__name__)

# A collection of another size or model, or an agent gone from the agents file: look again
# now and then, as fixing the configuration lets the held messages through.
BLOCKED_RETRY_SECONDS = 60.0


def set_aside(
    buffers: Buffers,
    quarantine: Quarantine,
    claim: Claim,
    info: ConversationMeta | None,
    error: Exception,
) -> Action:
    """Deal with one conversation's failure alone (`info`: its hash as the flush read it, None
    when it failed before reading it); returns what was done, with the action COUNT meaning
    it was retried (not yet quarantined)."""
    verdict = judge(error)
    where = f"agent {info.agent if info else '?'!r}, conversation {claim.conversation}"
    # Its lines carry the conversation as context fields (JSON logs filter on them).
    with log_context.bound(agent=info.agent if info else None, conversation=claim.conversation):
        if verdict.action is Action.RETRY:
            delay = retry_delay(info.attempts if info else 0, error)
            log.warning("flush of %s waits %.1fs: %s", where, delay, verdict.reason)
            buffers.release(claim, retry_in=delay, failed=True)
            return Action.RETRY
        if verdict.action is Action.HOLD:
            log.error("flush of %s is held: %s", where, verdict.reason)
            buffers.release(claim, retry_in=BLOCKED_RETRY_SECONDS, failed=False)
            return Action.HOLD
        return _count(quarantine, claim, info, verdict, error, where)


def _count(quarantine: Quarantine, claim: Claim, info: ConversationMeta | None, verdict: Verdict,
           error: Exception, where: str) -> Action:  # fmt: skip
    """A failure of the data (or unforeseen): counted, quarantined at the threshold."""
    once = verdict.action is Action.QUARANTINE
    failures = info.failures if info else 0
    outcome = quarantine.fail(
        claim,
        verdict.reason,
        threshold=1 if once else UNKNOWN_FAILURES_ALLOWED,
        retry_in=unknown_retry_delay(failures),
        # A flush that read the conversation knows its generation: a delete meanwhile (the
        # fix of a bad message, perhaps) is tried again, not quarantined on the old reason.
        generation=info.generation if info else "",
    )
    if outcome is FailOutcome.CHANGED:
        log.warning("flush of %s failed (%s) while a delete changed it; tried again now",
                    where, verdict.reason)  # fmt: skip
        return Action.RETRY
    quarantined = outcome is FailOutcome.QUARANTINED
    # The traceback of an unforeseen failure is what a fix needs; a known one has its reason.
    log.error("flush of %s failed (%s); %s", where, verdict.reason,
              "quarantined" if quarantined else f"failure {failures + 1}, tried again later",
              exc_info=None if once else error)  # fmt: skip
    return Action.QUARANTINE if quarantined else Action.COUNT
