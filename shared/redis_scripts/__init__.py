"""The write path's Lua scripts, one file each, read once when this package is imported.

Each script heads its file with the KEYS and ARGV it takes and what it returns. Arguments travel by
name: ARGV[1] is one JSON table (cjson-decoded by the script); stored message JSON that must stay
byte for byte follows as further ARGV, referenced from that table.
"""

from __future__ import annotations

from importlib import resources

_NAMES = ("save", "claim", "begin", "renew", "commit", "settle", "release", "force")

SOURCES: dict[str, str] = {
    name: resources.files(__name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")
    for name in _NAMES
}
