"""The typed contract between the scheduler and the workers: task names and payloads."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

FLUSH_TASK = "memory_pool.flush"
REPLAY_TASK = "memory_pool.replay_dead_letters"
BACKFILL_TASK = "memory_pool.backfill_bm25"
EDITS_TASK = "memory_pool.apply_edits"  # one argument: the collection whose edits wait


class ClaimModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    conversation: str = Field(min_length=1)
    token: str = Field(min_length=1)


class FlushTask(BaseModel):
    """Flush these claimed conversations together (their chunks share embedding requests)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    claims: list[ClaimModel] = Field(min_length=1)
