"""qdrant-client's local mode fuses RRF with a constant of its own, 2; a Qdrant server (and Edge)
uses RRF_K (60) when a query names none. What stands for a server (the REST test server, the
quality bench's in-memory store) sets local mode's constant to the server's, so its RRF scores
and orders as one (tests/shared/store/test_fusion_weights.py)."""

from __future__ import annotations

from qdrant_client.hybrid import fusion as local_fusion

from shared.store.fusion import RRF_K


def fuse_as_qdrant_server() -> None:
    """Local mode reads the constant at each fusion: this holds for every client in the process."""
    local_fusion.DEFAULT_RANKING_CONSTANT_K = RRF_K
