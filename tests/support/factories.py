"""Test factories: messages and chunks built the way the pipeline builds them."""

from __future__ import annotations

from shared.format.messages import Message

# 2024-06-10T06:13:20Z, a fixed moment so dates in golden strings never drift.
BASE_TS = 1_718_000_000_000


def msg(
    mid: str,
    text: str = "hello there",
    *,
    ts: int | None = None,
    speaker: str = "Alex",
    user_id: str | None = None,
    is_self: bool = False,
) -> Message:
    """A resolved message; without `ts` it is one second after the previous default."""
    return Message(
        id=mid,
        text=text,
        ts=BASE_TS if ts is None else ts,
        speaker=speaker,
        user_id=user_id,
        is_self=is_self,
    )
