"""An agent's memories across Redis and the store at once: deletes (buffers, points,
tombstones) and the message ids an agent knows.

May import `shared.runtime` and everything below it."""
