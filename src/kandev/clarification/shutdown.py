"""Ending waiting ask calls when the server stops: their questions stay open for after it."""

from __future__ import annotations

import asyncio
from typing import Any

from kandev.clarification.signal import Signal
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
    """The stop signal of every waiting ask call, and the tasks they run in."""

    def __init__(self) -> None:
        self.shutting_down = False
        self.stopping = Signal()  # what each waiting ask's wait also watches
        self._calls: set[asyncio.Task[Any]] = set()

    def enter(self) -> asyncio.Task[Any] | None:
        """The calling task begins waiting in an ask; pass what this returns to `leave`.
        (Not a context manager: a generator per waiting agent is memory for hours.)"""
        task = asyncio.current_task()
        if task is not None:
            self._calls.add(task)
        return task

    def leave(self, task: asyncio.Task[Any] | None) -> None:
        if task is not None:
            self._calls.discard(task)

    async def begin(self, timeout: float = SHUTDOWN_ASKS_SECONDS) -> None:
        """Every waiting ask call ends with ServerShuttingDown, and new ones end at once.
        Returns once those calls returned (bounded)."""
        self.shutting_down = True
        calls = list(self._calls)
        self.stopping.set()
        if calls:
            await asyncio.wait(calls, timeout=timeout)
