"""SQL for tasks."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    FromClause,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.access.sql import hangs_off_visible_workspace
from kandev.board.models import Task
from kandev.db.direct import DirectStatement
from kandev.db.tables import task_file_reviews, task_review_snapshots, tasks, workflows, workspaces


async def insert_task(conn: AsyncConnection, values: dict[str, Any]) -> Task:
    await conn.execute(insert(tasks).values(**values))
    task = await get_task(conn, values["id"])
    assert task is not None
    return task


async def get_task(conn: AsyncConnection, task_id: str) -> Task | None:
    row = (await conn.execute(select(tasks).where(tasks.c.id == task_id))).mappings().first()
    return Task.from_row(row) if row else None


async def next_position_in_step(conn: AsyncConnection, step_id: str) -> int:
    current = (
        await conn.execute(
            select(func.max(tasks.c.position)).where(tasks.c.workflow_step_id == step_id)
        )
    ).scalar_one()
    return 0 if current is None else current + 1


async def shift_positions_from(
    conn: AsyncConnection, step_id: str, position: int, exclude_task_id: str
) -> None:
    """Make room at `position` in a step by pushing later tasks down one place."""
    await conn.execute(
        update(tasks)
        .where(
            tasks.c.workflow_step_id == step_id,
            tasks.c.position >= position,
            tasks.c.id != exclude_task_id,
        )
        .values(position=tasks.c.position + 1)
    )


async def update_task(conn: AsyncConnection, task_id: str, values: dict[str, Any]) -> None:
    await conn.execute(update(tasks).where(tasks.c.id == task_id).values(**values))


async def change_task_state(conn: AsyncConnection, task_id: str, state: str, now: datetime) -> bool:
    """Set the task's state; False when it already had it (nothing written)."""
    result = await conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id, tasks.c.state != state)
        .values(state=state, updated_at=now)
    )
    return result.rowcount > 0


@functools.cache
def _change_state_statement(guarded_by_from: bool) -> DirectStatement:
    """Built once per guard; every value a bind parameter."""
    guard = (
        tasks.c.state == bindparam("from_state")
        if guarded_by_from
        else tasks.c.state != bindparam("new_state")
    )
    return DirectStatement(
        update(tasks)
        .where(tasks.c.id == bindparam("task_id"), guard)
        .values(
            state=bindparam("new_state"),
            updated_at=bindparam("now", type_=tasks.c.updated_at.type),
        )
        .returning(*tasks.c)
    )


async def change_task_state_returning(
    conn: AsyncConnection, task_id: str, state: str, now: datetime, *, only_from: str | None = None
) -> Task | None:
    """`change_task_state`, giving the changed row back (None: it already had that state,
    or was not in `only_from`)."""
    params = {"task_id": task_id, "new_state": state, "now": now}
    if only_from is not None:
        params["from_state"] = only_from
    statement = _change_state_statement(only_from is not None)
    row = await statement.first(conn, params)
    return Task.from_row(row) if row else None


async def delete_task(conn: AsyncConnection, task_id: str) -> None:
    await conn.execute(delete(task_file_reviews).where(task_file_reviews.c.task_id == task_id))
    await conn.execute(
        delete(task_review_snapshots).where(task_review_snapshots.c.task_id == task_id)
    )
    await conn.execute(delete(tasks).where(tasks.c.id == task_id))


async def list_visible_tasks(
    conn: AsyncConnection,
    user_id: str | None,
    *,
    workflow_id: str | None = None,
    workspace_id: str | None = None,
    workflow_step_id: str | None = None,
    include_archived: bool = False,
) -> tuple[list[Task], int]:
    where = [hangs_off_visible_workspace(tasks.c.workspace_id, user_id)]
    if workflow_id is not None:
        where.append(tasks.c.workflow_id == workflow_id)
    if workspace_id is not None:
        where.append(tasks.c.workspace_id == workspace_id)
    if workflow_step_id is not None:
        where.append(tasks.c.workflow_step_id == workflow_step_id)
    if not include_archived:
        where.append(tasks.c.archived_at.is_(None))
    rows = (
        await conn.execute(
            select(tasks)
            .where(*where)
            .order_by(tasks.c.workflow_step_id, tasks.c.position, tasks.c.created_at, tasks.c.id)
        )
    ).mappings()
    items = [Task.from_row(r) for r in rows]
    return items, len(items)


async def count_tasks(
    conn: AsyncConnection,
    *,
    workspace_id: str | None = None,
    workflow_id: str | None = None,
    workflow_step_id: str | None = None,
) -> int:
    """Tasks (archived ones included) that hang off a workspace, workflow or step."""
    where = []
    if workspace_id is not None:
        # Also a task of another workspace sitting on one of its workflows (never made by
        # Kandev, but deleting the workflow under it would strand it).
        flows = select(workflows.c.id).where(workflows.c.workspace_id == workspace_id)
        where.append(or_(tasks.c.workspace_id == workspace_id, tasks.c.workflow_id.in_(flows)))
    if workflow_id is not None:
        where.append(tasks.c.workflow_id == workflow_id)
    if workflow_step_id is not None:
        where.append(tasks.c.workflow_step_id == workflow_step_id)
    stmt = select(func.count()).select_from(tasks).where(*where)
    return int((await conn.execute(stmt)).scalar_one())


# --- a task's owner read along with rows that name the task ------------------------------

TASK_FOUND = "task_row_id"
WORKSPACE_FOUND = "task_workspace_row_id"
WORKSPACE_OWNER = "task_workspace_owner_id"


def with_task_owner(from_: FromClause, task_id: ColumnElement[Any]) -> tuple[FromClause, list[Any]]:
    """`from_` outer-joined to the task `task_id` names and its workspace, and the columns
    that let the access rules decide the task's visibility from the same row
    (BoardAccess.authorize_task_row): no second statement to authorize."""
    joined = from_.outerjoin(tasks, tasks.c.id == task_id).outerjoin(
        workspaces, workspaces.c.id == tasks.c.workspace_id
    )
    columns = [
        tasks.c.id.label(TASK_FOUND),
        workspaces.c.id.label(WORKSPACE_FOUND),
        workspaces.c.owner_id.label(WORKSPACE_OWNER),
    ]
    return joined, columns
