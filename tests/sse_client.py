"""A tiny SSE reader for tests: parses `id:` / `data:` frames from a streaming response."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx


@dataclass(frozen=True)
class SseEvent:
    id: int
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return self.data["type"]


class SseStream:
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()
        self.seen: list[SseEvent] = []

    async def next_event(self) -> SseEvent:
        event_id: int | None = None
        data: list[str] = []
        async for line in self._lines:
            if line == "":
                if data:
                    event = SseEvent(event_id or 0, json.loads("\n".join(data)))
                    self.seen.append(event)
                    return event
                continue
            if line.startswith(":"):
                continue  # comment / keepalive
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "id":
                event_id = int(value)
            elif field == "data":
                data.append(value)
        raise EOFError("stream ended")

    async def wait_for(
        self, predicate: Callable[[SseEvent], bool], timeout: float = 30.0
    ) -> SseEvent:
        """The first event (from now on) matching `predicate`, within `timeout` seconds."""
        with anyio.fail_after(timeout):
            while True:
                event = await self.next_event()
                if predicate(event):
                    return event

    async def take(self, count: int, timeout: float = 30.0) -> list[SseEvent]:
        with anyio.fail_after(timeout):
            return [await self.next_event() for _ in range(count)]


@asynccontextmanager
async def sse_stream(
    client: httpx.AsyncClient, path: str = "/api/v1/events", **kwargs: Any
) -> AsyncIterator[SseStream]:
    async with client.stream("GET", path, timeout=httpx.Timeout(60.0), **kwargs) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield SseStream(response)


def of_type(*types: str, **fields: Any) -> Callable[[SseEvent], bool]:
    def match(event: SseEvent) -> bool:
        if event.type not in types:
            return False
        return all(event.data.get(k) == v for k, v in fields.items())

    return match
