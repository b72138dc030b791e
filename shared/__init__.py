"""Code shared by the API and the workers: pure storage-format rules and the I/O clients."""

from shared.ops.logger_root import adopt_packages

# Every part of memory-pool imports this package first: its loggers are under one root from
# the start (shared/ops/logger_root.py).
adopt_packages()
