"""SQL for workspaces."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.access.sql import workspace_visible
from kandev.board.models import Workspace
from kandev.db.tables import repositories, workflow_steps, workflows, workspaces


async def insert_workspace(
    conn: AsyncConnection,
    *,
    id: str,
    name: str,
    description: str,
    owner_id: str,
    now: datetime,
) -> Workspace:
    workspace = Workspace(
        id=id, name=name, description=description, owner_id=owner_id, created_at=now, updated_at=now
    )
    await conn.execute(insert(workspaces).values(**asdict(workspace)))
    return workspace


async def get_workspace(conn: AsyncConnection, workspace_id: str) -> Workspace | None:
    row = (
        (await conn.execute(select(workspaces).where(workspaces.c.id == workspace_id)))
        .mappings()
        .first()
    )
    return Workspace.from_row(row) if row else None


async def list_visible_workspaces(
    conn: AsyncConnection, user_id: str | None
) -> tuple[list[Workspace], int]:
    visible = workspace_visible(user_id)
    rows = (
        await conn.execute(
            select(workspaces).where(visible).order_by(workspaces.c.created_at, workspaces.c.id)
        )
    ).mappings()
    items = [Workspace.from_row(r) for r in rows]
    total = (
        await conn.execute(select(func.count()).select_from(workspaces).where(visible))
    ).scalar_one()
    return items, total


async def update_workspace(
    conn: AsyncConnection, workspace_id: str, values: dict[str, Any]
) -> None:
    await conn.execute(update(workspaces).where(workspaces.c.id == workspace_id).values(**values))


async def delete_workspace(conn: AsyncConnection, workspace_id: str) -> None:
    """The workspace, its workflows with their steps and its repository registrations (the
    caller checked it has no tasks; a registration is only a row: the checkout stays)."""
    flows = select(workflows.c.id).where(workflows.c.workspace_id == workspace_id)
    await conn.execute(delete(workflow_steps).where(workflow_steps.c.workflow_id.in_(flows)))
    await conn.execute(delete(workflows).where(workflows.c.workspace_id == workspace_id))
    await conn.execute(delete(repositories).where(repositories.c.workspace_id == workspace_id))
    await conn.execute(delete(workspaces).where(workspaces.c.id == workspace_id))
