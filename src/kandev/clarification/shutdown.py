"""Ending waiting ask calls when the server stops: their questions stay open for after it."""

from __future__ import annotations

import asyncio
from typing import Any

from kandev.errors import KandevError

SHUTDOWN_ASKS_SECONDS = 1.0  # how long a stop waits for ended ask calls to return
SHUTTING_DOWN = (
    "Kandev server is shutting down; the question stays open and will be answered after restart"
)


class ServerShuttingDown(KandevError):
    """The server is stopping while an agent waits: its call ends, its question stays open."""

    code = "INTERNAL_ERROR"  # the closest tool error code (CONTRACT §5 has no UNAVAILABLE)

    def __init__(self) -> None:
        super().__init__(SHUTTING_DOWN)


class AskShutdown:
    """The stop signal of every waiting ask call, and the task each one runs in."""

    def __init__(self) -> None:
        self.shutting_down = False
        self._signals: dict[asyncio.Future[None], asyncio.Task[Any] | None] = {}

    def watch(self) -> asyncio.Future[None]:
        """A future that completes when the server stops, for the calling ask task."""
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._signals[stop] = asyncio.current_task()
        return stop

    def release(self, stop: asyncio.Future[None]) -> None:
        """The ask call stopped waiting."""
        self._signals.pop(stop, None)
        stop.cancel()

    async def begin(self, timeout: float = SHUTDOWN_ASKS_SECONDS) -> None:
        """Every waiting ask call ends with ServerShuttingDown, and new ones end at once.
        Returns once those calls returned (bounded)."""
        self.shutting_down = True
        calls = [task for task in self._signals.values() if task is not None]
        for stop in list(self._signals):
            if not stop.done():
                stop.set_result(None)
        if calls:
            await asyncio.wait(calls, timeout=timeout)
