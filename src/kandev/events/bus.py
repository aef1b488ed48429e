"""The in-process event bus: every change is published here and streamed to SSE clients.

Events carry increasing integer ids (seeded from the clock at start, so ids keep growing
across restarts) and live in a bounded ring buffer, so a client reconnecting with
Last-Event-ID gets exactly what it missed — or, when that has already rolled out of the
buffer (or the server restarted), a `stream.reset` telling it to refetch.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

RESET_EVENT = "stream.reset"


@dataclass(frozen=True)
class Event:
    id: int
    type: str
    data: dict[str, Any]
    task_id: str | None = None
    session_id: str | None = None
    # Owner of the workspace the event belongs to ('' = everyone may see it). Internal:
    # used for scoping, never sent.
    owner_id: str = ""

    def payload(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, **self.data}


@dataclass
class Subscription:
    queue: asyncio.Queue[Event] = field(default_factory=lambda: asyncio.Queue(maxsize=10_000))
    overflowed: bool = False


class EventBus:
    def __init__(self, capacity: int = 10_000, first_id: int | None = None) -> None:
        self._buffer: deque[Event] = deque(maxlen=capacity)
        self._next_id = first_id if first_id is not None else time.time_ns() // 1_000
        self._first_id = self._next_id
        self._subscribers: set[Subscription] = set()

    @property
    def last_id(self) -> int:
        return self._next_id - 1

    def publish(
        self,
        type: str,
        data: dict[str, Any],
        *,
        task_id: str | None = None,
        session_id: str | None = None,
        owner_id: str = "",
    ) -> Event:
        event = Event(self._next_id, type, data, task_id, session_id, owner_id)
        self._next_id += 1
        self._buffer.append(event)
        for sub in list(self._subscribers):
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:  # a stuck client: cut it loose rather than grow memory
                sub.overflowed = True
                self._subscribers.discard(sub)
        return event

    def _replay(self, after_id: int) -> tuple[list[Event], bool]:
        """Buffered events after `after_id`, and whether some were lost before them."""
        oldest = self._buffer[0].id if self._buffer else self._next_id
        lost = after_id < oldest - 1 and after_id < self._next_id
        if after_id < self._first_id - 1:
            lost = True  # an id from before this process started
        return [e for e in self._buffer if e.id > after_id], lost

    async def stream(self, after_id: int | None = None) -> AsyncIterator[Event]:
        """Replay what came after `after_id` (if given), then follow live events."""
        sub = Subscription()
        self._subscribers.add(sub)
        try:
            if after_id is not None:
                missed, lost = self._replay(after_id)
                if lost:
                    yield Event(self.last_id, RESET_EVENT, {"reason": "events were missed"})
                for event in missed:
                    yield event
                high_water = missed[-1].id if missed else after_id
            else:
                high_water = self.last_id
            while not sub.overflowed:
                event = await sub.queue.get()
                if event.id > high_water:  # skip what the replay already sent
                    yield event
            yield Event(self.last_id, RESET_EVENT, {"reason": "client too slow"})
        finally:
            self._subscribers.discard(sub)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)
