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


def configure(stream: TextIO | None = None, level: int = logging.INFO) -> None:
    """Send every log record as JSON to `stream` (stdout by default). Calling it again is harmless."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    # The Kubernetes client logs every retried connection at WARNING through urllib3.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
