"""The inline SQLite driver on a real file: statements on the event loop's thread, the same
transaction semantics, and a lock held by another process waited for without freezing the loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from kandev.db import engine as engine_module
from kandev.db.engine import Database
from kandev.db.migrate import upgrade_to_head
from kandev.db.tables import kandev_meta
from kandev.errors import ServerBusy
from tests.db.sqlite_locker import Locker

PROBE_TICK_S = 0.005
MAX_LOOP_STALL_S = 0.1  # a blocked loop would stall for the whole wait (seconds)


@pytest.fixture
async def sqlite_db(sqlite_url: str) -> AsyncIterator[Database]:
    database = Database(sqlite_url)
    await upgrade_to_head(database)
    yield database
    await database.dispose()


def db_path(db: Database) -> str:
    path = db.engine.url.database
    assert path
    return path


def file_size(path: Path) -> int:
    return path.stat().st_size


async def meta_value(db: Database, key: str) -> str | None:
    async with db.read() as conn:
        query = select(kandev_meta.c.value).where(kandev_meta.c.key == key)
        return (await conn.execute(query)).scalar_one_or_none()


async def loop_stalls(duration_s: float) -> list[float]:
    """How late each tick of a short timer fired: the event loop's responsiveness."""
    lateness = []
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        start = time.monotonic()
        await asyncio.sleep(PROBE_TICK_S)  # noqa: sleep-ok (a latency probe, not a wait)
        lateness.append(time.monotonic() - start - PROBE_TICK_S)
    return lateness


async def test_statements_run_on_the_event_loop_thread(sqlite_db: Database) -> None:
    """No worker thread: the sqlite3 calls of a transaction run where the loop runs."""
    threads: set[int] = set()
    async with sqlite_db.write() as conn:
        raw = (await conn.get_raw_connection()).driver_connection
        raw._conn.set_trace_callback(lambda _sql: threads.add(threading.get_ident()))
        await conn.execute(kandev_meta.insert().values(key="k", value="v"))
        await conn.execute(select(kandev_meta.c.value))
        raw._conn.set_trace_callback(None)
    assert threads == {threading.get_ident()}
    assert await meta_value(sqlite_db, "k") == "v"


async def test_commit_rollback_and_savepoints(sqlite_db: Database) -> None:
    async with sqlite_db.write() as conn:
        await conn.execute(kandev_meta.insert().values(key="kept", value="1"))
        with pytest.raises(RuntimeError):
            async with conn.begin_nested():  # the claim's savepoint
                await conn.execute(kandev_meta.insert().values(key="undone", value="1"))
                raise RuntimeError("roll the savepoint back")
        async with conn.begin_nested():
            await conn.execute(
                update(kandev_meta).where(kandev_meta.c.key == "kept").values(value="2")
            )
    with pytest.raises(RuntimeError):
        async with sqlite_db.write() as conn:
            await conn.execute(kandev_meta.insert().values(key="rolled-back", value="1"))
            raise RuntimeError("boom")
    assert await meta_value(sqlite_db, "kept") == "2"
    assert await meta_value(sqlite_db, "undone") is None
    assert await meta_value(sqlite_db, "rolled-back") is None


async def test_many_writer_and_reader_tasks_serialize_without_locked_errors(
    sqlite_db: Database,
) -> None:
    async with sqlite_db.write() as conn:
        await conn.execute(kandev_meta.insert().values(key="counter", value="0"))
    seen: list[int] = []

    async def bump() -> None:
        async with sqlite_db.write() as conn:
            query = select(kandev_meta.c.value).where(kandev_meta.c.key == "counter")
            value = int((await conn.execute(query)).scalar_one())
            await asyncio.sleep(0)  # noqa: sleep-ok (a yield: others run meanwhile)
            await conn.execute(
                update(kandev_meta)
                .where(kandev_meta.c.key == "counter")
                .values(value=str(value + 1))
            )

    async def read() -> None:
        seen.append(int(await meta_value(sqlite_db, "counter") or 0))

    await asyncio.gather(*(f() for _ in range(150) for f in (bump, read)))
    assert await meta_value(sqlite_db, "counter") == "150"
    assert len(seen) == 150 and max(seen) <= 150


async def test_a_nested_write_still_fails_fast(sqlite_db: Database) -> None:
    async with sqlite_db.write():
        with pytest.raises(RuntimeError, match=r"nested db\.write"):
            async with sqlite_db.write():
                pass


async def test_waiting_for_another_process_lock_leaves_the_loop_free(
    sqlite_db: Database,
) -> None:
    """The other process holds the write lock: our write waits (asynchronously), the loop
    keeps serving, reads still run (WAL), and the write lands once the lock is let go."""
    async with sqlite_db.read():
        pass  # open the pool's first connection outside the measurement
    locker = await Locker.hold(db_path(sqlite_db))

    async def write() -> None:
        async with sqlite_db.write() as conn:
            await conn.execute(kandev_meta.insert().values(key="after-lock", value="1"))

    writer = asyncio.create_task(write())
    stalls = await loop_stalls(0.4)
    assert not writer.done(), "the write did not wait for the other process's lock"
    assert await meta_value(sqlite_db, "after-lock") is None  # a read is not blocked
    await locker.release()
    await asyncio.wait_for(writer, 10)
    assert max(stalls) < MAX_LOOP_STALL_S, f"the event loop stalled {max(stalls):.3f} s"
    assert await meta_value(sqlite_db, "after-lock") == "1"


async def test_a_lock_held_past_the_busy_budget_is_server_busy(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a busy timeout would: give up after the budget, with nothing written, and with the
    loop free meanwhile. The caller is told to retry (REST: 503), not an internal error."""
    monkeypatch.setattr(engine_module, "SQLITE_BUSY_TIMEOUT_MS", 300)
    fresh = Database(sqlite_db.url)  # its connections take the shorter budget
    try:
        async with fresh.read():
            pass
        locker = await Locker.hold(db_path(fresh))
        try:

            async def write() -> None:
                async with fresh.write() as conn:
                    await conn.execute(kandev_meta.insert().values(key="never", value="1"))

            started = time.monotonic()
            writer = asyncio.create_task(write())
            stalls = await loop_stalls(0.2)
            with pytest.raises(ServerBusy, match="locked by another process") as caught:
                await asyncio.wait_for(writer, 10)
            assert time.monotonic() - started >= 0.3
            assert caught.value.retry_after_seconds >= 1
            assert max(stalls) < MAX_LOOP_STALL_S
        finally:
            await locker.release()
        assert await meta_value(fresh, "never") is None
        async with fresh.write() as conn:  # the connection is usable again
            await conn.execute(kandev_meta.insert().values(key="later", value="1"))
        assert await meta_value(fresh, "later") == "1"
    finally:
        await fresh.dispose()


async def test_wal_checkpoints_run_in_a_worker_thread(sqlite_db: Database) -> None:
    """The automatic checkpoint is only a backstop on the loop's connections; the WAL is
    copied back by the worker every CHECKPOINT_EVERY_WRITES writes."""
    checkpointer = sqlite_db.checkpointer
    assert checkpointer is not None
    async with sqlite_db.read() as conn:
        backstop = (await conn.exec_driver_sql("PRAGMA wal_autocheckpoint")).scalar()
    assert backstop == engine_module.BACKSTOP_PAGES
    before = checkpointer.checkpoints
    main_file = Path(db_path(sqlite_db))
    size_before = file_size(main_file)
    for i in range(2 * checkpointer._every):
        async with sqlite_db.write() as conn:
            await conn.execute(kandev_meta.insert().values(key=f"row{i}", value="x" * 2000))
    await checkpointer.idle()
    assert checkpointer.checkpoints > before
    assert file_size(main_file) > size_before  # the rows reached the database file
    async with sqlite_db.read() as conn:
        count = (await conn.execute(select(func.count()).select_from(kandev_meta))).scalar()
    assert count is not None and count >= 2 * checkpointer._every
