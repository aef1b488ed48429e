"""Migrations build the whole schema from an empty database, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import inspect

from kandev.db.engine import Database
from kandev.db.migrate import current_revision, head_revision, upgrade_to_head
from kandev.db.tables import metadata


async def _table_columns(db: Database) -> dict[str, set[str]]:
    def read(sync_conn):  # type: ignore[no-untyped-def]
        insp = inspect(sync_conn)
        return {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()}

    async with db.engine.connect() as conn:
        return await conn.run_sync(read)


async def test_migrations_create_the_schema_from_empty(database_url: str) -> None:
    db = Database(database_url)
    try:
        assert await _table_columns(db) == {}
        assert await current_revision(db) is None
        await upgrade_to_head(db)
        columns = await _table_columns(db)
        for name, table in metadata.tables.items():
            assert columns.get(name) == {c.name for c in table.columns}, name
        assert set(columns) == set(metadata.tables) | {"alembic_version"}
        assert await current_revision(db) == head_revision()
        await upgrade_to_head(db)  # a second start is a no-op
        assert await current_revision(db) == head_revision()
    finally:
        await db.dispose()


async def test_sqlite_connections_use_wal_foreign_keys_and_an_async_busy_wait(
    sqlite_url: str,
) -> None:
    """No busy wait inside SQLite (it would block the event loop): the inline driver waits
    for another process's lock itself, asynchronously (tests/db/test_inline_sqlite.py)."""
    db = Database(sqlite_url)
    try:
        async with db.read() as conn:
            assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
            assert (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar() == 0
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver._busy_timeout_s >= 5
    finally:
        await db.dispose()


async def test_bundle_lookups_use_the_pending_id_index(db: Database) -> None:
    """The expression index exists and the planner picks it for a pending_id lookup."""
    from sqlalchemy import select

    from kandev.db.json_sql import json_key_text
    from kandev.db.tables import task_session_messages as messages

    query = select(messages.c.id).where(json_key_text(messages.c.metadata, "pending_id") == "x")
    async with db.read() as conn:
        compiled = query.compile(conn.sync_connection, compile_kwargs={"literal_binds": True})
        if db.is_sqlite:
            plan = (await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}")).all()
            detail = " ".join(str(row[-1]) for row in plan)
        else:
            await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")  # tiny test table
            plan = (await conn.exec_driver_sql(f"EXPLAIN {compiled}")).all()
            detail = " ".join(str(row[0]) for row in plan)
    assert "ix_task_session_messages_pending_id" in detail, detail
