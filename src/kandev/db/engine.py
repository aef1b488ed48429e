"""Engines for SQLite (embedded default) and PostgreSQL, and the two transaction kinds.

SQLite: WAL, foreign keys and synchronous=NORMAL on every connection; write transactions
open with BEGIN IMMEDIATE and queue on an asyncio lock, so two writers never meet on the
file lock; they share one connection, kept open between them. The driver runs sqlite3
inline on the event loop (`kandev.db.inline_sqlite`): no thread hop per statement; a lock
held by another process is waited for with an async backoff, never by blocking the loop.
PostgreSQL: an asyncpg pool; per-row serialization uses row locks or advisory locks inside
the repositories that need them.

Both: at most `max_transactions` transactions hold a connection at once (reads on SQLite,
which queues writes on its lock); the rest queue here, first come first served, and one that
waited `queue_timeout` seconds (for a slot or for the write lock) fails with `ServerBusy`
(REST: 503 + Retry-After) instead of timing out inside the pool. The pool holds more than
that, so a transaction opened inside another (which takes no slot) never waits for one.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util import await_

from kandev.db import json_codec
from kandev.db.inline_sqlite import BUSY_CODES, connect_sqlite, inline_creator
from kandev.db.pg_transaction import pg_transaction
from kandev.db.shelf import ConnectionShelf, close_quietly
from kandev.db.wal_checkpoint import BACKSTOP_PAGES, WalCheckpointer
from kandev.errors import ServerBusy

SQLITE_BUSY_TIMEOUT_MS = 10_000
AUTOCOMMIT = "AUTOCOMMIT"
# The pool keeps a connection for every slot (and SQLite's writer): connections beyond
# pool_size are closed when returned, and with the waiters queued here rather than in the
# pool, a burst would otherwise open and close connections all the time. The overflow is
# for transactions nested inside another (they take no slot).
SQLITE_MAX_READS = 8
SQLITE_POOL_SIZE = SQLITE_MAX_READS + 1  # + the writer
SQLITE_MAX_OVERFLOW = 10
# As many transactions at once as the pool used to allow: each holds its slot across
# round trips to the server, so fewer slots cost throughput under a burst on a busy loop.
POSTGRES_MAX_TRANSACTIONS = 30
POSTGRES_POOL_SIZE = POSTGRES_MAX_TRANSACTIONS
POSTGRES_MAX_OVERFLOW = 20  # up to 50 connections
POSTGRES_SHELF = POSTGRES_POOL_SIZE // 2  # kept open between transactions, per kind
DEFAULT_QUEUE_TIMEOUT_S = 30.0
# The longest statement asyncpg keeps prepared (its default is 15 KiB): every hot statement
# is shorter (tests/db/test_pg_connections.py checks the longest ones).
POSTGRES_MAX_CACHED_STATEMENT = 64 * 1024
# PostgreSQL: a pooled connection idle longer than this is pinged before use (a restarted
# server or a dropped socket is then found by the ping, not by the request). One used more
# recently is not: SQLAlchemy's pre-ping costs three round trips (BEGIN, ping, ROLLBACK) on
# every checkout, as much as the statements of a short transaction.
POSTGRES_PING_IDLE_S = 2.0
RETRY_AFTER_SECONDS = 1
_BEGIN_OPTION = "kandev_sqlite_begin"
_BEGIN_SQL = {mode: f"BEGIN {mode}" for mode in ("DEFERRED", "IMMEDIATE")}
# The task inside db.write(): the same task opening a second write would wait on itself.
# (A task spawned meanwhile inherits the value but is a different task, so it may write.)
_writing_task: ContextVar[object | None] = ContextVar("kandev_writing_task", default=None)
# The task holding a connection slot: a transaction it opens inside that one (a read inside
# a write) takes no second slot, or a full house of such tasks would wait on each other.
# The pool's overflow holds those inner connections.
_slot_task: ContextVar[object | None] = ContextVar("kandev_slot_task", default=None)


class Database:
    """One engine plus `read()` / `write()` transactions; repositories take connections."""

    def __init__(
        self,
        url: str,
        *,
        echo: bool = False,
        queue_timeout: float = DEFAULT_QUEUE_TIMEOUT_S,
        ping_idle_s: float = POSTGRES_PING_IDLE_S,
    ) -> None:
        self.url = url
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        self.queue_timeout = queue_timeout
        # LIFO: a quiet server keeps using the connection it used last, whose prepared
        # statements (asyncpg's cache, sqlite3's) and pages are warm; FIFO rotated every
        # request through the whole pool, each connection preparing each statement anew.
        kwargs: dict[str, Any] = {
            "echo": echo,
            "pool_use_lifo": True,
            "json_deserializer": json_codec.loads,
        }
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs.update(
                pool_size=SQLITE_POOL_SIZE,
                max_overflow=SQLITE_MAX_OVERFLOW,
                async_creator=self._sqlite_creator(),
            )
            self.max_transactions = SQLITE_MAX_READS
        else:
            kwargs.update(
                pool_size=POSTGRES_POOL_SIZE,
                max_overflow=POSTGRES_MAX_OVERFLOW,
                # Every statement is prepared once per connection; a generic plan skips
                # re-planning it on each execution (custom plans re-planned the session view
                # every time). Safe here: the code's constants are SQL literals
                # (kandev.db.sql_literals), so a generic plan still proves the partial
                # indexes, and the remaining parameters are ids and keyset bounds.
                connect_args={
                    "server_settings": {"plan_cache_mode": "force_generic_plan"},
                    # asyncpg prepares (and caches) only statements up to this size; a longer
                    # one is parsed and planned on every execution — for the session view
                    # with its other-sessions aggregate (~15 KiB), ~6 ms of planning.
                    "max_cacheable_statement_size": POSTGRES_MAX_CACHED_STATEMENT,
                },
            )
            self.max_transactions = POSTGRES_MAX_TRANSACTIONS
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        # SQLite has one writer. Queueing writers here, in order, instead of letting them
        # poll the file lock keeps a burst of writes from ending in "database is locked".
        self._write_lock: asyncio.Lock | None = None
        self._slots: asyncio.Semaphore | None = None
        self._writer: AsyncConnection | None = None  # SQLite: see _sqlite_writer
        # Connections kept open between transactions (kandev.db.shelf). SQLite: its readers
        # (writes share self._writer). PostgreSQL: autocommit ones for reads and one-statement
        # writes, and the transactions' (`_writers`), each half of the pool's size.
        if self.is_sqlite:
            self._readers = ConnectionShelf(self.engine, SQLITE_MAX_READS)
            self._writers = ConnectionShelf(self.engine, 0)  # unused: writes share _writer
        else:
            self._readers = ConnectionShelf(
                self.engine,
                POSTGRES_SHELF,
                options={"isolation_level": AUTOCOMMIT},
                ping_idle_s=ping_idle_s,
            )
            self._writers = ConnectionShelf(self.engine, POSTGRES_SHELF, ping_idle_s=ping_idle_s)
        self.checkpointer: WalCheckpointer | None = None
        if self.is_postgres:
            _install_idle_ping(self.engine, ping_idle_s)
        if self.is_sqlite:
            _install_sqlite_hooks(self.engine)
            if parsed.database and parsed.database != ":memory:":
                self.checkpointer = WalCheckpointer(self._sqlite_connect)

    def _sqlite_creator(self) -> Any:
        def create() -> Any:
            # The dialect's own reading of the URL (path, uri=, check_same_thread).
            args, kwargs = self.engine.dialect.create_connect_args(self.engine.url)
            return inline_creator(args, kwargs, SQLITE_BUSY_TIMEOUT_MS / 1000)()

        return create

    def _sqlite_connect(self) -> sqlite3.Connection:
        args, kwargs = self.engine.dialect.create_connect_args(self.engine.url)
        return connect_sqlite(args, kwargs, check_same_thread=False)

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgresql"

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read. On PostgreSQL it runs in autocommit: under READ COMMITTED each statement
        sees its own snapshot inside a transaction too, so BEGIN and COMMIT would only add
        two round trips; locks need a write transaction (`require_transaction`)."""
        with _locked_elsewhere_is_busy():
            async with (
                self._slot(),
                self._readers.connection() as conn,
                self._transaction(conn),
            ):
                yield conn

    @asynccontextmanager
    async def write(self, *, one_statement: bool = False) -> AsyncIterator[AsyncConnection]:
        """A write transaction: committed on success, rolled back on any exception.
        (`one_statement`: see `write_one`.)"""
        task = asyncio.current_task()
        if task is not None and _writing_task.get() is task:
            raise RuntimeError("nested db.write(): pass the open connection down instead")
        token = _writing_task.set(task)
        try:
            if self.is_sqlite:
                if self._write_lock is None:
                    self._write_lock = asyncio.Lock()
                await self._queue(self._write_lock.acquire())
                slot_token = _slot_task.set(task)  # reads inside the write take no slot
                try:
                    with _locked_elsewhere_is_busy():
                        conn = await self._sqlite_writer()
                        try:
                            async with conn.begin():
                                yield conn
                        except BaseException:
                            # Rolled back. A fresh connection for the next writer: whatever
                            # failed (or was cancelled mid-rollback) leaves nothing behind.
                            await self._drop_sqlite_writer()
                            raise
                    if self.checkpointer is not None:  # committed
                        self.checkpointer.note_write()
                finally:
                    _slot_task.reset(slot_token)
                    self._write_lock.release()
            else:
                shelf = self._readers if one_statement else self._writers
                async with self._slot(), shelf.connection() as conn, pg_transaction(conn):
                    yield conn
        finally:
            _writing_task.reset(token)

    def _transaction(self, conn: AsyncConnection) -> AbstractAsyncContextManager[Any]:
        return conn.begin() if self.is_sqlite else pg_transaction(conn)

    def write_one(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A write of one statement (reads after it may follow: what they read is already
        committed). PostgreSQL runs it in autocommit — one statement is atomic by itself,
        and BEGIN and COMMIT would add two round trips to its one; SQLite: a `write()`.
        Two writes in it would not be one transaction on PostgreSQL: use `write()`."""
        return self.write(one_statement=True)

    async def _sqlite_writer(self) -> AsyncConnection:
        """SQLite's one writer connection, kept open between write transactions (under the
        write lock): a checkout, execution options and a checkin per write cost three times
        the BEGIN IMMEDIATE … COMMIT of an empty transaction."""
        if self._writer is None:
            conn = await self.engine.connect()
            self._writer = await conn.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
        return self._writer

    async def _drop_sqlite_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            await close_quietly(writer)

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """One of `max_transactions` connection slots, queued for at most `queue_timeout`."""
        task = asyncio.current_task()
        if task is not None and _slot_task.get() is task:
            yield  # already holds one (see _slot_task)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_transactions)
        await self._queue(self._slots.acquire())
        token = _slot_task.set(task)
        try:
            yield
        finally:
            _slot_task.reset(token)
            self._slots.release()

    async def _queue(self, acquire: Any) -> None:
        """Await `acquire` (a lock's or semaphore's: first come, first served), for at most
        `queue_timeout` seconds."""
        try:
            async with asyncio.timeout(self.queue_timeout):
                await acquire
        except TimeoutError:
            raise ServerBusy(
                f"the database is busy: waited {self.queue_timeout:g} s for a connection; "
                f"retry in {RETRY_AFTER_SECONDS} s",
                retry_after_seconds=RETRY_AFTER_SECONDS,
            ) from None

    async def dispose(self) -> None:
        # The writer goes back to the pool first (unless a write still holds it: the
        # engine's disposal then leaves that connection to its transaction's end).
        if self._write_lock is None or not self._write_lock.locked():
            await self._drop_sqlite_writer()
        await self._readers.close()
        await self._writers.close()
        if self.checkpointer is not None:
            await self.checkpointer.close()
        await self.engine.dispose()


@contextmanager
def _locked_elsewhere_is_busy() -> Iterator[None]:
    """SQLite: another process held the lock for the whole busy budget. The transaction has
    been rolled back, so this is a ServerBusy (retry later), not an internal error."""
    try:
        yield
    except (DBAPIError, sqlite3.OperationalError) as exc:
        # BEGIN runs straight on the driver (see _on_begin): its error is sqlite3's own.
        orig = exc.orig if isinstance(exc, DBAPIError) else exc
        if isinstance(orig, sqlite3.OperationalError) and orig.sqlite_errorcode in BUSY_CODES:
            raise ServerBusy(
                f"the database is locked by another process; retry in {RETRY_AFTER_SECONDS} s",
                retry_after_seconds=RETRY_AFTER_SECONDS,
            ) from exc
        raise


def _install_idle_ping(engine: AsyncEngine, idle_s: float) -> None:
    """Pessimistic disconnect handling for connections that sat idle (see
    POSTGRES_PING_IDLE_S): a failed ping makes the pool discard the connection and take
    another (DisconnectionError is the pool's signal to retry the checkout)."""
    pool = engine.sync_engine.pool

    @event.listens_for(pool, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["kandev_idle_since"] = time.monotonic()

    @event.listens_for(pool, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("kandev_idle_since")
        if since is None or time.monotonic() - since < idle_s:
            return  # new, or in use a moment ago
        try:
            dbapi_connection.ping()
        except Exception as exc:
            raise DisconnectionError(f"an idle connection failed its ping: {exc}") from exc


def _install_sqlite_hooks(engine: AsyncEngine) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN away from the driver so we can say DEFERRED or IMMEDIATE ourselves.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # No busy wait inside SQLite: it would block the event loop (the inline driver
        # retries SQLITE_BUSY with an async backoff for SQLITE_BUSY_TIMEOUT_MS instead).
        cursor.execute("PRAGMA busy_timeout=0")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints run in a worker thread (kandev.db.wal_checkpoint); this is the backstop.
        cursor.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        # Straight to the inline driver (its busy retry included): a full SQLAlchemy
        # execution of BEGIN cost a quarter of an empty transaction.
        await_(conn.connection.driver_connection.execute_now(_BEGIN_SQL[mode]))


def require_transaction(conn: AsyncConnection) -> None:
    """A transaction-scoped lock taken on an autocommit read would be released at once."""
    if conn.sync_connection is not None and (
        conn.sync_connection.get_execution_options().get("isolation_level") == AUTOCOMMIT
    ):
        raise RuntimeError("a lock needs a write transaction (db.write()), not db.read()")
