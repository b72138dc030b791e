"""Names and identities: collection names, speaker names and deterministic point ids."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

from shared.errors import InvalidAgentName

COLLECTION_BASE = "mem"
DEFAULT_USER_SPEAKER = "User"

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


def collection_name(agent_name: str, collection: str | None = None) -> str:
    """The Qdrant collection of an agent: the configured one, else st-qdrant-memory's name."""
    if collection:
        return collection
    sanitized = sanitize_agent_name(agent_name)
    if not sanitized:
        raise InvalidAgentName(
            f"agent name {agent_name!r} has no letters or digits in [a-z0-9_-], so it would "
            f"become the collection {COLLECTION_BASE + '_'!r}; set `collection` for this agent"
        )
    return f"{COLLECTION_BASE}_{sanitized}"


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
