"""GET /api/v1/events: Server-Sent Events of what changes, scoped to the caller."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from kandev.api.deps import EventsServiceDep
from kandev.errors import ValidationFailed
from kandev.events.bus import Event
from kandev.streams.events import StreamFilter

router = APIRouter(prefix="/api/v1", tags=["events"])
KEEPALIVE_SECONDS = 15.0
MAX_EVENT_ID = 2**63 - 1  # event ids are int64 on both databases
MAX_EVENT_ID_DIGITS = len(str(MAX_EVENT_ID))


def _frame(event: Event) -> str:
    return f"id: {event.id}\ndata: {event.json()}\n\n"  # serialized once for every stream


def parse_last_event_id(value: str | None) -> int | None:
    """An event id is a non-negative int64; anything else (a 5000-digit number, "²") is a
    400 rather than an overflow deeper down."""
    if value is None:
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit() and len(value) <= MAX_EVENT_ID_DIGITS):
        raise ValidationFailed("Last-Event-ID", "must be an event id")
    event_id = int(value)
    if event_id > MAX_EVENT_ID:
        raise ValidationFailed("Last-Event-ID", "must be an event id")
    return event_id


@router.get("/events")
async def events(
    events: EventsServiceDep,
    task_id: str | None = None,
    session_id: str | None = None,
    last_event_id: str | None = Header(default=None, alias="Last-Event-ID"),
    last_event_id_query: str | None = Query(default=None, alias="last_event_id"),
) -> StreamingResponse:
    # Filters are authorized up front: a foreign task/session is a 404, like everywhere.
    wanted = StreamFilter(task_id=task_id, session_id=session_id)
    await events.authorize(wanted)
    # EventSource cannot set headers: a page passes the id it was rendered at as
    # ?last_event_id=; the browser's own Last-Event-ID (a reconnect) is newer and wins.
    after = parse_last_event_id(last_event_id if last_event_id is not None else last_event_id_query)
    stream = events.open(wanted, after)

    async def frames() -> AsyncIterator[str]:
        try:
            yield f": connected, last id {events.last_id()}\n\n"
            while True:
                # What one transaction published goes out in one write (see next_batch).
                batch = await stream.next_batch(timeout=KEEPALIVE_SECONDS)
                yield "".join(map(_frame, batch)) if batch else ": keepalive\n\n"
        finally:
            stream.close()

    return StreamingResponse(
        frames(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
