"""Task and session JSON with the pending-action projection filled (reference §2.5), in batch.

`pending_action` / `pending_clarification_id` of a session and `task_pending_action` /
`primary_session_pending_action` / `pending_clarification_id` of a task come from one
statement over the sessions involved (pending.view) — no query per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.models import Task
from kandev.pending.view import TaskView, view_of_session_task, view_of_sessions, view_of_tasks
from kandev.sessions.describe import ViewColumns
from kandev.sessions.models import Session


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

    async def view_of_session_task(
        self,
        conn: AsyncConnection,
        session_id: str,
        *,
        task_changing_to: str | None = None,
        all_sessions: bool = False,
        columns: tuple[ViewColumns, ...] = (),
    ) -> TaskView:
        return await view_of_session_task(
            conn,
            session_id,
            task_changing_to=task_changing_to,
            all_sessions=all_sessions,
            columns=columns,
        )

    async def view_of_sessions(self, conn: AsyncConnection, session_ids: Sequence[str]) -> TaskView:
        return await view_of_sessions(conn, session_ids)


async def tasks_json(conn: AsyncConnection, tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """Task JSON with both pending-action keys filled (one statement)."""
    if not tasks:
        return []
    view = await view_of_tasks(conn, [t.id for t in tasks])
    return [view.task_json(task) for task in tasks]


async def sessions_json(conn: AsyncConnection, sessions: Sequence[Session]) -> list[dict[str, Any]]:
    """Session JSON with current_turn_id and pending_action filled (one statement)."""
    if not sessions:
        return []
    view = await view_of_sessions(conn, [s.id for s in sessions])
    out = []
    for session in sessions:
        if view.session(session.id) is None:  # gone meanwhile: describe the row as given
            out.append(session.to_json())
            continue
        view.replace_session(session)  # the caller's row is the one it describes
        out.append(view.session_json(session.id))
    return out
