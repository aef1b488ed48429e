"""SQLite's write transactions share one connection, kept open between them; a write that
fails or is cancelled is rolled back and the next one starts on a fresh connection. Reads
keep theirs open too (one per concurrent read); one a read failed on is not reused."""

from __future__ import annotations

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from kandev.db.engine import Database
from tests.db.cancelled import cancel_inside_a_write


@pytest.fixture
def sqlite(db: Database, database_kind: str) -> Database:
    if database_kind != "sqlite":
        pytest.skip("PostgreSQL writers take pooled connections, one per transaction")
    return db


async def _table(db: Database) -> None:
    async with db.write() as conn:
        await conn.execute(text("CREATE TABLE writer_probe (id INTEGER PRIMARY KEY)"))


async def _count(db: Database) -> int:
    async with db.read() as conn:
        return (await conn.execute(text("SELECT count(*) FROM writer_probe"))).scalar_one()


async def test_writes_reuse_one_connection(sqlite: Database) -> None:
    await _table(sqlite)
    seen = set()
    for i in range(3):
        async with sqlite.write() as conn:
            await conn.execute(text("INSERT INTO writer_probe (id) VALUES (:i)"), {"i": i})
            seen.add(id(conn))  # the same SQLAlchemy connection: no checkout per write
    assert len(seen) == 1
    assert await _count(sqlite) == 3


async def test_a_failed_write_rolls_back_and_the_next_gets_a_fresh_connection(
    sqlite: Database,
) -> None:
    await _table(sqlite)
    async with sqlite.write() as before:
        pass
    with pytest.raises(ZeroDivisionError):
        async with sqlite.write() as conn:
            await conn.execute(text("INSERT INTO writer_probe (id) VALUES (1)"))
            raise ZeroDivisionError
    async with sqlite.write() as conn:
        assert conn is not before  # the failed one went back to the pool (reset there)
        await conn.execute(text("INSERT INTO writer_probe (id) VALUES (2)"))
    assert await _count(sqlite) == 1  # the failed insert was rolled back


async def test_a_cancelled_write_leaves_nothing_open(sqlite: Database) -> None:
    await _table(sqlite)
    await cancel_inside_a_write(sqlite, "INSERT INTO writer_probe (id) VALUES (1)")
    async with sqlite.write() as conn:  # the write lock is free, no transaction is left open
        await conn.execute(text("INSERT INTO writer_probe (id) VALUES (2)"))
    assert await _count(sqlite) == 1


async def test_dispose_returns_the_writer_and_the_readers(sqlite: Database) -> None:
    await _table(sqlite)
    await _count(sqlite)
    pool = sqlite.engine.sync_engine.pool
    # Between transactions the Database holds its writer and its idle reader.
    assert pool.checkedout() == 2
    await sqlite.dispose()
    assert pool.checkedout() == 0


async def test_reads_reuse_an_open_connection_and_drop_one_a_read_failed_on(
    sqlite: Database,
) -> None:
    await _table(sqlite)
    checkouts = 0

    def counted(*_: object) -> None:
        nonlocal checkouts
        checkouts += 1

    event.listen(sqlite.engine.sync_engine.pool, "checkout", counted)
    for _ in range(5):
        assert await _count(sqlite) == 0
    assert checkouts == 1  # one connection, kept open between the reads
    with pytest.raises(OperationalError):
        async with sqlite.read() as conn:
            await conn.execute(text("SELECT * FROM no_such_table"))
    assert await _count(sqlite) == 0
    assert checkouts == 2  # the failed read's connection went back; a fresh one serves
