"""Over a real uvicorn, on both databases: a burst that finds the database held answers
503 with Retry-After for what queued past KANDEV_DB_QUEUE_TIMEOUT_SECONDS, and serves the
rest once the database is free. Never a 500.

The database is held from outside, deterministically: on PostgreSQL an ACCESS EXCLUSIVE lock
on `tasks` (every task creation in the burst blocks inside its transaction, holding one of
the pool's slots); on SQLite another process holding the write lock (the burst's writes
queue on the server's write lock behind the one waiting for the file).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from kandev.db import engine as engine_module
from kandev.db.engine import POSTGRES_MAX_TRANSACTIONS
from tests.db.sqlite_locker import Locker

BURST = 60
QUEUE_TIMEOUT_S = 0.5


class PgTableLock:
    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    @classmethod
    async def hold(cls, database_url: str) -> PgTableLock:
        url = make_url(database_url).set(drivername="postgresql")
        conn = await asyncpg.connect(url.render_as_string(hide_password=False))
        await conn.execute("BEGIN")
        await conn.execute("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
        return cls(conn)

    async def release(self) -> None:
        await self.conn.execute("COMMIT")
        await self.conn.close()


async def test_a_burst_on_a_held_database_is_503_with_retry_after_never_500(
    live_server_factory: Callable[..., Any], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite: the write waiting for the other process must outlast the burst's 503s, even
    # on a loaded machine (the server runs in this process: its connections take this).
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 120_000)
    server = live_server_factory(database_url, db_queue_timeout_seconds=QUEUE_TIMEOUT_S)
    is_sqlite = database_url.startswith("sqlite")
    async with httpx.AsyncClient(
        base_url=server.url, timeout=60, limits=httpx.Limits(max_connections=BURST)
    ) as client:
        ws = (await client.post("/api/v1/workspaces", json={"name": "burst"})).json()
        flow = (
            await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "f"})
        ).json()
        body = {"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "t"}
        if is_sqlite:
            path = make_url(database_url).database
            assert path
            held: Locker | PgTableLock = await Locker.hold(path)
            stuck = 1  # the write waiting for the file; the others queue behind it
        else:
            held = await PgTableLock.hold(database_url)
            stuck = POSTGRES_MAX_TRANSACTIONS  # one per slot, each blocked on the lock
        released = False
        try:
            requests = [
                asyncio.create_task(client.post("/api/v1/tasks", json=body)) for _ in range(BURST)
            ]
            # While the database is held, only the queued ones can answer (after the
            # timeout); wait for those, bounded, then let the database go.
            done: set[asyncio.Task[httpx.Response]] = set()
            async with asyncio.timeout(30):
                while len(done) < BURST - stuck:
                    finished, _ = await asyncio.wait(
                        set(requests) - done, return_when=asyncio.FIRST_COMPLETED
                    )
                    done |= finished
            early = [task.result() for task in done]
            await held.release()
            released = True
            responses = await asyncio.gather(*requests)
        finally:
            if not released:
                await held.release()
    statuses = [r.status_code for r in responses]
    assert 500 not in statuses
    assert set(statuses) <= {201, 503}, statuses
    assert all(r.status_code == 503 for r in early), [r.status_code for r in early]
    busy = [r for r in responses if r.status_code == 503]
    assert len(busy) >= BURST - stuck
    assert statuses.count(201) >= 1
    for r in busy:
        assert r.headers["retry-after"] == "1"
        assert "busy" in r.json()["error"]
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        listed = (await client.get("/api/v1/tasks", params={"workspace_id": ws["id"]})).json()
    assert len(listed["tasks"]) == statuses.count(201)  # a 503 left nothing behind
