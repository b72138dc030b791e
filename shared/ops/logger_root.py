"""One logger root. memory-pool's modules log under their own names (`api.routes.save`,
`shared.embedding.embedder`, `workers.flush`: what every log line shows), and each package's logger
hangs under `memory_pool`, so a level or handler set on `memory_pool` reaches all of them."""

from __future__ import annotations

import logging

ROOT = "memory_pool"
PACKAGES = ("api", "shared", "workers", "client")


def adopt_packages() -> None:
    """Put the packages' loggers under ROOT (idempotent). Logging finds a logger's level and
    handlers through its `parent`; the packages' own names would make the root logger it."""
    root = logging.getLogger(ROOT)
    for name in PACKAGES:
        logging.getLogger(name).parent = root
