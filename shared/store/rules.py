"""What every engine decides alike without I/O: whether a collection suits our model."""

from __future__ import annotations

from shared.errors import DimensionMismatch, ModelMismatch
from shared.store.interface import CollectionState


def check_compatible(state: CollectionState, *, size: int, model: str) -> None:
    if state.size is None:
        names = ", ".join(state.vector_names) or "none"
        raise DimensionMismatch(
            f"Qdrant collection {state.name} has named vectors ({names}), not one unnamed "
            f"vector of size {size}; st-qdrant-memory cannot read it"
        )
    if state.size != size:
        raise DimensionMismatch(
            f"Qdrant collection {state.name} holds vectors of size {state.size}, "
            f"the embedding model gives {size}"
        )
    if state.model is not None and state.model != model:
        raise ModelMismatch(
            f"Qdrant collection {state.name} was written with embedding model {state.model}, "
            f"configured is {model}"
        )
