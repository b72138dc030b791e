"""Code shared by the API and the workers: pure storage-format rules and the I/O clients."""
