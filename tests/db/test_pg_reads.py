"""PostgreSQL reads run in autocommit (no BEGIN/COMMIT round trips: under READ COMMITTED a
transaction gives a read nothing), writes in a transaction; a lock asked for on a read is
refused instead of being released at once. A one-statement write (`write_one`) runs in
autocommit too."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy import text

from kandev.db.engine import Database
from kandev.sessions.turns import lock_session_turn_and_row, lock_session_turns

LOCK_KEY = 424242


async def _held_elsewhere(url: str) -> bool:
    """Does another session hold advisory lock LOCK_KEY (asked from a separate connection)?"""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        got = await conn.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY)
        if got:
            await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
        return not got
    finally:
        await conn.close()


@pytest.fixture
def pg(db: Database, database_kind: str) -> Database:
    if database_kind != "postgres":
        pytest.skip("SQLite reads and writes are transactions of their own kind")
    return db


async def test_a_read_statement_is_its_own_transaction(pg: Database, database_url: str) -> None:
    lock = text("SELECT pg_advisory_xact_lock(:key)")
    async with pg.read() as conn:
        await conn.execute(lock, {"key": LOCK_KEY})
        # Autocommit: the transaction-scoped lock ended with its statement.
        assert not await _held_elsewhere(database_url)
    async with pg.write() as conn:
        await conn.execute(lock, {"key": LOCK_KEY})
        assert await _held_elsewhere(database_url)  # a write is one transaction
    assert not await _held_elsewhere(database_url)


async def test_session_locks_refuse_a_read(pg: Database) -> None:
    async with pg.read() as conn:
        with pytest.raises(RuntimeError, match="write transaction"):
            await lock_session_turns(conn, pg, ["s1"])
        with pytest.raises(RuntimeError, match="write transaction"):
            await lock_session_turn_and_row(conn, pg, "s1")
    async with pg.write() as conn:  # the same calls in a write take the locks
        await lock_session_turns(conn, pg, ["s1"])
        await lock_session_turn_and_row(conn, pg, "s1")


async def test_a_read_does_not_leave_autocommit_on_its_pooled_connection(
    pg: Database,
) -> None:
    """The autocommit setting does not leak into the writes after reads on the same pooled
    connections: a failed write still rolls back, a good one commits."""
    async with pg.write() as conn:
        await conn.execute(text("CREATE TABLE t_reads (v int)"))
    for value in (1, 2, 3):
        with pytest.raises(ZeroDivisionError):
            async with pg.write() as conn:
                await conn.execute(text("INSERT INTO t_reads VALUES (:v)"), {"v": value})
                raise ZeroDivisionError
        async with pg.read() as conn:
            counted = await conn.execute(text("SELECT count(*) FROM t_reads"))
            assert counted.scalar_one() == 0
    async with pg.write() as conn:
        await conn.execute(text("INSERT INTO t_reads VALUES (4)"))
    async with pg.read() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM t_reads"))).scalar_one() == 1


async def test_a_one_statement_write_is_its_own_transaction(
    pg: Database, database_url: str
) -> None:
    """`write_one` sends its statement without BEGIN/COMMIT (autocommit: two round trips
    fewer); the pooled connection goes back to transactions for the next `write()`."""
    lock = text("SELECT pg_advisory_xact_lock(:key)")
    async with pg.write_one() as conn:
        await conn.execute(lock, {"key": LOCK_KEY})
        assert not await _held_elsewhere(database_url)  # ended with its statement
    async with pg.write() as conn:
        await conn.execute(text("CREATE TABLE t_one (v int)"))
    with pytest.raises(ZeroDivisionError):
        async with pg.write_one() as conn:
            await conn.execute(text("INSERT INTO t_one VALUES (1)"))
            raise ZeroDivisionError
    for _ in range(3):  # every pooled connection: a failed write() still rolls back
        with pytest.raises(ZeroDivisionError):
            async with pg.write() as conn:
                await conn.execute(text("INSERT INTO t_one VALUES (2)"))
                raise ZeroDivisionError
    async with pg.read() as conn:
        values = (await conn.execute(text("SELECT v FROM t_one"))).scalars().all()
    assert values == [1]  # the one statement was committed by itself, nothing else
