"""Which databases Kandev agrees to migrate (kandev.db.ownership), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from kandev.db.engine import Database
from kandev.db.migrate import head_revision, upgrade_to_head
from kandev.db.ownership import (
    MARKER_KEY,
    ForeignDatabase,
    check_database_is_kandevs,
    read_marker,
)


async def _execute(db: Database, *statements: str) -> None:
    async with db.engine.begin() as conn:
        for statement in statements:
            await conn.execute(text(statement))


async def test_an_empty_database_is_ours_and_migrating_marks_it(database_url: str) -> None:
    db = Database(database_url)
    try:
        await check_database_is_kandevs(db)
        await upgrade_to_head(db)
        marker = await read_marker(db)
        assert marker is not None and marker.startswith("created by Kandev")
        await check_database_is_kandevs(db)
        await upgrade_to_head(db)  # the marker is written once
        async with db.read() as conn:
            count = await conn.execute(
                text("SELECT count(*) FROM kandev_meta WHERE key = :k"), {"k": MARKER_KEY}
            )
            assert count.scalar() == 1
    finally:
        await db.dispose()


async def test_someone_elses_tables_are_refused(database_url: str) -> None:
    db = Database(database_url)
    try:
        await _execute(db, "CREATE TABLE customers (id INTEGER PRIMARY KEY)")
        with pytest.raises(ForeignDatabase, match="customers"):
            await check_database_is_kandevs(db)
        # Someone else's Alembic bookkeeping does not make it ours either.
        await _execute(
            db,
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)",
            "INSERT INTO alembic_version VALUES ('abc123')",
        )
        with pytest.raises(ForeignDatabase, match="alembic_version, customers"):
            await check_database_is_kandevs(db)
    finally:
        await db.dispose()


async def test_our_alembic_revision_without_the_meta_table_is_ours(database_url: str) -> None:
    db = Database(database_url)
    try:
        await _execute(
            db,
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)",
            f"INSERT INTO alembic_version VALUES ('{head_revision()}')",
        )
        await check_database_is_kandevs(db)
    finally:
        await db.dispose()
