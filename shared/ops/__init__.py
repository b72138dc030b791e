"""Metrics and logs: the Prometheus metrics, metered wrappers of the embedder and the store, the
log context and set-up, and the one logger root.

May import `shared.embedding`, `shared.store`, `shared.errors`, `shared.settings`."""
