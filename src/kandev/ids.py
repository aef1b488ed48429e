"""Injectable id generation (opaque strings; UUID4 by default)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

IdFactory = Callable[[], str]


def new_id() -> str:
    return str(uuid.uuid4())
