"""The payload field names of a chunk (Format.md), as shared/format/payload.py writes them: the one
spelling every filter, index and reader uses."""

from __future__ import annotations

# st-qdrant-memory's fields
TEXT = "text"
SPEAKERS = "speakers"
MESSAGE_COUNT = "messageCount"
TIMESTAMP = "timestamp"
MESSAGE_IDS = "messageIds"  # comma-joined; st-qdrant-memory's only id field
IS_CHUNK = "isChunk"
# memory-pool's own fields
SOURCE = "source"
MESSAGE_ID_LIST = "messageIdList"  # keyword-indexed: exclusions and deletes match on it
USER_ID_LIST = "userIdList"
# The chunk's messages, one object each in text order ({"id", "speaker", "ts", "text"}, and
# "userId", "self" when set): what an edit or a delete rebuilds the chunk from, since its text
# cannot be parsed back (a message may hold newlines). Points without it (written before
# edits were kept, or by st-qdrant-memory) cannot be rebuilt.
CHUNK_MESSAGES = "chunkMessages"
CHANNEL_ID = "channelId"
GUILD_ID = "guildId"
CONVERSATION_ID = "conversationId"

# The payload indexes memory-pool keeps on every collection it writes.
KEYWORD_FIELDS = (SOURCE, MESSAGE_ID_LIST, USER_ID_LIST, CHANNEL_ID, GUILD_ID, CONVERSATION_ID)
INTEGER_FIELDS = (TIMESTAMP,)
