"""Recall, all in one place: the request (at the bottom: imports nothing of this package), the
store filter, the selection rules, the query cache, the dense and hybrid fills, and the service
that runs them.

May import `shared` (not `shared.state` or `shared.memories`); nothing else under `api/`."""
