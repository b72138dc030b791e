"""Text to vectors: the dense embedder (OpenAI-compatible API or the local model) and BM25 terms
(with BM25's stopword lists in bm25_model/).

May import `shared.errors`, `shared.settings`; nothing else of memory-pool's."""
