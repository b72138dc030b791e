"""Benchmarks for memory-pool: one command each, baseline measured in the same run."""
