"""Board events (CONTRACT §3), gathered inside the writing transaction and published after
it commits, scoped to the owner of the workspace they belong to.

- `task.created` / `task.updated` (edit, archive, unarchive): `{"task": <task JSON as GET
  returns it>}`; `task.moved` comes from the move service with the same shape.
- `task.deleted`: `{"task_id", "workspace_id", "workflow_id"}`.
- `workflow.updated` (the workflow or one of its steps created, edited or deleted):
  `{"workflow": <workflow JSON with steps>}`; `workflow.deleted`: `{"workflow_id",
  "workspace_id"}`.
- `workspace.updated`: `{"workspace"}`; `workspace.deleted`: `{"workspace_id"}`.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.describe import TaskDescriber, task_json
from kandev.board.models import Task, Workflow, Workspace
from kandev.catalog.events import (  # re-exported: the board's publishers import them here
    TASK_CREATED,
    TASK_DELETED,
    TASK_UPDATED,
    WORKFLOW_DELETED,
    WORKFLOW_UPDATED,
    WORKSPACE_DELETED,
    WORKSPACE_UPDATED,
)
from kandev.db.tables import workspaces
from kandev.events.bus import EventBus
from kandev.events.publisher import PendingEvents, task_owner_id

__all__ = [
    "TASK_CREATED",
    "TASK_DELETED",
    "TASK_UPDATED",
    "WORKFLOW_DELETED",
    "WORKFLOW_UPDATED",
    "WORKSPACE_DELETED",
    "WORKSPACE_UPDATED",
    "add_task_deleted",
    "add_task_event",
    "add_workflow_deleted",
    "add_workflow_event",
    "add_workspace_event",
    "pending_events",
    "workspace_owner_id",
]

# Services built without a bus (unit tests of one service) publish into this one, unread.
_UNWIRED_BUS = EventBus(capacity=1)


def pending_events(bus: EventBus | None) -> PendingEvents:
    return PendingEvents(bus or _UNWIRED_BUS)


async def workspace_owner_id(conn: AsyncConnection, workspace_id: str) -> str:
    """'' for no workspace, a dangling id or an unowned workspace (everyone sees it)."""
    if not workspace_id:
        return ""
    owner = (
        await conn.execute(select(workspaces.c.owner_id).where(workspaces.c.id == workspace_id))
    ).scalar_one_or_none()
    return owner or ""


async def add_task_event(
    conn: AsyncConnection,
    events: PendingEvents,
    kind: str,
    task: Task,
    describer: TaskDescriber,
) -> None:
    payload = await task_json(describer, conn, task)
    owner_id = await task_owner_id(conn, task.id)
    events.add(kind, {"task": payload}, task_id=task.id, owner_id=owner_id)


def add_task_deleted(events: PendingEvents, task: Task, owner_id: str) -> None:
    events.add(
        TASK_DELETED,
        {"task_id": task.id, "workspace_id": task.workspace_id, "workflow_id": task.workflow_id},
        task_id=task.id,
        owner_id=owner_id,
    )


async def add_workflow_event(
    conn: AsyncConnection, events: PendingEvents, workflow: Workflow
) -> None:
    owner_id = await workspace_owner_id(conn, workflow.workspace_id)
    events.add(WORKFLOW_UPDATED, {"workflow": workflow.to_json()}, task_id=None, owner_id=owner_id)


def add_workflow_deleted(events: PendingEvents, workflow: Workflow, owner_id: str) -> None:
    events.add(
        WORKFLOW_DELETED,
        {"workflow_id": workflow.id, "workspace_id": workflow.workspace_id},
        task_id=None,
        owner_id=owner_id,
    )


def add_workspace_event(events: PendingEvents, kind: str, workspace: Workspace) -> None:
    data = (
        {"workspace_id": workspace.id}
        if kind == WORKSPACE_DELETED
        else {"workspace": workspace.to_json()}
    )
    events.add(kind, data, task_id=None, owner_id=workspace.owner_id)
