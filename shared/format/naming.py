"""Names and identities: collection names, speaker names and deterministic point ids."""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Mapping

from shared.errors import InvalidAgentName

COLLECTION_BASE = "mem"
DEFAULT_USER_SPEAKER = "User"

# Qdrant refuses collection names over 255 characters or with any of these characters; each
# collection is a folder on disk, so 255 bytes (UTF-8) is the file system's limit as well.
MAX_COLLECTION_CHARS = 255
_QDRANT_REFUSED = frozenset('<>:"/\\|?*\x00\x1f')
# An agent name is a key in requests, Redis and /health: one line of valid Unicode.
MAX_AGENT_NAME_CHARS = 255
_UNWRITABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

# st-qdrant-memory's rule: lower-case, anything outside [a-z0-9_-] becomes "_", runs of "_" collapse
# to one, and one leading and one trailing "_" go.
_OUTSIDE_ALLOWED = re.compile(r"[^a-z0-9_-]")
_UNDERSCORE_RUN = re.compile(r"_+")

# Fixed namespace so every writer derives the same point id for the same chunk identity.
POINT_NAMESPACE = uuid.UUID("6f1c0b7e-3d0a-5c4e-9a55-6d656d706f6f")


def sanitize_agent_name(name: str) -> str:
    """The st-qdrant-memory form of a character name, without the collection base."""
    cleaned = _UNDERSCORE_RUN.sub("_", _OUTSIDE_ALLOWED.sub("_", name.lower()))
    cleaned = cleaned.removeprefix("_")
    return cleaned.removesuffix("_")


def _shown(name: str) -> str:
    return repr(name if len(name) <= 64 else name[:64] + "…")


def collection_problem(collection: str) -> str | None:
    """Why Qdrant (server or local mode) could not create or write this collection, or None."""
    if not collection:
        return "is empty"
    size = len(collection.encode("utf-8", "surrogatepass"))
    if len(collection) > MAX_COLLECTION_CHARS or size > MAX_COLLECTION_CHARS:
        return f"is {size} bytes long; Qdrant allows {MAX_COLLECTION_CHARS}"
    refused = sorted({c for c in collection if c in _QDRANT_REFUSED})
    if refused:
        return f"contains {''.join(refused)!r}, which Qdrant refuses in collection names"
    if _UNWRITABLE.search(collection) or collection.strip() in ("", ".", ".."):
        return "is not a usable folder name (control characters, dots only, or blank)"
    return None


def _check_agent_name(agent_name: str) -> None:
    if len(agent_name) > MAX_AGENT_NAME_CHARS:
        raise InvalidAgentName(
            f"agent name {_shown(agent_name)} is {len(agent_name)} characters long; "
            f"the limit is {MAX_AGENT_NAME_CHARS}"
        )
    if _UNWRITABLE.search(agent_name):
        raise InvalidAgentName(
            f"agent name {_shown(agent_name)} contains control characters or lone surrogates"
        )


# Asked several times per /save (the agent's lookup, its listing, its conversations) for the
# same few names; bounded, so a stream of made-up names only cycles it. Refusals (raised) are
# not kept.
@functools.lru_cache(maxsize=4096)
def collection_name(agent_name: str, collection: str | None = None) -> str:
    """The Qdrant collection of an agent: the configured one, else st-qdrant-memory's name.

    Raises InvalidAgentName for a name or collection that Qdrant could never write, so such
    an agent is refused at the door instead of blocking flushes later.
    """
    _check_agent_name(agent_name)
    if collection:
        problem = collection_problem(collection)
        if problem:
            raise InvalidAgentName(f"collection {_shown(collection)} {problem}")
        return collection
    sanitized = sanitize_agent_name(agent_name)
    if not sanitized:
        raise InvalidAgentName(
            f"agent name {agent_name!r} has no letters or digits in [a-z0-9_-], so it would "
            f"become the collection {COLLECTION_BASE + '_'!r}; set `collection` for this agent"
        )
    name = f"{COLLECTION_BASE}_{sanitized}"
    if len(name) > MAX_COLLECTION_CHARS:
        raise InvalidAgentName(
            f"agent name {_shown(agent_name)} would become a collection name of {len(name)} "
            f"characters; Qdrant allows {MAX_COLLECTION_CHARS}: use a shorter name"
        )
    return name


def speaker_name(
    *,
    is_self: bool,
    self_speaker: str,
    speaker_aliases: Mapping[str, str],
    user_id: str | None,
    given_name: str | None,
) -> str:
    """Who a message is from, as the chunk text names them (Format.md, "Speaker names")."""
    if is_self:
        return self_speaker
    if user_id and user_id in speaker_aliases:
        return speaker_aliases[user_id]
    if given_name and given_name.strip():
        return given_name.strip()
    if user_id:
        return user_id
    return DEFAULT_USER_SPEAKER


def point_id(collection: str, source: str, first_message_id: str) -> str:
    """A chunk's point id: fixed by its collection, source and first message, never recomputed.

    The source is part of the identity because message ids are only unique per agent and source
    (the dedupe key), so two interfaces using the same id must not overwrite each other's chunks.
    """
    return str(uuid.uuid5(POINT_NAMESPACE, f"{collection}\x1f{source}\x1f{first_message_id}"))
