"""Perimeter tests run against a real uvicorn on 127.0.0.1, configured as `kandev serve` is."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from kandev.clock import ManualClock

ATTACKER_HOST = "attacker.example:8420"
ADMIN = {"email": "admin@example.com", "password": "admin-password"}


@pytest.fixture
def start(live_server_factory: Callable[..., Any], sqlite_url: str) -> Callable[..., Any]:
    """A server on a fresh SQLite database; keyword arguments are Settings fields."""

    def _start(database_url: str = sqlite_url, **settings: Any) -> Any:
        return live_server_factory(database_url, clock=ManualClock(), **settings)

    return _start


@pytest.fixture
async def http() -> AsyncIterator[Callable[[str], httpx.AsyncClient]]:
    made: list[httpx.AsyncClient] = []

    def _make(url: str) -> httpx.AsyncClient:
        made.append(httpx.AsyncClient(base_url=url, timeout=30))
        return made[-1]

    yield _make
    for client in made:
        await client.aclose()


async def make_board(client: httpx.AsyncClient) -> dict[str, Any]:
    """A workspace, its default workflow and one task."""
    ws = await client.post("/api/v1/workspaces", json={"name": "W"})
    assert ws.status_code == 201, ws.text
    flow = await client.post(
        "/api/v1/workflows", json={"workspace_id": ws.json()["id"], "name": "F"}
    )
    assert flow.status_code == 201, flow.text
    task = await client.post(
        "/api/v1/tasks",
        json={"workspace_id": ws.json()["id"], "workflow_id": flow.json()["id"], "title": "T"},
    )
    assert task.status_code == 201, task.text
    return {"workspace": ws.json(), "workflow": flow.json(), "task": task.json()}
