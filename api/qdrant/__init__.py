"""Qdrant's REST API under /qdrant, for st-qdrant-memory: exactly the calls it makes, in
Qdrant's shapes, on memory-pool's store and by memory-pool's rules (a collection is an agent's;
keys, limits and collection setup as everywhere else). `shape` (Qdrant's answers and errors) and
`schemas` (its bodies) import nothing of this package; `access` (which agent a call reaches)
imports `shape`; `collections` and `points` (the work, no FastAPI) import those; `routes` all.

May import `shared` and `api`'s own modules below the routes (auth, deps); api/errors.py and
api/middleware.py import `shape` to answer /qdrant in Qdrant's error shape, and the middleware
`access`'s key header, to refuse a wrong `api-key` at the door."""
