"""Moving a pool: the export file format, writing points out and in, and the Redis marks
(dedupe ids, tombstones) that travel with them.

May import `shared.state`, `shared.store`, `shared.embedding`, `shared.format`, `shared.errors`."""
