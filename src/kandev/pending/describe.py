"""Task and session JSON with the pending-action projection filled (reference §2.5), in batch.

`pending_action` of a session and `task_pending_action` / `primary_session_pending_action`
of a task come from one projection query over the sessions involved — no query per row;
`pending_clarification_id` of both from one more (clarification.pending_ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.models import Task
from kandev.clarification.pending_ids import (
    pending_bundles_for_sessions,
    session_pending_clarification_id,
    task_pending_clarification_id,
)
from kandev.db.tables import task_sessions
from kandev.pending.projection import (
    pending_actions_for_sessions,
    session_pending_action,
    task_pending_action,
)
from kandev.sessions.models import Session
from kandev.sessions.turns import current_turn_id_subquery


class PendingDescriber:
    """Implements `board.describe.TaskDescriber` and `sessions.describe.SessionDescriber`
    for the services below this package (they are handed one at construction)."""

    async def tasks_json(
        self, conn: AsyncConnection, tasks: Sequence[Task]
    ) -> list[dict[str, Any]]:
        return await tasks_json(conn, tasks)

    async def sessions_json(
        self, conn: AsyncConnection, sessions: Sequence[Session]
    ) -> list[dict[str, Any]]:
        return await sessions_json(conn, sessions)

    async def pending_actions(
        self, conn: AsyncConnection, session_ids: list[str]
    ) -> dict[str, str]:
        return await pending_actions_for_sessions(conn, session_ids)


async def tasks_json(conn: AsyncConnection, tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """Task JSON with both pending-action keys filled."""
    if not tasks:
        return []
    rows = (
        await conn.execute(
            select(
                task_sessions.c.id,
                task_sessions.c.task_id,
                task_sessions.c.state,
                task_sessions.c.is_primary,
            ).where(task_sessions.c.task_id.in_([t.id for t in tasks]))
        )
    ).all()
    actions = await pending_actions_for_sessions(conn, [r.id for r in rows]) if rows else {}
    bundles = await pending_bundles_for_sessions(conn, [r.id for r in rows])
    by_task: dict[str, list[Any]] = {}
    for row in rows:
        by_task.setdefault(row.task_id, []).append(row)
    out = []
    for task in tasks:
        sessions = by_task.get(task.id, [])
        primary = next((r.id for r in sessions if r.is_primary), None)
        out.append(
            task.to_json(
                task_pending_action=task_pending_action(
                    [(r.id, r.state) for r in sessions], actions
                ),
                primary_session_pending_action=(
                    session_pending_action(primary, actions) if primary else None
                ),
                pending_clarification_id=task_pending_clarification_id(
                    [(r.id, r.state) for r in sessions], bundles
                ),
            )
        )
    return out


async def sessions_json(conn: AsyncConnection, sessions: Sequence[Session]) -> list[dict[str, Any]]:
    """Session JSON with current_turn_id and pending_action filled."""
    if not sessions:
        return []
    ids = [s.id for s in sessions]
    current: dict[str, str | None] = dict(
        (
            await conn.execute(
                select(task_sessions.c.id, current_turn_id_subquery(task_sessions.c.id)).where(
                    task_sessions.c.id.in_(ids)
                )
            )
        ).all()
    )
    actions = await pending_actions_for_sessions(conn, ids)
    bundles = await pending_bundles_for_sessions(conn, ids)
    return [
        s.to_json(
            current_turn_id=current.get(s.id),
            pending_action=session_pending_action(s.id, actions),
            pending_clarification_id=session_pending_clarification_id(s.id, bundles),
        )
        for s in sessions
    ]
