"""The Qdrant server engine (qdrant-client; its local mode stands in for a server in tests), with
its filter translation and its reading of Qdrant's answers. The only engine that imports
qdrant_client.

May import `shared.store` (the interface and its helpers), `shared.format`, `shared.embedding`,
`shared.errors`, `shared.settings`."""
