"""Engines for SQLite (embedded default) and PostgreSQL, and the two transaction kinds.

SQLite: WAL, a busy timeout and foreign keys on every connection; write transactions open
with BEGIN IMMEDIATE so two writers queue on the lock instead of failing half-way with
SQLITE_BUSY. PostgreSQL: a plain asyncpg pool; per-row serialization uses row locks or
advisory locks inside the repositories that need them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 10_000
_BEGIN_OPTION = "kandev_sqlite_begin"
# The task inside db.write(): the same task opening a second write would wait on itself.
# (A task spawned meanwhile inherits the value but is a different task, so it may write.)
_writing_task: ContextVar[object | None] = ContextVar("kandev_writing_task", default=None)


class Database:
    """One engine plus `read()` / `write()` transactions; repositories take connections."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        kwargs: dict[str, Any] = {"echo": echo}
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["pool_size"] = 8
        else:
            kwargs.update(pool_size=10, max_overflow=20, pool_pre_ping=True)
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        # SQLite has one writer. Queueing writers here, in order, instead of letting them
        # poll the file lock keeps a burst of writes from ending in "database is locked".
        self._write_lock: asyncio.Lock | None = None
        if self.is_sqlite:
            _install_sqlite_hooks(self.engine)

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgresql"

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn, conn.begin():
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction: committed on success, rolled back on any exception."""
        task = asyncio.current_task()
        if task is not None and _writing_task.get() is task:
            raise RuntimeError("nested db.write(): pass the open connection down instead")
        token = _writing_task.set(task)
        try:
            if self.is_sqlite:
                if self._write_lock is None:
                    self._write_lock = asyncio.Lock()
                async with self._write_lock, self.engine.connect() as conn:
                    conn = await conn.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
                    async with conn.begin():
                        yield conn
            else:
                async with self.engine.connect() as conn, conn.begin():
                    yield conn
        finally:
            _writing_task.reset(token)

    async def dispose(self) -> None:
        await self.engine.dispose()


def _install_sqlite_hooks(engine: AsyncEngine) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN away from the driver so we can say DEFERRED or IMMEDIATE ourselves.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")
