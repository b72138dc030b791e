"""Importing SillyTavern chat files: read them, sort out what the collection holds, send the rest.

Imported messages take the live path: POST /save (source "sillytavern", one conversation per
chat file, no idle timer), then one flush, so the same chunker, dedupe and exactly-once rules
apply. A message the collection holds with another text (edited or swiped in SillyTavern since)
is sent as an edit (PATCH), an unchanged one not at all. Re-importing is always safe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from client.http_client import MemoryPoolClient, MemoryPoolError
from memory_pool.sillytavern import ChatFile, id_character, message_id, parse_chat, user_speaker
from shared.agents import AgentConfig
from shared.format.chunking import cut, is_storable
from shared.format.fingerprint import text_fingerprint
from shared.format.ids import clean_text
from shared.format.messages import Message
from shared.format.payload import chunk_text
from shared.format.timestamps import MAX_STORABLE_MS, MIN_STORABLE_MS, MS_THRESHOLD

SOURCE = "sillytavern"
BATCH_MESSAGES = 200  # per /save, well under the server's 500
BATCH_CHARS = 200_000  # and well under its 1,000,000 characters
KNOWN_IDS_BATCH = 5_000
FLUSH_TIMEOUT = 300.0  # the most one /flush call may wait
FLUSH_ATTEMPTS = 4
PREVIEW_CHUNKS = 3

SYSTEM, SHORT, BAD_DATE, BAD_LINE, REFUSED = (
    "system", "too short", "unparseable date", "unreadable line", "refused by the server",
)  # fmt: skip
REASONS = (SYSTEM, SHORT, BAD_DATE, BAD_LINE, REFUSED)
EDITED_OUTCOMES = ("edited", "emptied")  # emptied: edited too short to keep, it left its chunk

Echo = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message ready for /save, with speaker and id already decided."""

    id: str
    text: str
    ts: int
    is_user: bool
    speaker: str

    def body(self, conversation_id: str) -> dict[str, Any]:
        # /save reads epoch ms only above 1e12 (2001-09-09); older instants go as ISO 8601.
        ts: int | str = self.ts
        if self.ts <= MS_THRESHOLD:
            ts = datetime.fromtimestamp(self.ts / 1000, tz=UTC).isoformat()
        body: dict[str, Any] = {
            "message_id": self.id, "text": self.text, "ts": ts,
            "speaker_kind": "user" if self.is_user else "self",
            "conversation_id": conversation_id,
        }  # fmt: skip
        if self.is_user:
            body["speaker_name"] = self.speaker
        return body


@dataclass
class PlannedChat:
    chat: ChatFile
    outgoing: list[Outgoing]  # for /save
    edits: list[Outgoing] = field(default_factory=list)  # stored with another text: PATCH


@dataclass
class Summary:
    files: int = 0
    messages: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)  # "file:line: what"
    accepted: int = 0
    duplicates: int = 0
    edited: int = 0
    stale: int = 0  # edited in the chat, but their chunks cannot be rebuilt: old text kept
    chunks_written: int | None = None
    pending: int = 0  # conversations the last flush had not finished

    def lines(self) -> list[str]:
        skipped = ", ".join(f"{self.skipped[r]} {r}" for r in REASONS if self.skipped[r])
        out = [
            f"files: {self.files}, messages: {self.messages}",
            f"skipped: {sum(self.skipped.values())}" + (f" ({skipped})" if skipped else ""),
            f"accepted: {self.accepted}, duplicates: {self.duplicates}, edited: {self.edited}"
            + (f", stale: {self.stale} (their chunks cannot be rebuilt: they keep the old text)"
               if self.stale else ""),
        ]  # fmt: skip
        if self.chunks_written is not None:
            out.append(f"chunks written: {self.chunks_written}")
        if self.pending:
            out.append(f"still writing: {self.pending} conversations (they stay buffered)")
        return out


class ImportFailed(Exception):
    """A path that cannot be read; nothing was sent."""


def chat_files(paths: Sequence[Path]) -> list[Path]:
    """The chat files named: files as given, folders as their *.jsonl files in name order."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.glob("*.jsonl") if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise ImportFailed(f"{path}: no such file or folder")
    return list(dict.fromkeys(found))


def plan_chat(
    chat: ChatFile, agent: AgentConfig, persona: str | None, summary: Summary
) -> list[Outgoing]:
    """The messages of one chat to send, in file order; the rest counted with their reason."""
    user = user_speaker(persona, chat.header, agent.speaker_aliases)
    character = id_character(chat.header, agent.speaker)
    for problem in chat.problems:
        summary.skipped[BAD_LINE] += 1
        summary.problems.append(f"{chat.name}:{problem.line}: {problem.reason}")
    outgoing = []
    for message in chat.messages:
        summary.messages += 1
        if message.is_system:
            summary.skipped[SYSTEM] += 1
        elif message.ts is None or not MIN_STORABLE_MS <= message.ts <= MAX_STORABLE_MS:
            summary.skipped[BAD_DATE] += 1
            why = "unparseable" if message.ts is None else "outside the years 1970-9999:"
            summary.problems.append(
                f"{chat.name}:{message.line}: {why} send_date {message.send_date!r}"
            )
        else:
            outgoing.append(
                Outgoing(
                    id=message_id(chat, message, character),
                    text=message.text,
                    ts=message.ts,
                    is_user=message.is_user,
                    speaker=user if message.is_user else agent.speaker,
                )
            )
    return outgoing


def read_chats(
    paths: Sequence[Path], agent: AgentConfig, persona: str | None
) -> tuple[list[PlannedChat], Summary]:
    summary = Summary()
    plans = []
    for path in chat_files(paths):
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ImportFailed(f"{path}: cannot read it as UTF-8 text: {exc}") from exc
        chat = parse_chat(path.name, lines)
        summary.files += 1
        plans.append(PlannedChat(chat, plan_chat(chat, agent, persona, summary)))
    return plans, summary


def _batches(items: Sequence[Outgoing]) -> Iterator[list[Outgoing]]:
    batch: list[Outgoing] = []
    chars = 0
    for item in items:
        if batch and (len(batch) >= BATCH_MESSAGES or chars + len(item.text) > BATCH_CHARS):
            yield batch
            batch, chars = [], 0
        batch.append(item)
        chars += len(item.text)
    if batch:
        yield batch


def stored_fingerprint(text: str) -> str:
    """The fingerprint of a text as /save stores it: cleaned and trimmed (api/ingest.py)."""
    return text_fingerprint(clean_text(text).strip())


def sort_known(
    client: MemoryPoolClient, bot: str, plans: list[PlannedChat], summary: Summary
) -> None:
    """Take out of /save the messages the collection already holds, whoever wrote them
    (st-qdrant-memory's indexed chats, earlier imports whose dedupe marks may have expired):
    the ones stored with another text are edits; the rest are duplicates, also those whose
    chunk keeps no text to compare (st-qdrant-memory's, or written before edits were kept)."""
    ids = sorted({item.id for plan in plans for item in plan.outgoing})
    known: dict[str, str | None] = {}
    for start in range(0, len(ids), KNOWN_IDS_BATCH):
        batch = ids[start : start + KNOWN_IDS_BATCH]
        known.update(client.known_fingerprints(bot, batch, source=SOURCE))
    for plan in plans:
        kept = []
        for item in plan.outgoing:
            if item.id not in known:
                kept.append(item)
            elif known[item.id] in (None, stored_fingerprint(item.text)):
                summary.duplicates += 1
            else:
                plan.edits.append(item)
        plan.outgoing = kept


def _sillytavern_points(client: MemoryPoolClient, bot: str) -> int:
    return int(client.stats(bot)["points_by_source"].get(SOURCE, 0))


def _flush(client: MemoryPoolClient, bot: str) -> int:
    """Write the last open chunk of every file; the conversations still unwritten."""
    pending = 0
    for _ in range(FLUSH_ATTEMPTS):
        answer = client.flush(bot, wait=True, timeout=FLUSH_TIMEOUT)
        pending = int(answer.get("pending", 0))
        if answer.get("done"):
            return 0
    return pending


def _count_refusals(counts: dict[str, Any], chat: str, summary: Summary) -> None:
    """The server's per-message refusals (an older server never sends any)."""
    summary.skipped[REFUSED] += int(counts.get("refused", 0))
    for refusal in counts.get("refusals", []):
        summary.problems.append(f"{chat}: message {refusal.get('message_id')!r}: "
                                f"{refusal.get('reason')}")  # fmt: skip


def _count_saved(counts: dict[str, Any], chat: str, summary: Summary) -> None:
    summary.accepted += counts["accepted"]
    summary.duplicates += counts["duplicates"]
    summary.skipped[SHORT] += counts["skipped"]
    # a buffered message edited since: its mark tells /save (a server before #25 sends neither)
    summary.edited += int(counts.get("edited", 0))
    summary.stale += int(counts.get("stale", 0))
    _count_refusals(counts, chat, summary)


def _send_edit(client: MemoryPoolClient, bot: str, item: Outgoing, chat: str,
               summary: Summary) -> None:  # fmt: skip
    """PATCH, not /save: /save tells an edit by the message's dedupe mark, which expires after
    the dedupe window, and would then take a stored message for a new one and store it twice;
    PATCH finds it in the store."""
    try:
        outcome = client.edit(bot, item.id, item.text, source=SOURCE)["outcome"]
    except MemoryPoolError as exc:
        if exc.status not in (404, 410):
            raise
        # gone since it was looked up; a deleted id stays deleted (a /save counts it duplicate)
        if exc.status == 410:
            summary.duplicates += 1
        else:
            summary.skipped[REFUSED] += 1
            summary.problems.append(f"{chat}: message {item.id!r}: {exc.detail}")
        return
    if outcome in EDITED_OUTCOMES:
        summary.edited += 1
    elif outcome == "stale":
        summary.stale += 1
    else:  # unchanged: it took this text meanwhile
        summary.duplicates += 1


def _send(client: MemoryPoolClient, bot: str, plan: PlannedChat, summary: Summary,
          bar: tqdm) -> None:  # fmt: skip
    """One chat's edits, then its messages for /save, in file order."""
    for item in plan.edits:
        _send_edit(client, bot, item, plan.chat.name, summary)
        bar.update(1)
    for batch in _batches(plan.outgoing):
        bodies = [item.body(plan.chat.name) for item in batch]
        counts = client.save(bot, bodies, source=SOURCE, batch_import=True)
        _count_saved(counts, plan.chat.name, summary)
        bar.update(len(batch))
        bar.set_postfix(accepted=summary.accepted, duplicates=summary.duplicates,
                        edited=summary.edited)  # fmt: skip


def run_import(
    client: MemoryPoolClient, bot: str, plans: list[PlannedChat], summary: Summary
) -> Summary:
    """Send every planned message and edit in file order, flush once, and count the chunks
    written (edits rewrite theirs in place, in the background)."""
    before = _sillytavern_points(client, bot)
    sort_known(client, bot, plans, summary)
    total = sum(len(plan.outgoing) + len(plan.edits) for plan in plans)
    with tqdm(total=total, unit="msg", desc="importing", dynamic_ncols=True) as bar:
        for plan in plans:
            _send(client, bot, plan, summary, bar)
    summary.pending = _flush(client, bot)
    summary.chunks_written = _sillytavern_points(client, bot) - before
    return summary


def preview(plans: list[PlannedChat], agent: AgentConfig, summary: Summary) -> list[str]:
    """What an import would store, cut by the shared chunker; nothing is sent or checked
    against the server (its collection and dedupe marks may hold some of it already)."""
    rules = agent.rules
    out: list[str] = []
    texts: list[str] = []
    total = 0
    for plan in plans:
        storable = [item for item in plan.outgoing if is_storable(item.text, rules)]
        summary.skipped[SHORT] += len(plan.outgoing) - len(storable)
        messages = [
            Message(id=i.id, text=i.text, ts=i.ts, speaker=i.speaker, is_self=not i.is_user)
            for i in storable
        ]
        cutting = cut(messages, rules)
        chunks = [*cutting.closed, *([cutting.open] if cutting.open else [])]
        total += len(chunks)
        out.append(f"{plan.chat.name}: {len(storable)} messages to store, {len(chunks)} chunks")
        texts.extend(chunk_text(chunk) for chunk in chunks[: PREVIEW_CHUNKS - len(texts)])
    out.append(f"dry run: {total} chunks would be stored (nothing was sent)")
    for number, text in enumerate(texts, start=1):
        out.append(f"--- chunk {number} ---\n{text}")
    return out
