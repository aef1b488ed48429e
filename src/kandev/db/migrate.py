"""Apply Alembic migrations in-process, on either database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from kandev.db.engine import Database
from kandev.db.ownership import write_marker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


async def upgrade_to_head(db: Database) -> None:
    def _run(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), "head")
        write_marker(connection)  # once: this database is Kandev's (kandev.db.ownership)

    async with db.engine.begin() as conn:
        await conn.run_sync(_run)


async def current_revision(db: Database) -> str | None:
    def _read(connection: Connection) -> Any:
        return MigrationContext.configure(connection).get_current_revision()

    async with db.engine.connect() as conn:
        return await conn.run_sync(_read)
