"""memory-pool's Lua scripts, one file each, read once when this package is imported.

Each script heads its file with the KEYS and ARGV it takes and what it returns. The write path's
scripts take their arguments by name: ARGV[1] is one JSON table (cjson-decoded by the script);
stored message JSON that must stay byte for byte follows as further ARGV, referenced from that
table. The small ones (a lock's release, a dead letter's move) take one or two ARGV, or a list,
each named in their heading.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import pydantic_core

_NAMES = (
    # the write path
    "save", "claim", "begin", "renew", "commit", "settle", "release", "force",
    # deletes, quarantine, dead letters, locks, moving, upgrades, the backlog gauges
    "dead_letter_move", "dead_letter_replace", "quarantine_fail", "quarantine_release",
    "quarantine_drop", "lock_release", "forget", "forget_emptied", "upgrade_move_seen",
    "upgrade_move_conversation", "marks_restore", "backlog_read",
    # edits of written chunks (workers/edits.py)
    "edit_done", "edit_restore", "invalidate", "emptied_sweep",
)  # fmt: skip


def named(values: dict[str, Any]) -> str:
    """A script's named arguments: one JSON table, cjson-decoded by the script (written by
    pydantic's Rust encoder: the save plan is built on every /save)."""
    return pydantic_core.to_json(values).decode()


# Scripts that change buffered messages share one library, prepended to their text (a Redis
# script cannot load another).
_WITH_MESSAGE_LIB = ("save", "edit_restore")


def _read(name: str) -> str:
    return resources.files(__name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


SOURCES: dict[str, str] = {
    name: (_read("message_lib") + "\n" if name in _WITH_MESSAGE_LIB else "") + _read(name)
    for name in _NAMES
}
