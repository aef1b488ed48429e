"""One log line per event, with its fields: `agent started session_id=… pid=…`.

The fields are in the message (so any handler shows them, uvicorn's default included) and
in the record's `extra` (`record.kandev_event`, `record.kandev_fields`) for a JSON handler.
"""

from __future__ import annotations

import logging
from typing import Any


def _value(value: Any) -> str:
    text = str(value)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def log_event(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """Log `event` with `fields` (None values are left out) on one line."""
    if not logger.isEnabledFor(level):
        return
    present = {key: value for key, value in fields.items() if value is not None}
    line = " ".join([event, *(f"{key}={_value(value)}" for key, value in present.items())])
    logger.log(level, "%s", line, extra={"kandev_event": event, "kandev_fields": present})
