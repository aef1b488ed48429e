"""One `kandev serve` per database.

A server owns everything live in its database: at start it puts right what an earlier server
left (sessions whose agent is gone, agent processes it recorded — killed by pid) and from then
on it alone runs the agents. A second server on the same database would take the first one's
live sessions for leftovers and kill its agents. The data dir's lock (kandev.startup) cannot
see that when two data dirs point at one database, so the server also holds the database:

- PostgreSQL: a session-level advisory lock on a connection of its own (autocommit, so it is
  never idle in a transaction), named in `pg_stat_activity` by its `application_name`. The
  lock goes when the connection does — with the server, however it ends.
- SQLite: an exclusive `flock` on `<database file>.serve-lock` beside it; the kernel drops it
  when the process dies. Not on the database file itself: closing any descriptor of a file
  drops every `fcntl` lock the process holds on it, and SQLite's locks are `fcntl` locks.

Offline commands (`kandev user create`, `token create`, `gc`) do not take it: they run beside
a live server on purpose.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from sqlalchemy import make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.db.engine import Database
from kandev.db.ownership import display_url
from kandev.errors import KandevError

# The advisory lock's key (any bigint; this one spells "kandev" in ASCII).
SERVE_LOCK_KEY = 0x6B616E646576
APPLICATION_NAME = "kandev serve"
LOCK_WAIT = "3s"  # how long a starting server waits for the hold of one that just went away
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's lock_timeout error


class DatabaseInUse(KandevError):
    """Another `kandev serve` holds the database."""

    code = "DATABASE_IN_USE"


def _in_use(db: Database, holder: str) -> DatabaseInUse:
    return DatabaseInUse(
        f"another Kandev server ({holder}) is using the database {display_url(db.url)}; "
        "one server per database: stop it first, or give this one its own database"
    )


@asynccontextmanager
async def serving(db: Database) -> AsyncIterator[None]:
    """Hold `db` for this server until the block ends; DatabaseInUse if another server does."""
    if db.is_postgres:
        async with _postgres_lock(db):
            yield
    else:
        with _sqlite_lock(db):
            yield


@asynccontextmanager
async def _postgres_lock(db: Database) -> AsyncIterator[None]:
    me = f"{APPLICATION_NAME} pid {os.getpid()} on {socket.gethostname()}"
    conn = await db.engine.connect()
    try:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(
            text("SELECT set_config('application_name', :name, false)"), {"name": me}
        )
        # Waits a little for the lock: a server killed a moment ago holds it until PostgreSQL
        # notices its connection is gone (a restart right after a crash must not fail).
        await conn.execute(
            text("SELECT set_config('lock_timeout', :wait, false)"), {"wait": LOCK_WAIT}
        )
        try:
            await conn.execute(
                text("SELECT pg_advisory_lock(CAST(:key AS bigint))"), {"key": SERVE_LOCK_KEY}
            )
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                raise
            raise _in_use(db, await _postgres_holder(conn)) from None
        yield
    finally:
        # Closed, not handed back to the pool: the session ends, and its lock with it.
        await conn.invalidate()
        await conn.close()


async def _postgres_holder(conn: AsyncConnection) -> str:
    """The holder's `application_name` (and address), from the lock table."""
    row = (
        await conn.execute(
            text(
                "SELECT a.application_name, a.client_addr FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND l.classid::bigint = (CAST(:key AS bigint) >> 32) "
                "AND l.objid::bigint = (CAST(:key AS bigint) & 4294967295) "
                "AND l.objsubid = 1"
            ),
            {"key": SERVE_LOCK_KEY},
        )
    ).first()
    if row is None:
        return "it has just stopped, or is stopping"
    name, address = row
    return f"{name or 'unnamed'}{f' from {address}' if address else ''}"


@contextmanager
def _sqlite_lock(db: Database) -> Iterator[None]:
    database = make_url(db.url).database
    if not database or database == ":memory:":
        yield
        return
    fd = os.open(f"{database}.serve-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_use(db, "another process holds the file") from None
        yield
    finally:
        os.close(fd)
