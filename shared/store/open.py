"""Which store to open: the one module above both engines, so the interface imports neither."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.store.interface import Store

if TYPE_CHECKING:
    from shared.settings import Settings


def open_store(settings: Settings) -> Store:
    """A Qdrant server when one is configured, else the embedded engine in the data folder."""
    if settings.qdrant_url:
        # imported here: serve never loads qdrant-client's engine code it does not use
        from shared.store.qdrant.engine import QdrantStore

        return QdrantStore.open(settings)
    from shared.store.edge.engine import EdgeStore

    return EdgeStore.open(settings)
