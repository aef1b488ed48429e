"""A second process holding SQLite's write lock, for tests of waiting on it."""

from __future__ import annotations

import asyncio
import sys

# A second process that takes SQLite's write lock and holds it until told to let go.
LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
print("released", flush=True)
"""


class Locker:
    """The other process, holding the write lock on the file."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def hold(cls, path: str) -> Locker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            LOCKER,
            path,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.strip() == b"locked"
        return cls(proc)

    async def release(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"go\n")
        await self.proc.stdin.drain()
        assert (await asyncio.wait_for(self.proc.stdout.readline(), 30)).strip() == b"released"
        await asyncio.wait_for(self.proc.wait(), 30)
