"""The `memory-pool` program: its commands, the one-process `serve`, and history imports."""
