"""Structured logs: one JSON object per line with `severity`, as Cloud Logging reads them.

Extra fields travel in `extra={"fields": {...}}`; `event` among them feeds
the log-based metrics (drain-started, drain-completed, rollback, run-failed).
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

SEVERITIES = {"DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARNING", "ERROR": "ERROR", "CRITICAL": "CRITICAL"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "severity": SEVERITIES.get(record.levelname, "DEFAULT"),
            "message": record.getMessage(),
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


_HANDLER_NAME = "node-compactor-json"


# The events the command line prints itself, as `error: ...` and `warning: ...` lines: its stderr carries
# the logs too, and the same sentence twice (once as JSON) reads as two problems.
SHOWN_BY_THE_COMMAND_LINE = frozenset({"run-failed", "run-skipped", "input-warning", "compute-class-warning"})


def event(record: logging.LogRecord) -> str | None:
    """The record's `event` field, if it has one."""
    fields = getattr(record, "fields", None)
    found = fields.get("event") if isinstance(fields, dict) else None
    return found if isinstance(found, str) else None


def configure(
    stream: TextIO | None = None, level: int = logging.INFO, *, leave_out: frozenset[str] = frozenset()
) -> None:
    """Send every log record as JSON to `stream` (stdout by default), but those whose `event` is in
    `leave_out` (what the caller prints in its own words). Calling it again is harmless."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter())
    if leave_out:
        handler.addFilter(lambda record: event(record) not in leave_out)
    root.addHandler(handler)
    root.setLevel(level)
    # The Kubernetes client logs every retried connection at WARNING through urllib3.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
