"""A buffered message's stored JSON: the same text json.dumps writes (older buffers were
written by it, and the Lua scripts read it), for any text."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.format.messages import Message

# Lone surrogates never reach a Message: the door replaces them (shared/format/ids.py).
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=1000, deadline=None)
@given(TEXT, TEXT, st.integers(-(2**62), 2**62), st.none() | TEXT, st.booleans())
def test_stored_json_is_what_json_dumps_writes(
    text: str, speaker: str, ts: int, user_id: str | None, is_self: bool
) -> None:
    message = Message(id=text[:20] or "m1", text=text, ts=ts, speaker=speaker,
                      user_id=user_id, is_self=is_self)  # fmt: skip
    record: dict[str, object] = {"i": message.id, "t": text, "s": speaker, "ts": ts,
                                 "z": message.size}  # fmt: skip
    if user_id is not None:
        record["u"] = user_id
    if is_self:
        record["me"] = 1
    assert message.to_json() == json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    assert Message.from_json(message.to_json()) == message
