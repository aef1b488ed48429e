"""An aiosqlite connection that runs its sqlite3 calls inline, on the event loop.

aiosqlite sends every call (execute, fetch, commit, even `cursor()`) to a worker thread and
back: a thread hop per call, where the SQL itself runs in microseconds on a local WAL file
with synchronous=NORMAL (no fsync at commit). `InlineConnection` is the same class with the
hop taken out, so SQLAlchemy's aiosqlite dialect drives it unchanged (it is handed over by
`create_async_engine(..., async_creator=...)`): one transaction costs no thread hop.

What could block the loop instead is a lock held by *another process* (an offline `kandev`
command writing the same file). So the connection has no busy timeout (`PRAGMA
busy_timeout=0`: SQLite answers SQLITE_BUSY at once) and a statement that gets SQLITE_BUSY
is retried here, after an `asyncio.sleep` with backoff, until the busy budget is spent; then
the error is raised, "database is locked", as a busy timeout would have. Only plain
SQLITE_BUSY (and BUSY_RECOVERY) is retried: it means nothing was done, and it is exactly the
case a busy handler would have retried. Writers inside this process never meet it, since
`Database.write()` queues them on an asyncio lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import aiosqlite

# SQLITE_BUSY and SQLITE_BUSY_RECOVERY: the lock was not taken, nothing was done.
BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_BUSY_RECOVERY})
_FIRST_BACKOFF_S = 0.001
_MAX_BACKOFF_S = 0.05
# Calls that may meet another process's lock. Fetches and closes never take a new lock
# (the read snapshot is taken by the statement's first step, in execute), and retrying a
# half-consumed fetch would not be the same call.
_RETRIED_CALLS = frozenset({"execute", "executemany", "executescript", "commit", "connect"})


class _InlineQueue:
    """Stands in for aiosqlite's queue to its worker thread (SQLAlchemy's isolation-level
    setter puts a (future, function) pair on it directly): runs the function now."""

    def put_nowait(self, item: tuple[asyncio.Future[Any] | None, Callable[[], Any]]) -> None:
        future, function = item
        try:
            result = function()
        except BaseException as exc:  # handed to the awaiting caller, as the thread would
            if future is not None and not future.done():
                future.set_exception(exc)
            return
        if future is not None and not future.done():
            future.set_result(result)


class InlineConnection(aiosqlite.Connection):
    """`aiosqlite.Connection` without its worker thread (see the module docstring)."""

    def __init__(self, connector: Callable[[], sqlite3.Connection], busy_timeout_s: float):
        # Deliberately not aiosqlite's __init__: it builds the worker thread.
        self._running = True
        self._connection: sqlite3.Connection | None = None
        self._connector = connector
        self._tx = _InlineQueue()  # type: ignore[assignment]
        self._iter_chunk_size = 64
        self._busy_timeout_s = busy_timeout_s

    def __await__(self) -> Any:
        return self._connect().__await__()

    async def _connect(self) -> InlineConnection:
        if self._connection is None:
            self._connection = await self._run(self._connector, "connect")
        return self

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self._running or not self._connection:
            raise ValueError("Connection closed")
        return await self._run(partial(fn, *args, **kwargs), getattr(fn, "__name__", ""))

    async def _run(self, call: Callable[[], Any], name: str) -> Any:
        try:
            return call()
        except sqlite3.OperationalError as exc:
            if name not in _RETRIED_CALLS or exc.sqlite_errorcode not in BUSY_CODES:
                raise
        return await self._retry_busy(call)

    async def execute_now(self, sql: str, parameters: Sequence[Any] = ()) -> sqlite3.Cursor:
        """`sql` straight on the sqlite3 connection, with the busy retry: for callers that
        bypass SQLAlchemy's execution (kandev.db.direct, the engine's BEGIN)."""
        if self._connection is None:
            raise ValueError("Connection closed")
        cursor: sqlite3.Cursor = await self._run(
            partial(self._connection.execute, sql, parameters), "execute"
        )
        return cursor

    async def _retry_busy(self, call: Callable[[], Any]) -> Any:
        """Another process holds the lock: wait for it without blocking the loop."""
        deadline = time.monotonic() + self._busy_timeout_s
        backoff = _FIRST_BACKOFF_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return call()  # one last try; its "database is locked" is the answer
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
            try:
                return call()
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode not in BUSY_CODES:
                    raise

    def stop(self) -> None:
        """Close at once (aiosqlite stops its thread here; there is none)."""
        self._running = False
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __del__(self) -> None:
        if self._connection is not None:  # never closed: close quietly, like sqlite3 would
            self.stop()


def connect_sqlite(
    args: Sequence[Any], kwargs: Mapping[str, Any], **overrides: Any
) -> sqlite3.Connection:
    """sqlite3.connect(*args, **kwargs) with `overrides`; args/kwargs as the dialect's
    `create_connect_args(url)` gives them, so URL options keep their meaning."""
    connect: Callable[..., sqlite3.Connection] = sqlite3.connect
    return connect(*args, **{**kwargs, **overrides})


def inline_creator(
    args: Sequence[Any], kwargs: Mapping[str, Any], busy_timeout_s: float
) -> Callable[[], InlineConnection]:
    """The `async_creator` for `create_async_engine`. Autocommit stays with the driver off
    (isolation_level=None) because the engine emits BEGIN itself."""

    def create() -> InlineConnection:
        return InlineConnection(
            partial(connect_sqlite, args, kwargs, isolation_level=None), busy_timeout_s
        )

    return create
