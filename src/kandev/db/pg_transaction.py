"""A PostgreSQL transaction framed on the driver: no greenlet switch to begin or commit it.

`AsyncConnection.begin()` and its commit each switch into SQLAlchemy's sync layer through a
greenlet (~30-40 us apiece here) to reach asyncpg, whose BEGIN is sent lazily with the
first statement anyway (the adapter's `_start_transaction`, which `kandev.db.direct` calls
too). This opens SQLAlchemy's transaction with its sync `begin()` (no I/O on asyncpg: the
dialect's do_begin does nothing; the "begin" event fires as before), commits asyncpg's
transaction on the driver, then closes SQLAlchemy's, which finds nothing left to send.

A failed COMMIT (a deferred constraint, a dropped connection) is raised as the same
`sqlalchemy.exc.DBAPIError` subclass `conn.commit()` raises; anything raised in the body
rolls back through SQLAlchemy as before. Pinned to the adapter of the SQLAlchemy version in
pyproject.toml, as kandev.db.direct is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.util import greenlet_spawn


@asynccontextmanager
async def pg_transaction(conn: AsyncConnection) -> AsyncIterator[AsyncConnection]:
    sync = conn.sync_connection
    assert sync is not None, "the connection is not started"
    transaction = sync.begin()
    transaction.__enter__()  # a context as `with conn.begin()` is: its exit decides below
    try:
        yield conn
    except BaseException as exc:
        # Rolled back through SQLAlchemy, as `async with conn.begin()` does (the driver's
        # ROLLBACK when BEGIN was sent).
        await greenlet_spawn(transaction.__exit__, type(exc), exc, exc.__traceback__)
        raise
    adapter: Any = sync.connection.dbapi_connection
    if adapter._transaction is not None:  # BEGIN was sent: COMMIT on the driver
        try:
            await adapter._call_and_discard(adapter._transaction.commit)
        except Exception as exc:
            # The driver's transaction is gone; SQLAlchemy's is rolled back with nothing
            # to send, and the error raised as conn.commit() would have raised it.
            await greenlet_spawn(transaction.__exit__, type(exc), exc, exc.__traceback__)
            raise _translated(sync.dialect, adapter, exc) from exc
    transaction.__exit__(None, None, None)  # commits: the adapter finds nothing to send


def _translated(dialect: Any, adapter: Any, error: Exception) -> Exception:
    try:
        adapter._handle_exception(error)  # raises the adapter's DB-API error for it
    except Exception as dbapi_error:
        error = dbapi_error
    base = dialect.loaded_dbapi.Error
    if isinstance(error, DBAPIError) or not isinstance(error, base):
        return error
    return DBAPIError.instance("COMMIT", None, error, base)
