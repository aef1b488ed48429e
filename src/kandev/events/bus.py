"""The in-process event bus: every change is published here and streamed to SSE clients.

Events carry increasing integer ids (seeded from the clock at start, so ids keep growing
across restarts) and live in a bounded ring buffer, so a client reconnecting with
Last-Event-ID gets exactly what it missed — or, when that has already rolled out of the
buffer (or the server restarted), a `stream.reset` telling it to refetch.

An event is serialized once, however many streams send it (`Event.json`); the ring buffer
keeps only that text (`Event.compact`), not the payload's dicts, which cost several times
the bytes and, with 10,000 events kept, a few KiB for every question asked.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from typing import Any

from pydantic_core import to_json

from kandev.catalog.events import STREAM_RESET as RESET_EVENT


class Event:
    """One published change. `data` is its payload; `json()` the whole event as sent."""

    __slots__ = ("_data", "_json", "id", "owner_id", "session_id", "task_id", "type")

    def __init__(
        self,
        id: int,
        type: str,
        data: dict[str, Any] | None,
        task_id: str | None = None,
        session_id: str | None = None,
        # Owner of the workspace the event belongs to ('' = everyone may see it). Internal:
        # used for scoping, never sent.
        owner_id: str = "",
        *,
        text: str | None = None,
    ) -> None:
        self.id = id
        self.type = type
        self.task_id = task_id
        self.session_id = session_id
        self.owner_id = owner_id
        self._data = data
        self._json = text

    @property
    def data(self) -> dict[str, Any]:
        if self._data is not None:
            return self._data
        # A compact (buffered) event: decoded when an in-process replay reads it.
        payload = json.loads(self.json())
        del payload["id"], payload["type"]
        return payload

    def payload(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, **self.data}

    def json(self) -> str:
        """The event as one compact JSON text, made on first use and kept."""
        if self._json is None:
            self._json = to_json(self.payload()).decode()
        return self._json

    def compact(self) -> Event:
        """The same event holding only its JSON text (what the ring buffer keeps)."""
        return Event(
            self.id,
            self.type,
            None,
            self.task_id,
            self.session_id,
            self.owner_id,
            text=self.json(),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.id, self.type, self.data) == (other.id, other.type, other.data)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Event(id={self.id}, type={self.type!r})"


# Events a stream hands out at once (one SSE write): bounded, so a replay of thousands is
# sent in chunks rather than one string of megabytes.
MAX_BATCH = 256


class EventStream:
    """One subscriber: replayed events first, then live ones, in id order. Close when done."""

    def __init__(self, bus: EventBus, backlog: list[Event], high_water: int) -> None:
        self._bus = bus
        self._backlog = deque(backlog)
        self._high_water = high_water  # live events at or below this were replayed already
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=10_000)
        self.overflowed = False

    async def next(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when `timeout` seconds pass without one."""
        batch = await self.next_batch(timeout, limit=1)
        return batch[0] if batch else None

    async def next_batch(self, timeout: float | None = None, limit: int = MAX_BATCH) -> list[Event]:
        """The events there are now, in id order: at least one (waiting up to `timeout`
        seconds for it; none when it passes), at most `limit`. A stream that sends each
        batch in one write sends what one transaction published in one write, not one
        write per event, each waking its reader (issue: performance)."""
        if self._backlog:
            return [self._backlog.popleft() for _ in range(min(limit, len(self._backlog)))]
        if self.overflowed:
            self.overflowed = False
            self._high_water = self._bus.last_id
            return [Event(self._bus.last_id, RESET_EVENT, {"reason": "client too slow"})]
        while True:
            taken: list[Event] = []
            if self.queue.empty():
                try:
                    taken.append(await asyncio.wait_for(self.queue.get(), timeout))
                except TimeoutError:
                    return []
            while len(taken) < limit and not self.queue.empty():
                taken.append(self.queue.get_nowait())
            batch = [event for event in taken if event.id > self._high_water]
            if batch:
                return batch

    def close(self) -> None:
        self._bus._subscribers.discard(self)


class EventBus:
    def __init__(self, capacity: int = 10_000, first_id: int | None = None) -> None:
        self._buffer: deque[Event] = deque(maxlen=capacity)
        self._next_id = first_id if first_id is not None else time.time_ns() // 1_000
        self._first_id = self._next_id
        self._subscribers: set[EventStream] = set()
        # Set when the server begins to stop (SIGINT / SIGTERM): open event streams end then,
        # rather than holding the graceful shutdown until its timeout.
        self.shutting_down = asyncio.Event()

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
        self._buffer.append(event.compact())
        for sub in list(self._subscribers):
            if sub.overflowed:
                continue  # it will be told to refetch; queuing more would be wasted
            try:
                sub.queue.put_nowait(event)
            except asyncio.QueueFull:  # a stuck client: reset it rather than grow memory
                sub.overflowed = True
                while not sub.queue.empty():
                    sub.queue.get_nowait()
        return event

    def _replay(self, after_id: int) -> tuple[list[Event], bool]:
        """Buffered events after `after_id`, and whether some were lost before them."""
        oldest = self._buffer[0].id if self._buffer else self._next_id
        lost = after_id < oldest - 1 and after_id < self._next_id
        if after_id < self._first_id - 1:
            lost = True  # an id from before this process started
        return [e for e in self._buffer if e.id > after_id], lost

    def subscribe(self, after_id: int | None = None) -> EventStream:
        """Follow live events; with `after_id`, first replay what came after it.

        Registration and the replay snapshot happen without an await in between, so no event
        can fall between them.
        """
        backlog: list[Event] = []
        if after_id is not None:
            missed, lost = self._replay(after_id)
            if lost:
                backlog.append(Event(self.last_id, RESET_EVENT, {"reason": "events were missed"}))
            backlog.extend(missed)
        stream = EventStream(self, backlog, self.last_id)
        self._subscribers.add(stream)
        return stream

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)
