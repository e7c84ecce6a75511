"""JSON log lines with timestamps, for ``saihm serve`` (docs/operations.md "Logs").

Every line on stderr is one JSON object: ``ts`` (UTC, ISO 8601 with milliseconds), ``level``,
``logger`` and either the members of a message that is itself a JSON object (the access log's
``method``, ``path``, ``status``, ``ms``, ``pid``) or ``msg``. An exception is logged by its type
only (``exc``): its message or traceback could hold plaintext or a token. Callers never log a
header value, a token or content; this formatter adds nothing that could hold one.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import TextIO

__all__ = ["JsonFormatter", "configure_logging"]

#: Members the formatter sets itself; a JSON message cannot overwrite them.
RESERVED = ("ts", "level", "logger")


def utc_timestamp(created: float) -> str:
    """``created`` (UNIX seconds) as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    whole = int(created)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + (
        f".{int((created - whole) * 1000):03d}Z"
    )


class JsonFormatter(logging.Formatter):
    """One JSON object per record, keys in a fixed order."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": utc_timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        message = record.getMessage()
        fields = None
        if message.startswith("{"):
            try:
                fields = json.loads(message)
            except ValueError:
                fields = None
        if isinstance(fields, dict):
            line.update((k, v) for k, v in fields.items() if k not in RESERVED)
        else:
            line["msg"] = message
        if "pid" not in line:
            line["pid"] = os.getpid()
        if record.exc_info and record.exc_info[0] is not None:
            line["exc"] = record.exc_info[0].__name__
        return json.dumps(line, separators=(",", ":"), default=str)


def configure_logging(stream: TextIO | None = None, level: int = logging.INFO) -> None:
    """Send every log record of the process to ``stream`` (stderr) as JSON lines."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
