"""The embedded engine (Qdrant Edge, `qdrant-edge-py`) that `memory-pool serve` uses, with its
filter translation. Imports no qdrant_client.

May import `shared.store` (the interface and its helpers), `shared.format`, `shared.embedding`,
`shared.errors`, `shared.settings`."""
