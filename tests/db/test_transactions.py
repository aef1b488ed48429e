"""Write transactions: all-or-nothing, and concurrent writers serialize instead of failing."""

from __future__ import annotations

import anyio
import pytest
from sqlalchemy import func, select, update

from kandev.clock import ManualClock
from kandev.db.engine import Database
from kandev.db.tables import kandev_meta, workspaces


async def test_failed_write_leaves_nothing_behind(db: Database, clock: ManualClock) -> None:
    now = clock.now()
    with pytest.raises(RuntimeError):
        async with db.write() as conn:
            await conn.execute(
                workspaces.insert().values(id="w1", name="x", created_at=now, updated_at=now)
            )
            raise RuntimeError("boom")
    async with db.read() as conn:
        assert (await conn.execute(select(func.count()).select_from(workspaces))).scalar() == 0


async def bump_counter(db: Database) -> None:
    """Read the meta counter and write it back +1 in one write transaction (row-locked on
    PostgreSQL): lost updates show as a final count below the number of bumps."""
    async with db.write() as conn:
        query = select(kandev_meta.c.value).where(kandev_meta.c.key == "counter")
        if db.is_postgres:
            query = query.with_for_update()
        value = int((await conn.execute(query)).scalar_one())
        await conn.execute(
            update(kandev_meta).where(kandev_meta.c.key == "counter").values(value=str(value + 1))
        )


async def test_concurrent_read_modify_write_loses_no_update(db: Database) -> None:
    """Twenty writers each read a counter and write it back +1 inside db.write().

    On SQLite, BEGIN IMMEDIATE makes the read part of the write lock, so no update is lost
    and none fails with 'database is locked'. On PostgreSQL the row lock does the same.
    """
    async with db.write() as conn:
        await conn.execute(kandev_meta.insert().values(key="counter", value="0"))

    async def bump() -> None:
        await bump_counter(db)

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(bump)
    async with db.read() as conn:
        value = (
            await conn.execute(select(kandev_meta.c.value).where(kandev_meta.c.key == "counter"))
        ).scalar_one()
    assert value == "20"


async def test_a_nested_write_fails_fast_instead_of_deadlocking(db: Database) -> None:
    async with db.write():
        with pytest.raises(RuntimeError, match=r"nested db\.write"):
            async with db.write():
                pass
