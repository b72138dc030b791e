"""Everything kept in Redis: key names, buffers and conversations, quarantine, dead letters,
locks, the backlog, agent names, data upgrades, and the Lua scripts (`scripts/`) beside the code
that runs them.

May import `shared.format`, `shared.agents`, `shared.errors`, `shared.settings`."""
