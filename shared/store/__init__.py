"""Vector storage behind one interface: `interface.Store` and what people read through it
(browse, memory_query, BM25 terms), one folder per engine (`qdrant/`, `edge/`), and above them
`open` (which engine) and `migration` (local mode to Edge).

May import `shared.format`, `shared.embedding`, `shared.errors`, `shared.settings`. The interface
and its readers import no engine; an engine imports the interface, never the other engine."""
