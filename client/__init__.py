"""A small Python client for memory-pool's HTTP API."""

from client.http_client import MemoryPoolClient, MemoryPoolError

__all__ = ["MemoryPoolClient", "MemoryPoolError"]
