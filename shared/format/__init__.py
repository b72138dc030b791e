"""What is stored, as pure rules (Format.md): message and chunk shapes, chunking, the flush plan,
a point's payload and the recall block, names, ids and times.

Imports nothing of memory-pool's but `shared.errors`; no I/O (no Redis, Qdrant, HTTP)."""
