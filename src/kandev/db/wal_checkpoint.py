"""Copying SQLite's write-ahead log back into the database file, off the event loop.

With the driver inline (`kandev.db.inline_sqlite`), SQLite's automatic checkpoint would run
on the event loop inside whichever commit crossed the threshold: thousands of pages copied
and an fsync, 10 to 30 ms during which nothing else is served. So the server's connections
raise the automatic threshold to a backstop (`BACKSTOP_PAGES`, reached only if the worker
below falls behind) and `WalCheckpointer` runs a PASSIVE checkpoint in a worker thread after
every `every_writes` committed write transactions. PASSIVE never waits for readers or
writers and runs beside them (WAL allows one checkpointer alongside both); the next writer
then starts the log again from its beginning, so the file stays small.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable

logger = logging.getLogger(__name__)

CHECKPOINT_EVERY_WRITES = 200
BACKSTOP_PAGES = 20_000  # ~80 MB of 4 KiB pages
_BUSY_TIMEOUT_MS = 10_000


class WalCheckpointer:
    """One PASSIVE checkpoint at a time, in a thread, every `every_writes` writes."""

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], every_writes: int = CHECKPOINT_EVERY_WRITES
    ) -> None:
        self._connect = connect
        self._every = every_writes
        self._writes = 0
        self._conn: sqlite3.Connection | None = None  # used by one worker thread at a time
        self._running: asyncio.Future[None] | None = None
        self.checkpoints = 0  # completed, for tests and benchmarks

    def note_write(self) -> None:
        """A write transaction committed; start a checkpoint when it is time and none runs."""
        self._writes += 1
        if self._writes < self._every or (self._running is not None and not self._running.done()):
            return
        self._writes = 0
        self._running = asyncio.ensure_future(asyncio.to_thread(self._checkpoint))
        self._running.add_done_callback(_log_failure)

    def _checkpoint(self) -> None:
        if self._conn is None:
            self._conn = self._connect()
            self._conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")  # a thread may wait
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        self.checkpoints += 1

    async def idle(self) -> None:
        """Wait for the running checkpoint, if any (its failure is only logged)."""
        if self._running is not None:
            await asyncio.wait([self._running])

    async def close(self) -> None:
        await self.idle()
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _log_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("WAL checkpoint failed", exc_info=future.exception())
