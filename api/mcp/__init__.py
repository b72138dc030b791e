"""The MCP server: memory-pool's recall, save and delete as Model Context Protocol tools
(`recall`, `remember`, `forget`, `list_agents`).

`tools` defines the tools once, over a `backend.Backend` that speaks the HTTP API's bodies;
`in_process` is the backend of the server mounted at /mcp on the API (streamable HTTP), which
runs the routes' own code, and memory_pool/mcp_cli.py has the one of `memory-pool mcp` (stdio),
which calls a running memory-pool over HTTP. Modules here import nothing heavy at the top but
`in_process` and `mount`: the stdio process loads `tools` without the API's stack."""
