"""SQL for turns (one prompt → response cycle of a session)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.db.direct import DirectStatement
from kandev.db.tables import task_session_turns as turns
from kandev.sessions.models import Turn

# The two statements of every turn, built once (values as parameters).
_INSERT = DirectStatement(insert(turns))
_COMPLETE = DirectStatement(
    update(turns)
    .where(turns.c.id == bindparam("turn_id"), turns.c.completed_at.is_(None))
    .values(
        completed_at=bindparam("now", type_=turns.c.completed_at.type),
        updated_at=bindparam("now", type_=turns.c.updated_at.type),
    )
)


async def insert_turn(
    conn: AsyncConnection,
    *,
    id: str,
    session_id: str,
    task_id: str,
    now: datetime,
    metadata: dict[str, Any] | None = None,
) -> Turn:
    turn = Turn(
        id=id,
        session_id=session_id,
        task_id=task_id,
        started_at=now,
        completed_at=None,
        metadata=metadata or {},
        created_at=now,
        updated_at=now,
    )
    # The row's columns as they are (asdict would deep-copy the metadata and datetimes).
    await _INSERT.run(conn, {k: getattr(turn, k) for k in Turn.__dataclass_fields__})
    return turn


async def get_turn(conn: AsyncConnection, turn_id: str) -> Turn | None:
    row = (await conn.execute(select(turns).where(turns.c.id == turn_id))).mappings().first()
    return Turn.from_row(row) if row else None


async def complete_turn(conn: AsyncConnection, turn_id: str, now: datetime) -> bool:
    return await _COMPLETE.run(conn, {"turn_id": turn_id, "now": now}) > 0


async def complete_open_turns(conn: AsyncConnection, session_id: str, now: datetime) -> int:
    result = await conn.execute(
        update(turns)
        .where(turns.c.session_id == session_id, turns.c.completed_at.is_(None))
        .values(completed_at=now, updated_at=now)
    )
    return result.rowcount


async def open_turn_id(conn: AsyncConnection, session_id: str) -> str | None:
    """The newest turn that has not completed (the turn an agent is working on)."""
    return (
        await conn.execute(
            select(turns.c.id)
            .where(turns.c.session_id == session_id, turns.c.completed_at.is_(None))
            .order_by(turns.c.started_at.desc(), turns.c.created_at.desc(), turns.c.id.desc())
            .limit(1)
        )
    ).scalar_one_or_none()
