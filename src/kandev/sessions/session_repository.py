"""SQL for task sessions (the parts the foundation needs; the runtime adds the rest)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.db.tables import task_sessions


async def get_session_row(conn: AsyncConnection, session_id: str) -> RowMapping | None:
    return (
        (await conn.execute(select(task_sessions).where(task_sessions.c.id == session_id)))
        .mappings()
        .first()
    )


async def session_task_id(conn: AsyncConnection, session_id: str) -> Any:
    return (
        await conn.execute(select(task_sessions.c.task_id).where(task_sessions.c.id == session_id))
    ).scalar_one_or_none()
