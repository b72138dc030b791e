"""One logging configuration for every memory-pool process: text (default) or JSON lines."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from shared.format.json_lines import escape_line_breaks
from shared.ops import log_context

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Attributes every LogRecord has; anything else was passed with `extra=` and is context.
_STANDARD = frozenset(
    {*vars(logging.LogRecord("", 0, "", 0, "", None, None)), "message", "asctime", "taskName"}
)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, then the context fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _iso_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(log_context.current())
        # Plain `extra=` fields only: libraries pass whole structures (Celery: a task's args).
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and _plain(value):
                line.setdefault(key, value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        # Line breaks to str.splitlines() and many log viewers that json.dumps leaves raw: a
        # value carrying one (an agent's name) could end a line early and forge the next.
        return escape_line_breaks(json.dumps(line, ensure_ascii=False))


def _plain(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _iso_time(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


def configure_logging(log_format: str = "text", level: str = "INFO") -> None:
    """Root gets exactly one handler, so every logger (uvicorn's and Celery's included, which
    propagate to it) writes each line once, in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    json_lines = log_format == "json"
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # uvicorn and Celery add handlers of their own unless told not to; theirs would print a
    # second copy of each line (or one in another format).
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery", "celery.task"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
