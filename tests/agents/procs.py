"""Looking at real processes in tests: who runs, who carries a session's marker (Linux /proc).

Polling here is bounded and on observable state (a process exists or not): after SIGKILL
there is nothing else to wait on.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kandev.agents.processes import SESSION_ENV, read_stat

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")


def running(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.running


def marked(session_id: str) -> list[int]:
    """Running processes whose environment says they belong to this session's agent."""
    marker = f"{SESSION_ENV}={session_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0") and running(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll `predicate` until true; returns the seconds it took, fails after `timeout`."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.01)  # noqa: sleep-ok (bounded polling of the process table)
    return time.monotonic() - start
