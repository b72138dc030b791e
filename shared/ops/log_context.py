"""Context fields that log lines carry: request id, agent, conversation, Celery task id."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# One variable per field: contextvars follow a request through FastAPI's threadpool and stay
# apart between concurrent requests and Celery pool threads.
FIELDS = ("request_id", "agent", "conversation", "task_id")
_VARS: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"memory_pool_{name}", default=None) for name in FIELDS
}


def current() -> dict[str, str]:
    """The fields set in this context, for a log line."""
    found = {}
    for name, var in _VARS.items():
        value = var.get()
        if value is not None:
            found[name] = value
    return found


def set_field(name: str, value: str | None) -> None:
    """Set a field for the rest of this context (a request's task, a pool thread's task)."""
    _VARS[name].set(value)


@contextmanager
def bound(**fields: str | None) -> Iterator[None]:
    """Set fields for the duration of a block, then restore what was there."""
    tokens = [(_VARS[name], _VARS[name].set(value)) for name, value in fields.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)
