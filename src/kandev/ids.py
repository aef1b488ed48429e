"""Injectable id generation: opaque strings, time-ordered (UUIDv7 layout).

Time order matters: rows written in the same clock tick (several messages of one turn) are
ordered by (created_at, id), so ids must grow in creation order within this process.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable

IdFactory = Callable[[], str]

_lock = threading.Lock()
_last_ms = 0
_seq = 0


def new_id() -> str:
    global _last_ms, _seq
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
            if _seq > 0xFFF:  # 4096 ids in one millisecond: borrow the next millisecond
                ms += 1
                _seq = 0
        else:
            _seq = 0
        _last_ms = ms
        seq = _seq
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | seq << 64 | 0b10 << 62 | rand
    return str(uuid.UUID(int=value))
