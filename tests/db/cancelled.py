"""A write cancelled while its transaction is open (shared by the engine tests)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from kandev.db.engine import Database


async def cancel_inside_a_write(db: Database, insert: str) -> None:
    """Run `insert` in a write, then cancel the write before it commits."""
    entered = asyncio.Event()

    async def stuck() -> None:
        async with db.write() as conn:
            await conn.execute(text(insert))
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(stuck())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
