"""GET /api/v1/events sends what one transaction published in one write (issue:
performance): each write wakes the reader, and one write per event made a turn's eight
events eight wake-ups, interleaved with the turn's own database round trips.

Driven at the ASGI level, where a write is one `http.response.body` message (a TCP reader
may see writes coalesced or not; the app's sends are what the server writes)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kandev.app import create_app
from kandev.clock import ManualClock
from kandev.config import Settings
from kandev.services import build_services


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/v1/events",
        "raw_path": b"/api/v1/events",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), (b"accept", b"text/event-stream")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }


async def test_a_transactions_events_go_out_in_one_write(tmp_path: Path) -> None:
    config = Settings(data_dir=tmp_path / "home")
    services = build_services(config, clock=ManualClock())
    app = create_app(config, services=services)
    bodies: asyncio.Queue[bytes] = asyncio.Queue()
    gone = asyncio.Event()
    requested = False

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
        elif message.get("body"):
            bodies.put_nowait(message["body"])

    async with app.router.lifespan_context(app):
        streaming = asyncio.ensure_future(app(_scope(), receive, send))
        async with asyncio.timeout(10):
            assert (await bodies.get()).startswith(b": connected")
            for i in range(3):  # as a transaction's commit publishes: no await in between
                services.bus.publish("task.updated", {"i": i})
            chunk = await bodies.get()
        frames = [f for f in chunk.decode().split("\n\n") if f]
        assert [f.splitlines()[1] for f in frames] == [
            f'data: {{"id":{services.bus.last_id - 2 + i},"type":"task.updated","i":{i}}}'
            for i in range(3)
        ]
        assert bodies.empty()  # nothing else was written for them
        gone.set()
        async with asyncio.timeout(10):
            await streaming
