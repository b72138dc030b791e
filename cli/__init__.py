"""The `memory-pool` command line."""
