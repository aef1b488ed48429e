"""PostgreSQL: a pooled connection that sat idle is pinged before use, so a connection the
server dropped (a restart, a killed backend) is replaced instead of failing the request —
without SQLAlchemy's pre-ping, which pings on every checkout."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from kandev.db.engine import Database


async def _kill_other_backends(url: str) -> int:
    """Terminate every other session on this database (what a server restart does to them)."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        return int(
            await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    finally:
        await conn.close()


async def _select_one(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(text("SELECT 1"))).scalar_one())


@pytest.mark.parametrize("idle_s, survives", [(0.0, True), (3600.0, False)])
async def test_a_dropped_idle_connection_is_replaced(
    database_url: str, database_kind: str, idle_s: float, survives: bool
) -> None:
    if database_kind != "postgres":
        pytest.skip("SQLite has no server to drop a connection")
    db = Database(database_url, ping_idle_s=idle_s)
    try:
        assert await _select_one(db) == 1  # one pooled connection, now idle
        assert await _kill_other_backends(database_url) == 1
        if survives:
            assert await _select_one(db) == 1
        else:  # the control: with no ping, the dead connection reaches the statement
            with pytest.raises(DBAPIError):
                await _select_one(db)
            assert await _select_one(db) == 1  # and the pool has replaced it since
    finally:
        await db.dispose()
