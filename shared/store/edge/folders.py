"""The data folder of the embedded engine: a folder per collection's shard, its metadata (what
Qdrant keeps as collection metadata: model, vector size, BM25 encoding) in `<folder>.json` beside
it, and the names of both. A name that is no plain folder name gets a folder named by its digest,
and the metadata records the name."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

# A collection name used as it is for its folder (every name memory-pool derives is one); room
# is left for the ".json" beside it within the file system's 255 bytes.
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,245}")
# Any other name's folder: this prefix (never the start of a safe name) and its digest.
DIGEST_PREFIX = "~"
# local_migration.py's record in the same folder: no collection's metadata may take its name.
MIGRATION_MARKER = "migrated-from-local-mode.json"


def plain(folder: str) -> bool:
    """Whether this is a collection's own name as its folder name."""
    return (
        SAFE_NAME.fullmatch(folder) is not None
        and folder not in (".", "..")
        and f"{folder}.json" != MIGRATION_MARKER
    )


def folder_of(name: str) -> str:
    """A collection's folder name: the name itself when it is plain, else its digest."""
    if plain(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return DIGEST_PREFIX + digest


class DataFolder:
    """Where each collection's shard and metadata live under one root; no locking of its own
    (the store holds its lock around every change)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def shard_path(self, name: str) -> Path:
        return self.root / folder_of(name)

    def has_shard(self, name: str) -> bool:
        """A folder left empty by a failed create holds no shard."""
        path = self.shard_path(name)
        return path.is_dir() and any(path.iterdir())

    def meta_path(self, name: str) -> Path:
        return self.root / f"{folder_of(name)}.json"

    def collection_names(self) -> list[str]:
        """The collections of the shard folders: a digest folder's name as its metadata records."""
        names = []
        for path in self.root.iterdir():
            if not (path.is_dir() and any(path.iterdir())):
                continue
            if plain(path.name):
                names.append(path.name)
            elif path.name.startswith(DIGEST_PREFIX):
                recorded = read_metadata(self.root / f"{path.name}.json").get("name")
                if isinstance(recorded, str) and folder_of(recorded) == path.name:
                    names.append(recorded)
        return sorted(names)

    def metadata(self, name: str) -> dict[str, Any]:
        return read_metadata(self.meta_path(name))

    def record(self, name: str, /, **entries: Any) -> None:
        """Metadata merged key by key (as Qdrant does), written atomically: a crash leaves
        the old file or the new one, never half of one."""
        metadata = {**self.metadata(name), **entries}
        target = self.meta_path(name)
        temporary = target.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(metadata, sort_keys=True), encoding="utf-8")
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, target)


def read_metadata(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return loaded if isinstance(loaded, dict) else {}
