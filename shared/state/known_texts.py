"""The re-sent messages whose text Redis confirmed a moment ago, remembered by one API process so
that /save leaves them out of the save script.

The Discord plugin re-sends a channel's last 30 messages on every turn, 28 of them known and
unchanged: reading each one's mark in the script was most of /save's Redis work (BENCHMARKS.md
1.8). A message left out counts as the script would count it (a duplicate, or skipped when too
short), which holds while its mark still holds its text:

- Every change of a mark's text goes through the save script, which then gives the mark's
  conversation a new epoch (a token never used before, in Redis). A message is left out only
  under the epoch it was confirmed in, and the script refuses the call, changing nothing, when
  an epoch it was told is no longer the conversation's (`EpochMoved`): the caller sends it all.
- A message is confirmed only in its mark's own conversation, and never when its id comes twice
  in one request (the script's order decides those).
- A confirmation lasts half the time after which the script renews a re-sent id's expiry
  (`refresh_after_ms`), so the mark outlives it, and a re-sent id is still renewed to within a
  step and a half of that interval.
- A deleted id or a mark that expired counts the same whether or not it is left out (a deleted
  id is a duplicate whatever its text; a confirmation ends long before the mark's expiry).

Pure: the Redis side is save.lua and shared/state/buffers.py's save_call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.state.buffers import ConversationBatch, SaveReply

# Bounded: a process's recent conversations (100 Discord channels hold 3,000 ids); when full, it
# starts over (about 200 bytes an entry).
MAX_ENTRIES = 65_536


class _Epoch:
    """A conversation's epoch as this process last heard it, with the texts confirmed under it
    (message id -> (fingerprint, until ms)). An epoch moved by this process's own edits (whose
    ids the reply settles one by one) keeps them; one moved by other hands starts empty."""

    __slots__ = ("texts", "token")

    def __init__(self, token: str) -> None:
        self.token = token
        self.texts: dict[str, tuple[str, int]] = {}


@dataclass(slots=True)
class Split:
    """A save's batches with the confirmed messages left out, and how those count."""

    sent: list[ConversationBatch]
    assumed: list[str]  # per sent batch: the epoch its left-out ids hold under, "" for none
    members: list[str]  # per sent batch: its conversation key
    repeated: frozenset[str]  # ids that come more than once in the request
    duplicates: int = 0
    skipped: int = 0


def _repeated(batches: Sequence[ConversationBatch]) -> frozenset[str]:
    ids = [message_id for batch in batches for message_id in batch.ids]
    if len(set(ids)) == len(ids):
        return frozenset()
    seen: set[str] = set()
    return frozenset(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]


class KnownTexts:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._epochs: dict[str, _Epoch] = {}  # conversation key -> its epoch and texts
        self._size = 0  # conversations and confirmations added since the last start over
        self._max = max_entries

    def conversations(self) -> int:
        return len(self._epochs)

    def __len__(self) -> int:
        return sum(len(epoch.texts) for epoch in self._epochs.values())

    def split(
        self, batches: Sequence[ConversationBatch], now_ms: int, *, leave_out: bool = True
    ) -> Split:
        """What to send: each batch without its messages confirmed under the conversation's
        epoch with the same text and not expired (`leave_out` False: all of them)."""
        repeated = _repeated(batches)
        split = Split([], [], [], repeated)
        for batch in batches:
            member = batch.conversation.key
            epoch = self._epochs.get(member) if leave_out else None
            split.members.append(member)
            if epoch is None or not epoch.token:
                split.sent.append(batch)
                split.assumed.append("")
                continue
            # A comprehension, not a loop of appends: this runs for every message of every
            # /save (about a microsecond a message less).
            get, ids, fps = epoch.texts.get, batch.ids, batch.fingerprints
            kept = [n for n, (message_id, fp) in enumerate(zip(ids, fps, strict=True))
                    if (entry := get(message_id)) is None or entry[0] != fp
                    or entry[1] <= now_ms or message_id in repeated]  # fmt: skip
            if len(kept) == len(ids):
                split.sent.append(batch)
                split.assumed.append("")
                continue
            short = batch.short
            if short:
                at = set(short)
                short_left = sum(1 for n in range(len(ids)) if n + 1 in at) - sum(
                    1 for n in kept if n + 1 in at
                )
                split.skipped += short_left
                split.duplicates += len(ids) - len(kept) - short_left
                short = [k + 1 for k, n in enumerate(kept) if n + 1 in at]
            else:
                split.duplicates += len(ids) - len(kept)
            lines = batch.lines
            split.sent.append(ConversationBatch(
                batch.conversation, [ids[n] for n in kept], [lines[n] for n in kept],
                batch.guild_id, [fps[n] for n in kept], short,
            ))  # fmt: skip
            split.assumed.append(epoch.token)
        return split

    def record(self, split: Split, reply: SaveReply, until_ms: int) -> None:
        """What the script confirmed: each sent id coded 'k' holds its text until `until_ms`;
        any other sent id is forgotten. A conversation whose epoch moved by other hands than
        this reply's own ids starts afresh."""
        if self._size > self._max:
            self._epochs.clear()
            self._size = 0
        known, repeated = reply.known, split.repeated
        pos = 0
        sent = [
            (b, m)
            for b, m, a in zip(split.sent, split.members, split.assumed, strict=True)
            if b.ids or a
        ]  # fmt: skip  (the groups save_call sent, in order)
        for (batch, member), line in zip(sent, reply.epochs, strict=True):
            start, end, moved_by = line.split(" ")
            epoch = self._epochs.get(member)
            if epoch is not None and epoch.token == start and (start == end or moved_by == "o"):
                epoch.token = end  # only this reply's ids changed: the others still hold
            else:
                epoch = self._epochs[member] = _Epoch(end)
                self._size += 1  # a conversation counts as one, confirmed texts or not
            texts = epoch.texts
            before = len(texts)
            for n, message_id in enumerate(batch.ids):
                if known[pos + n] == "k" and message_id not in repeated:
                    texts[message_id] = (batch.fingerprints[n], until_ms)
                else:
                    texts.pop(message_id, None)
            self._size += max(0, len(texts) - before)
            pos += len(batch.ids)
