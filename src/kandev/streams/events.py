"""Following the event bus as one caller: filters authorized up front (a foreign task or
session is the same 404 as everywhere), every event checked against the caller's scope."""

from __future__ import annotations

from dataclasses import dataclass

from kandev.access.rules import owner_visible_to, scope
from kandev.db.engine import Database
from kandev.events.bus import RESET_EVENT, Event, EventBus, EventStream
from kandev.sessions.access import AccessRules


@dataclass(frozen=True)
class StreamFilter:
    task_id: str | None = None
    session_id: str | None = None

    def matches(self, event: Event) -> bool:
        if event.type == RESET_EVENT:
            return True
        if self.task_id is not None and event.task_id != self.task_id:
            return False
        return self.session_id is None or event.session_id == self.session_id


def visible_to(event: Event, user_id: str | None) -> bool:
    return event.type == RESET_EVENT or owner_visible_to(event.owner_id, user_id)


class EventsService:
    def __init__(self, db: Database, access: AccessRules, bus: EventBus) -> None:
        self.db = db
        self.access = access
        self.bus = bus

    def last_id(self) -> int:
        """The id a page rendered now is current at: its stream resumes after it."""
        return self.bus.last_id

    @property
    def shutting_down(self) -> bool:
        return self.bus.shutting_down.is_set()

    async def authorize(self, wanted: StreamFilter) -> None:
        async with self.db.read() as conn:
            if wanted.task_id is not None:
                await self.access.authorize_task(conn, wanted.task_id)
            if wanted.session_id is not None:
                await self.access.authorize_session(conn, wanted.session_id)

    def open(self, wanted: StreamFilter, after: int | None) -> CallerStream:
        """Subscribed now (nothing published from here on is missed): the caller's events
        after `after` (replayed first), then live ones. Call `authorize` first; the
        caller's scope is taken now. Close when done."""
        return CallerStream(self.bus.subscribe(after), wanted, scope())


class CallerStream:
    def __init__(self, stream: EventStream, wanted: StreamFilter, user_id: str | None) -> None:
        self._stream = stream
        self._wanted = wanted
        self._user_id = user_id

    async def next_batch(self, timeout: float) -> list[Event]:
        """The events the caller may see that are there now (see EventStream.next_batch):
        at least one, or none when `timeout` passes without any."""
        while True:
            batch = await self._stream.next_batch(timeout=timeout)
            if not batch:
                return batch
            mine = [e for e in batch if visible_to(e, self._user_id) and self._wanted.matches(e)]
            if mine:
                return mine

    def close(self) -> None:
        self._stream.close()
