"""Current-turn authority: which turn of a session is "current". Used everywhere.

The current turn is the newest *authoritative* turn by (started_at, created_at, id), all
descending. A turn is authoritative unless it is an empty, unattempted dispatch
reservation: `prompt_dispatch_pending` set, `prompt_dispatch_attempted` not set, and no
message references it. `completed_at` plays no part: a finished turn stays current until a
newer authoritative one exists. (reference clarification-baseline §1.4)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    FromClause,
    ScalarSelect,
    Select,
    exists,
    func,
    literal,
    not_,
    or_,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog.messages import DISPATCH_ATTEMPTED_KEY, DISPATCH_PENDING_KEY
from kandev.db.direct import DirectStatement
from kandev.db.engine import Database, require_transaction
from kandev.db.json_sql import json_truthy
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_session_turns as turns
from kandev.sessions import turn_repository as turns_repo

TURN_LOCK_PREFIX = "task-session-turn:"


def turn_is_authoritative(turn_table: FromClause = turns) -> ColumnElement[bool]:
    return or_(
        not_(json_truthy(turn_table.c.metadata, DISPATCH_PENDING_KEY)),
        json_truthy(turn_table.c.metadata, DISPATCH_ATTEMPTED_KEY),
        exists().where(messages.c.turn_id == turn_table.c.id),
    )


def current_turn_id_subquery(session_id: ColumnElement[str]) -> ScalarSelect[str]:
    """A correlated scalar subquery: the current turn id of the given session column/value."""
    candidate = turns.alias("authority_turn")
    return (
        select(candidate.c.id)
        .where(candidate.c.session_id == session_id, turn_is_authoritative(candidate))
        .order_by(
            candidate.c.started_at.desc(), candidate.c.created_at.desc(), candidate.c.id.desc()
        )
        .limit(1)
        .scalar_subquery()
    )


def _current_turn(session_id: str, *columns: ColumnElement[Any]) -> Select[Any]:
    return (
        select(*columns)
        .where(turns.c.session_id == session_id, turn_is_authoritative())
        .order_by(turns.c.started_at.desc(), turns.c.created_at.desc(), turns.c.id.desc())
        .limit(1)
    )


async def current_turn_id(conn: AsyncConnection, session_id: str) -> str | None:
    return (await conn.execute(_current_turn(session_id, turns.c.id))).scalar_one_or_none()


class AskingTurn(NamedTuple):
    id: str
    over: bool  # its end was already recorded (the agent asked and at once ended its turn)


async def asking_turn(
    conn: AsyncConnection,
    session_id: str,
    task_id: str,
    new_id: Callable[[], str],
    now: datetime,
) -> AskingTurn:
    """The turn a question or permission request belongs to: the current one (read with
    whether it has ended, in the same statement), or a new turn for an agent that asks
    before any prompt."""
    query = _current_turn(session_id, turns.c.id, turns.c.completed_at)
    row = (await conn.execute(query)).first()
    if row is not None:
        return AskingTurn(row.id, row.completed_at is not None)
    turn = await turns_repo.insert_turn(
        conn, id=new_id(), session_id=session_id, task_id=task_id, now=now
    )
    return AskingTurn(turn.id, False)


def turn_lock_column(session_id: ColumnElement[str]) -> ColumnElement[object]:
    """PostgreSQL: the session's turn lock (the same key as `lock_session_turns`) as a column
    of a statement that reads the session anyway, so taking it costs no statement."""
    key = literal(TURN_LOCK_PREFIX) + session_id
    return func.pg_advisory_xact_lock(func.hashtextextended(key, 0))


async def lock_session_turns(conn: AsyncConnection, db: Database, session_ids: list[str]) -> None:
    """Serialize current-turn decisions per session on PostgreSQL (SQLite: the write lock).

    Every transaction that creates a turn or decides on the current turn takes this lock,
    sessions in sorted order so two multi-session transactions cannot deadlock.
    """
    if not db.is_postgres:
        return
    require_transaction(conn)
    for session_id in sorted(set(session_ids)):
        await conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": f"{TURN_LOCK_PREFIX}{session_id}"},
        )


_TURN_AND_ROW_LOCK = DirectStatement(
    text(
        "SELECT pg_advisory_xact_lock(hashtextextended(:key, 0)) "
        "FROM task_sessions WHERE id = :session_id FOR UPDATE"
    )
)


async def lock_session_turn_and_row(conn: AsyncConnection, db: Database, session_id: str) -> None:
    """PostgreSQL: the session's turn lock, then its row FOR UPDATE, in one statement (the
    claim family's lock). The advisory lock is taken while the row is read, before the row
    lock, so the order is the same as `lock_session_turns` followed by a FOR UPDATE (no
    deadlock with writers that take them one after the other); tests/db proves the order."""
    if not db.is_postgres:
        return
    require_transaction(conn)
    await _TURN_AND_ROW_LOCK.run(
        conn, {"key": f"{TURN_LOCK_PREFIX}{session_id}", "session_id": session_id}
    )
