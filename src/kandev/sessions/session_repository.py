"""SQL for task sessions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.task_repository import with_task_owner
from kandev.catalog.states import TERMINAL_STATES
from kandev.db.tables import task_sessions
from kandev.sessions.models import Session
from kandev.sessions.turns import turn_lock_column


async def get_session_row(conn: AsyncConnection, session_id: str) -> RowMapping | None:
    return (
        (await conn.execute(select(task_sessions).where(task_sessions.c.id == session_id)))
        .mappings()
        .first()
    )


async def get_session_authorizable(
    conn: AsyncConnection, session_id: str, *, lock_turn: bool = False
) -> tuple[Session, RowMapping] | None:
    """The session, and the row the access rules authorize its task from (one statement).
    `lock_turn`: on PostgreSQL the same statement takes the session's turn lock."""
    joined, owner_columns = with_task_owner(task_sessions, task_sessions.c.task_id)
    if lock_turn and conn.dialect.name == "postgresql":
        owner_columns.append(turn_lock_column(task_sessions.c.id).label("turn_lock"))
    row = (
        (
            await conn.execute(
                select(task_sessions, *owner_columns)
                .select_from(joined)
                .where(task_sessions.c.id == session_id)
            )
        )
        .mappings()
        .first()
    )
    return (Session.from_row(row), row) if row is not None else None


async def get_session(conn: AsyncConnection, session_id: str) -> Session | None:
    row = await get_session_row(conn, session_id)
    return Session.from_row(row) if row else None


async def session_task_id(conn: AsyncConnection, session_id: str) -> Any:
    return (
        await conn.execute(select(task_sessions.c.task_id).where(task_sessions.c.id == session_id))
    ).scalar_one_or_none()


async def count_task_sessions(conn: AsyncConnection, task_id: str) -> int:
    return (
        await conn.execute(
            select(func.count())
            .select_from(task_sessions)
            .where(task_sessions.c.task_id == task_id)
        )
    ).scalar_one()


async def insert_session(conn: AsyncConnection, values: dict[str, Any]) -> Session:
    await conn.execute(insert(task_sessions).values(**values))
    session = await get_session(conn, values["id"])
    assert session is not None
    return session


async def list_task_sessions(conn: AsyncConnection, task_id: str) -> list[Session]:
    rows = (
        await conn.execute(
            select(task_sessions)
            .where(task_sessions.c.task_id == task_id)
            .order_by(task_sessions.c.started_at, task_sessions.c.id)
        )
    ).mappings()
    return [Session.from_row(r) for r in rows]


async def list_sessions_in_states(conn: AsyncConnection, states: Sequence[str]) -> list[Session]:
    rows = (
        await conn.execute(select(task_sessions).where(task_sessions.c.state.in_(states)))
    ).mappings()
    return [Session.from_row(r) for r in rows]


async def update_session(
    conn: AsyncConnection,
    session_id: str,
    values: dict[str, Any],
    *,
    only_from: Sequence[str] | None = None,
) -> bool:
    """Update a session; with `only_from`, only when its state is one of those (a CAS)."""
    query = update(task_sessions).where(task_sessions.c.id == session_id)
    if only_from is not None:
        query = query.where(task_sessions.c.state.in_(only_from))
    result = await conn.execute(query.values(**values))
    return result.rowcount > 0


async def set_state_unless_terminal(
    conn: AsyncConnection, session_id: str, state: str, now: datetime, **extra: Any
) -> bool:
    """Move a live session to `state`; a terminal session never changes again."""
    result = await conn.execute(
        update(task_sessions)
        .where(task_sessions.c.id == session_id, task_sessions.c.state.not_in(TERMINAL_STATES))
        .values(state=state, updated_at=now, **extra)
    )
    return result.rowcount > 0


async def set_state_returning(
    conn: AsyncConnection, session_id: str, state: str, now: datetime, **extra: Any
) -> Session | None:
    """`set_state_unless_terminal`, giving the changed row back (None: nothing changed)."""
    row = (
        (
            await conn.execute(
                update(task_sessions)
                .where(
                    task_sessions.c.id == session_id,
                    task_sessions.c.state.not_in(TERMINAL_STATES),
                )
                .values(state=state, updated_at=now, **extra)
                .returning(*task_sessions.c)
            )
        )
        .mappings()
        .first()
    )
    return Session.from_row(row) if row else None
