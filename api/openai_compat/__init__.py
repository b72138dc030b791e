"""The OpenAI-compatible endpoint (POST /v1/embeddings, st-qdrant-memory's "local" embedding
provider): its request rules, its answer and OpenAI's error shape, which every error under /v1/
takes.

May import `shared` and `api.save_body` (its JSON content-type rule); nothing else under `api/`."""
