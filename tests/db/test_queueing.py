"""Bounded database concurrency: transactions beyond the pool queue in `Database`, and one
that waited `queue_timeout` fails with ServerBusy (REST 503 + Retry-After) instead of a 500.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from kandev.db.engine import Database
from kandev.db.migrate import upgrade_to_head
from kandev.db.tables import kandev_meta
from kandev.errors import ServerBusy
from kandev.mcp.errors import error_result
from tests.db.test_transactions import bump_counter

QUEUE_TIMEOUT_S = 0.3


@pytest.fixture
async def short_queue_db(db: Database) -> AsyncIterator[Database]:
    """The migrated database of each kind, opened again with a short queue timeout."""
    database = Database(db.url, queue_timeout=QUEUE_TIMEOUT_S)
    yield database
    await database.dispose()


async def test_many_more_transactions_than_the_pool_all_succeed_queued(db: Database) -> None:
    async with db.write() as conn:
        await conn.execute(kandev_meta.insert().values(key="counter", value="0"))
    inside = 0
    most_inside = 0

    async def read() -> None:
        nonlocal inside, most_inside
        async with db.read() as conn:
            inside += 1
            most_inside = max(most_inside, inside)
            await conn.execute(select(kandev_meta.c.value))
            await asyncio.sleep(0)  # noqa: sleep-ok (a yield: others run meanwhile)
            inside -= 1

    async def bump() -> None:
        await bump_counter(db)

    n = 10 * db.max_transactions
    await asyncio.gather(*(f() for _ in range(n) for f in (read, bump)))
    async with db.read() as conn:
        value = (
            await conn.execute(select(kandev_meta.c.value).where(kandev_meta.c.key == "counter"))
        ).scalar_one()
    assert value == str(n)
    # Reads queued at the bound instead of all taking a pool connection at once.
    assert most_inside <= db.max_transactions


async def test_a_transaction_queued_past_the_timeout_is_server_busy(
    short_queue_db: Database,
) -> None:
    db = short_queue_db
    release = asyncio.Event()
    holding = 0
    all_held = asyncio.Event()

    async def hold() -> None:
        nonlocal holding
        async with db.read():
            holding += 1
            if holding == db.max_transactions:
                all_held.set()
            await release.wait()

    holders = [asyncio.create_task(hold()) for _ in range(db.max_transactions)]
    try:
        await asyncio.wait_for(all_held.wait(), 10)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ServerBusy) as caught:
            async with db.read():
                pass
        assert loop.time() - started >= QUEUE_TIMEOUT_S * 0.9
        assert caught.value.retry_after_seconds >= 1
        assert "busy" in caught.value.message
        if db.is_postgres:  # PostgreSQL writes share the same slots
            with pytest.raises(ServerBusy):
                async with db.write():
                    pass
    finally:
        release.set()
        await asyncio.gather(*holders)
    async with db.read() as conn:  # the queue drained: served again
        await conn.execute(select(kandev_meta.c.key))


async def test_a_write_queued_on_the_sqlite_write_lock_past_the_timeout_is_server_busy(
    sqlite_url: str,
) -> None:
    db = Database(sqlite_url, queue_timeout=QUEUE_TIMEOUT_S)
    await upgrade_to_head(db)
    try:
        await _write_lock_times_out(db)
    finally:
        await db.dispose()


async def _write_lock_times_out(db: Database) -> None:
    release = asyncio.Event()
    held = asyncio.Event()

    async def hold() -> None:
        async with db.write():
            held.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    try:
        await asyncio.wait_for(held.wait(), 10)
        with pytest.raises(ServerBusy):
            async with db.write():
                pass
    finally:
        release.set()
        await holder
    async with db.write() as conn:
        await conn.execute(kandev_meta.insert().values(key="after", value="1"))


async def test_a_transaction_inside_another_takes_no_second_slot(
    short_queue_db: Database,
) -> None:
    """Every slot held by a task that opens a read inside its transaction: no one waits on
    anyone (a second slot each would leave all of them queued until the timeout)."""
    db = short_queue_db
    entered = 0
    everyone_in = asyncio.Event()

    async def outer_then_inner(write: bool) -> None:
        nonlocal entered
        outer = db.write() if write else db.read()
        async with outer:
            entered += 1
            if entered == db.max_transactions:
                everyone_in.set()
            await asyncio.wait_for(everyone_in.wait(), 10)
            async with db.read() as inner:
                await inner.execute(select(kandev_meta.c.key))

    # On SQLite the writers queue on the write lock, so only readers fill the slots there.
    writers = 0 if db.is_sqlite else db.max_transactions // 2
    await asyncio.gather(*(outer_then_inner(i < writers) for i in range(db.max_transactions)))


def test_mcp_reports_server_busy_as_a_tool_error_saying_to_retry() -> None:
    result = error_result(ServerBusy("the database is busy; retry in 1 s"))
    assert result.is_error
    body = json.loads(result.content[0].text)
    assert body == {"code": "INTERNAL_ERROR", "message": "the database is busy; retry in 1 s"}


async def test_a_quiet_server_reuses_the_connection_it_used_last(db: Database) -> None:
    """The pool is LIFO: after a burst opened several connections, one read at a time keeps
    getting the connection returned last (its prepared statements and pages warm), instead
    of rotating through all of them (FIFO: each preparing every statement anew)."""
    opened = asyncio.Event()
    holding = 0

    async def hold() -> int:
        nonlocal holding
        async with db.read() as conn:
            holding += 1
            if holding == 3:
                opened.set()
            await opened.wait()  # three connections out at once
            return id((await conn.get_raw_connection()).driver_connection)

    burst = set(await asyncio.gather(hold(), hold(), hold()))
    assert len(burst) == 3

    async def one_read() -> int:
        async with db.read() as conn:
            return id((await conn.get_raw_connection()).driver_connection)

    used = [await one_read() for _ in range(6)]
    assert len(set(used)) == 1, used
