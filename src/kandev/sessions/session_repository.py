"""SQL for task sessions."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.task_repository import with_task_owner
from kandev.catalog.states import TERMINAL_STATES
from kandev.db.direct import DirectStatement
from kandev.db.engine import require_transaction
from kandev.db.sql_literals import constant
from kandev.db.tables import task_sessions
from kandev.sessions.models import Session
from kandev.sessions.turns import turn_lock_column


async def get_session_row(conn: AsyncConnection, session_id: str) -> RowMapping | None:
    return (
        (await conn.execute(select(task_sessions).where(task_sessions.c.id == session_id)))
        .mappings()
        .first()
    )


@functools.cache
def _authorizable_statement(lock_turn: bool) -> DirectStatement:
    """Built once per kind (`session_id` a bind parameter): the prompt's first read."""
    joined, owner_columns = with_task_owner(task_sessions, task_sessions.c.task_id)
    if lock_turn:
        owner_columns.append(turn_lock_column(task_sessions.c.id).label("turn_lock"))
    return DirectStatement(
        select(task_sessions, *owner_columns)
        .select_from(joined)
        .where(task_sessions.c.id == bindparam("session_id"))
    )


async def get_session_authorizable(
    conn: AsyncConnection, session_id: str, *, lock_turn: bool = False
) -> tuple[Session, Mapping[Any, Any]] | None:
    """The session, and the row the access rules authorize its task from (one statement).
    `lock_turn`: on PostgreSQL the same statement takes the session's turn lock."""
    lock_turn = lock_turn and conn.dialect.name == "postgresql"
    if lock_turn:
        require_transaction(conn)
    statement = _authorizable_statement(lock_turn)
    row = await statement.first(conn, {"session_id": session_id})
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


@functools.cache
def _set_state_statement(extra: tuple[str, ...]) -> DirectStatement:
    """Built once per set of extra columns; every value a bind parameter."""
    values: dict[str, Any] = {
        "state": bindparam("new_state"),
        "updated_at": bindparam("now", type_=task_sessions.c.updated_at.type),
    }
    values.update(
        {key: bindparam(f"extra_{key}", type_=task_sessions.c[key].type) for key in extra}
    )
    return DirectStatement(
        update(task_sessions)
        .where(
            task_sessions.c.id == bindparam("session_id"),
            task_sessions.c.state.not_in([constant(s) for s in TERMINAL_STATES]),
        )
        .values(**values)
        .returning(*task_sessions.c)
    )


async def set_state_returning(
    conn: AsyncConnection, session_id: str, state: str, now: datetime, **extra: Any
) -> Session | None:
    """`set_state_unless_terminal`, giving the changed row back (None: nothing changed)."""
    params = {"session_id": session_id, "new_state": state, "now": now}
    params.update({f"extra_{key}": value for key, value in extra.items()})
    statement = _set_state_statement(tuple(sorted(extra)))
    row = await statement.first(conn, params)
    return Session.from_row(row) if row else None
