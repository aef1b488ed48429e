"""Is this database Kandev's? Checked before anything writes to it.

Kandev migrates the database it is pointed at. Pointed by mistake at someone else's database
(another app's PostgreSQL database, a SQLite file that is not ours), migrating would add
Kandev's tables next to theirs, or worse. So before migrations run:

- an empty database (no tables; a SQLite file that does not exist yet) is Kandev's to create;
- a database with a `kandev_meta` table, or an `alembic_version` naming one of Kandev's
  revisions, is Kandev's;
- anything else is refused (`ForeignDatabase`) and left exactly as it was.

Migrating writes a marker row (`kandev_meta`, key `kandev_schema`) once, so the database says
whose it is independently of Alembic's bookkeeping.

SQLite is inspected through a read-only stdlib connection: the engine's connect hook switches
the file to WAL mode, which would already change a foreign file. A database that cannot be
opened at all is reported as `DatabaseUnavailable`, in one line.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import inspect, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import SQLAlchemyError

from kandev import __version__
from kandev.db.engine import Database
from kandev.db.tables import kandev_meta
from kandev.errors import KandevError

MARKER_KEY = "kandev_schema"
CONNECT_TIMEOUT_SECONDS = 30.0


class ForeignDatabase(KandevError):
    """The database has tables and is not Kandev's: it is not touched."""

    code = "FOREIGN_DATABASE"


class DatabaseUnavailable(KandevError):
    """The database cannot be opened (bad address, credentials, missing database, not SQLite)."""

    code = "DATABASE_UNAVAILABLE"


def display_url(url: str) -> str:
    """The URL as the user typed it, without the password or the async driver name."""
    parsed = make_url(url)
    shown = parsed.set(drivername=parsed.get_backend_name())
    return shown.render_as_string(hide_password=True)


async def check_database_is_kandevs(db: Database) -> None:
    """Raise ForeignDatabase unless the database is empty or Kandev's (see module docstring)."""
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            if db.is_sqlite:
                tables, revisions = await asyncio.to_thread(_sqlite_contents, db.url)
            else:
                async with db.engine.connect() as conn:
                    tables, revisions = await conn.run_sync(_contents)
    except TimeoutError:
        raise DatabaseUnavailable(
            f"cannot open the database {display_url(db.url)}: "
            f"no answer within {CONNECT_TIMEOUT_SECONDS:.0f} s"
        ) from None
    except KandevError:
        raise
    except (OSError, SQLAlchemyError, sqlite3.Error) as exc:
        raise DatabaseUnavailable(
            f"cannot open the database {display_url(db.url)}: {_reason(exc)}"
        ) from exc
    except Exception as exc:  # asyncpg's own errors (wrong password, no such database)
        if type(exc).__module__.startswith("asyncpg"):
            raise DatabaseUnavailable(
                f"cannot open the database {display_url(db.url)}: {_reason(exc)}"
            ) from exc
        raise
    if not tables or "kandev_meta" in tables:
        return
    if "alembic_version" in tables and revisions & _kandev_revisions():
        return
    listed = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
    raise ForeignDatabase(
        f"the database {display_url(db.url)} is not Kandev's (it has other tables: {listed}); "
        "point --database-url at an empty database or at Kandev's own"
    )


def write_marker(connection: Connection) -> None:
    """Record, once, that this database is Kandev's (inside the migration transaction)."""
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    connection.execute(
        dialect.insert(kandev_meta)
        .values(key=MARKER_KEY, value=f"created by Kandev {__version__}")
        .on_conflict_do_nothing(index_elements=[kandev_meta.c.key])
    )


async def read_marker(db: Database) -> str | None:
    async with db.read() as conn:
        query = select(kandev_meta.c.value).where(kandev_meta.c.key == MARKER_KEY)
        return (await conn.execute(query)).scalar()


def _contents(connection: Connection) -> tuple[set[str], set[str]]:
    tables = set(inspect(connection).get_table_names())
    revisions: set[str] = set()
    if "alembic_version" in tables:
        rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version")
        revisions = {row[0] for row in rows}
    return tables, revisions


def _sqlite_contents(url: str) -> tuple[set[str], set[str]]:
    database = make_url(url).database
    if not database or database == ":memory:" or not Path(database).exists():
        return set(), set()
    # mode=ro: inspecting must not change the file (no WAL switch, no journal, no creation).
    conn = sqlite3.connect(f"file:{quote(str(Path(database).resolve()))}?mode=ro", uri=True)
    try:
        try:
            rows = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise DatabaseUnavailable(
                    f"{database} is not a SQLite database; move it away or point "
                    "--database-url elsewhere"
                ) from None
            raise
        tables = {row[0] for row in rows}
        revisions: set[str] = set()
        if "alembic_version" in tables:
            revisions = {r[0] for r in conn.execute("SELECT version_num FROM alembic_version")}
        return tables, revisions
    finally:
        conn.close()


def _kandev_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    from kandev.db.migrate import alembic_config

    return {
        script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()
    }


def _reason(exc: BaseException) -> str:
    """One line saying why, without SQLAlchemy's SQL echo and background links."""
    root: Any = getattr(exc, "orig", None) or exc
    if isinstance(root, ConnectionRefusedError):
        return "connection refused (is PostgreSQL running there?)"
    if isinstance(root, OSError) and root.strerror:
        return root.strerror
    text = str(root) or type(root).__name__
    text = re.sub(r"^<class '[\w.]+'>: ", "", text)  # SQLAlchemy's asyncpg adapter prefix
    return " ".join(text.split())
