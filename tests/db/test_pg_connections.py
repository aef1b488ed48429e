"""PostgreSQL transactions keep their connections open between them (kandev.db.shelf) and
are begun and committed on the driver (kandev.db.pg_transaction), with SQLAlchemy's
semantics kept: a failed body rolls back, a failed COMMIT raises the same exception class
`conn.commit()` raises, a connection a transaction failed on is not reused, and dispose
hands every connection back."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError

from kandev.db.engine import POSTGRES_SHELF, Database
from tests.db.cancelled import cancel_inside_a_write


@pytest.fixture
def pg(db: Database, database_kind: str) -> Database:
    if database_kind != "postgres":
        pytest.skip("SQLite's writer and readers: tests/db/test_sqlite_writer.py")
    return db


@pytest.fixture
def checkouts(pg: Database) -> list[object]:
    seen: list[object] = []
    pool = pg.engine.sync_engine.pool
    record = lambda *args: seen.append(args[0])  # noqa: E731
    event.listen(pool, "checkout", record)
    yield seen
    event.remove(pool, "checkout", record)


async def _values(db: Database) -> list[int]:
    async with db.read() as conn:
        return list((await conn.execute(text("SELECT v FROM shelf_probe ORDER BY v"))).scalars())


async def _create(db: Database) -> None:
    async with db.write() as conn:
        await conn.execute(text("CREATE TABLE shelf_probe (v int PRIMARY KEY)"))


async def test_transactions_reuse_open_connections(pg: Database, checkouts: list[object]) -> None:
    await _create(pg)
    for value in range(5):
        async with pg.write() as conn:
            await conn.execute(text("INSERT INTO shelf_probe VALUES (:v)"), {"v": value})
        async with pg.write_one() as conn:
            await conn.execute(text("UPDATE shelf_probe SET v = v WHERE v = :v"), {"v": value})
        assert await _values(pg) == list(range(value + 1))
    # One connection for the transactions, one for the autocommit reads and one-statement
    # writes, each checked out once: not one checkout per transaction.
    assert len(checkouts) == 2, checkouts
    assert pg.engine.sync_engine.pool.checkedout() == 2
    await pg.dispose()
    assert pg.engine.sync_engine.pool.checkedout() == 0


async def test_a_failed_body_rolls_back_and_its_connection_is_not_kept(
    pg: Database, checkouts: list[object]
) -> None:
    await _create(pg)
    with pytest.raises(ZeroDivisionError):
        async with pg.write() as conn:
            await conn.execute(text("INSERT INTO shelf_probe VALUES (1)"))
            raise ZeroDivisionError
    async with pg.write() as conn:
        await conn.execute(text("INSERT INTO shelf_probe VALUES (2)"))
    assert await _values(pg) == [2]
    assert len(checkouts) == 3  # the write that failed handed its connection back


async def test_a_failed_commit_raises_what_sqlalchemy_raises_and_writes_nothing(
    pg: Database,
) -> None:
    async with pg.write() as conn:
        await conn.execute(text("CREATE TABLE shelf_parent (id int PRIMARY KEY)"))
        await conn.execute(
            text(
                "CREATE TABLE shelf_child "
                "(parent int REFERENCES shelf_parent DEFERRABLE INITIALLY DEFERRED)"
            )
        )
    with pytest.raises(IntegrityError):  # the deferred check fails at COMMIT
        async with pg.write() as conn:
            await conn.execute(text("INSERT INTO shelf_child VALUES (7)"))
    async with pg.write() as conn:  # the next transaction is a clean one
        await conn.execute(text("INSERT INTO shelf_parent VALUES (7)"))
        await conn.execute(text("INSERT INTO shelf_child VALUES (7)"))
    async with pg.read() as conn:
        rows = (await conn.execute(text("SELECT parent FROM shelf_child"))).scalars().all()
    assert rows == [7]


async def test_a_cancelled_transaction_leaves_nothing_open(pg: Database) -> None:
    await _create(pg)
    await cancel_inside_a_write(pg, "INSERT INTO shelf_probe VALUES (1)")
    async with pg.write() as conn:
        await conn.execute(text("INSERT INTO shelf_probe VALUES (2)"))
    assert await _values(pg) == [2]
    assert pg.engine.sync_engine.pool.checkedout() == 2  # the cancelled one went back


async def test_more_transactions_at_once_than_the_shelf_keeps(pg: Database) -> None:
    """Twenty transactions holding their connections at once (a barrier inside them), twice:
    the shelf keeps 15 of them between rounds, the rest go back to the pool; all commit."""
    await _create(pg)
    at_once = POSTGRES_SHELF + 5

    async def round_of(first: int) -> None:
        inside = asyncio.Barrier(at_once)

        async def insert(value: int) -> None:
            async with pg.write() as conn:
                await conn.execute(text("INSERT INTO shelf_probe VALUES (:v)"), {"v": value})
                await inside.wait()  # every one of them holds its connection now

        async with asyncio.timeout(30):
            await asyncio.gather(*(insert(first + n) for n in range(at_once)))

    await round_of(0)
    await round_of(at_once)
    assert await _values(pg) == list(range(2 * at_once))
    # Kept open: a full shelf of transaction connections and the one the read used.
    assert pg.engine.sync_engine.pool.checkedout() == POSTGRES_SHELF + 1


async def test_the_longest_hot_statements_stay_prepared(pg: Database) -> None:
    """asyncpg keeps prepared only statements up to `max_cacheable_statement_size`; a longer
    one is parsed and planned on every execution (the turn end's session view, over asyncpg's
    15 KiB default, planned ~6 ms each time). Every way of describing sessions, with the
    turn end's extra columns or not, stays a named prepared statement of its connection."""
    from kandev.moves.repository import turn_end_columns
    from kandev.pending.view import _direct

    params = {"view_session_id": "none", "view_task_state": "REVIEW", "view_ids": ["none"]}
    async with pg.write() as conn:
        for choice in ("session", "session_task", "session_or_changing_task", "others", "tasks"):
            for columns in ((), (turn_end_columns,)):
                statement = _direct(choice, columns)
                await statement.rows(conn, params)
                sql = statement._compiled_for(conn.dialect, params).sql  # as executed
                prepared = await conn.execute(
                    text("SELECT count(*) FROM pg_prepared_statements WHERE statement = :sql"),
                    {"sql": sql},
                )
                assert prepared.scalar_one() == 1, (choice, columns, len(sql))
