"""SQL for deferred moves (`pending_moves`) and the bounded record of consumed move ids
(`applied_moves`).

One pending move per session (UNIQUE session_id): storing a new one replaces the old row,
and with it the old move's hand-off instructions, which live in the row itself rather than
in the prompt queue. A move id is recorded in `applied_moves` in the same transaction that
consumes its pending row (applied, found already in place, or dropped), so a row brought back
later can never act twice. The record is pruned in that same transaction: the newest
`KEEP_PER_SESSION` ids per session, none older than `MAX_AGE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, delete, exists, insert, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog.states import TERMINAL_STATES
from kandev.db.direct import DirectStatement
from kandev.db.tables import applied_moves, pending_moves, task_sessions, tasks, workflow_steps

KEEP_PER_SESSION = 20
MAX_AGE = timedelta(days=7)


@dataclass(frozen=True)
class PendingMove:
    id: str
    move_id: str
    session_id: str
    task_id: str
    workflow_id: str
    workflow_step_id: str
    step_position: int | None
    prompt: str
    instructions: str
    reset: bool
    skip: bool
    actor: str
    sender_session_id: str
    metadata: dict[str, Any]
    queued_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> PendingMove:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})


async def get_pending(conn: AsyncConnection, session_id: str) -> PendingMove | None:
    row = (
        (await conn.execute(select(pending_moves).where(pending_moves.c.session_id == session_id)))
        .mappings()
        .first()
    )
    return PendingMove.from_row(row) if row else None


async def replace_pending(conn: AsyncConnection, values: dict[str, Any]) -> PendingMove | None:
    """Store the session's pending move; returns the one it replaced (now deleted)."""
    replaced = await get_pending(conn, values["session_id"])
    if replaced is not None:
        await delete_pending(conn, replaced.id)
    await conn.execute(insert(pending_moves).values(**values))
    return replaced


async def delete_pending(conn: AsyncConnection, pending_id: str) -> None:
    await conn.execute(delete(pending_moves).where(pending_moves.c.id == pending_id))


async def pending_for_task(conn: AsyncConnection, task_id: str) -> list[PendingMove]:
    rows = (
        await conn.execute(
            select(pending_moves)
            .where(pending_moves.c.task_id == task_id)
            .order_by(pending_moves.c.queued_at, pending_moves.c.id)
        )
    ).mappings()
    return [PendingMove.from_row(r) for r in rows]


async def pending_of_ended_sessions(conn: AsyncConnection) -> list[PendingMove]:
    """Pending moves whose session is terminal: no turn of theirs will ever end again."""
    rows = (
        await conn.execute(
            select(pending_moves)
            .join(task_sessions, task_sessions.c.id == pending_moves.c.session_id)
            .where(task_sessions.c.state.in_(TERMINAL_STATES))
            .order_by(pending_moves.c.queued_at, pending_moves.c.id)
        )
    ).mappings()
    return [PendingMove.from_row(r) for r in rows]


async def was_consumed(conn: AsyncConnection, move_id: str) -> bool:
    found = (
        await conn.execute(
            select(applied_moves.c.move_id).where(applied_moves.c.move_id == move_id)
        )
    ).first()
    return found is not None


async def record_consumed(
    conn: AsyncConnection,
    move_id: str,
    session_id: str,
    now: datetime,
    *,
    keep_per_session: int = KEEP_PER_SESSION,
    max_age: timedelta = MAX_AGE,
) -> None:
    """Record a move id as consumed and prune the record, in the caller's transaction."""
    if not await was_consumed(conn, move_id):
        await conn.execute(
            insert(applied_moves).values(move_id=move_id, session_id=session_id, applied_at=now)
        )
    newest = (
        select(applied_moves.c.move_id)
        .where(applied_moves.c.session_id == session_id)
        .order_by(applied_moves.c.applied_at.desc(), applied_moves.c.move_id.desc())
        .limit(keep_per_session)
    )
    await conn.execute(
        delete(applied_moves).where(
            applied_moves.c.session_id == session_id, applied_moves.c.move_id.not_in(newest)
        )
    )
    await conn.execute(delete(applied_moves).where(applied_moves.c.applied_at < now - max_age))


@dataclass(frozen=True)
class TurnEndFacts:
    """What a turn's end could have to do with moves: a deferred move waiting, and the
    task's current step (its name says whether it may be terminal; its events whether
    turn-complete automation exists)."""

    has_pending_move: bool
    step_name: str | None
    step_events: dict[str, Any]


# The facts' labels, in the turn end's view and in their own statement alike.
TASK_KEY, PENDING_KEY = "turn_end_task_id", "turn_end_has_pending_move"
NAME_KEY, EVENTS_KEY = "turn_end_step_name", "turn_end_step_events"


def _facts_columns(session_id: Any, task_id: Any) -> list[Any]:
    """The facts as labeled columns for a session and task (columns or parameters)."""
    of_task = (
        select(tasks.c.id, workflow_steps.c.name, workflow_steps.c.events)
        .select_from(
            tasks.outerjoin(workflow_steps, workflow_steps.c.id == tasks.c.workflow_step_id)
        )
        .where(tasks.c.id == task_id)
    )
    return [
        of_task.with_only_columns(tasks.c.id).scalar_subquery().label(TASK_KEY),
        exists().where(pending_moves.c.session_id == session_id).label(PENDING_KEY),
        of_task.with_only_columns(workflow_steps.c.name).scalar_subquery().label(NAME_KEY),
        of_task.with_only_columns(workflow_steps.c.events).scalar_subquery().label(EVENTS_KEY),
    ]


def turn_end_columns(described: Any) -> list[Any]:
    """The facts of each described session (a `sessions.describe.ViewColumns`): the turn
    end reads them in its view statement, not in a statement of their own."""
    return _facts_columns(described.c.id, described.c.task_id)


def turn_end_facts_of(extra: Mapping[str, Any] | None) -> TurnEndFacts | None:
    """The facts `turn_end_columns` read for a session; None when the task is gone (or
    the view was read without them)."""
    if extra is None or extra.get(TASK_KEY) is None:
        return None
    return TurnEndFacts(bool(extra[PENDING_KEY]), extra[NAME_KEY], dict(extra[EVENTS_KEY] or {}))


# Read at a turn's end outside the turn-end view (MoveService.on_turn_end): built once.
_TURN_END_FACTS = DirectStatement(
    select(*_facts_columns(bindparam("session_id"), bindparam("task_id")))
)


async def turn_end_facts(
    conn: AsyncConnection, session_id: str, task_id: str
) -> TurnEndFacts | None:
    """One statement; None when the task is gone."""
    row = await _TURN_END_FACTS.first(conn, {"session_id": session_id, "task_id": task_id})
    return turn_end_facts_of(row)
