"""SQL for workflows and their steps."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.access.sql import hangs_off_visible_workspace
from kandev.board.models import Workflow, WorkflowStep
from kandev.db.tables import workflow_steps, workflows


async def insert_workflow(
    conn: AsyncConnection,
    *,
    id: str,
    workspace_id: str,
    name: str,
    description: str,
    prompt: str,
    now: datetime,
) -> None:
    await conn.execute(
        insert(workflows).values(
            id=id,
            workspace_id=workspace_id,
            name=name,
            description=description,
            prompt=prompt,
            created_at=now,
            updated_at=now,
        )
    )


async def insert_step(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(insert(workflow_steps).values(**values))


async def clear_start_step(conn: AsyncConnection, workflow_id: str) -> None:
    await conn.execute(
        update(workflow_steps)
        .where(workflow_steps.c.workflow_id == workflow_id, workflow_steps.c.is_start_step)
        .values(is_start_step=False)
    )


async def next_step_position(conn: AsyncConnection, workflow_id: str) -> int:
    current = (
        await conn.execute(
            select(func.max(workflow_steps.c.position)).where(
                workflow_steps.c.workflow_id == workflow_id
            )
        )
    ).scalar_one()
    return 0 if current is None else current + 1


async def get_steps(conn: AsyncConnection, workflow_ids: Sequence[str]) -> list[WorkflowStep]:
    if not workflow_ids:
        return []
    rows = (
        await conn.execute(
            select(workflow_steps)
            .where(workflow_steps.c.workflow_id.in_(workflow_ids))
            .order_by(workflow_steps.c.position, workflow_steps.c.created_at, workflow_steps.c.id)
        )
    ).mappings()
    return [WorkflowStep.from_row(r) for r in rows]


async def get_step(conn: AsyncConnection, step_id: str) -> WorkflowStep | None:
    row = (
        (await conn.execute(select(workflow_steps).where(workflow_steps.c.id == step_id)))
        .mappings()
        .first()
    )
    return WorkflowStep.from_row(row) if row else None


def _attach_steps(rows: Sequence[Any], steps: list[WorkflowStep]) -> list[Workflow]:
    by_workflow: dict[str, list[WorkflowStep]] = {}
    for step in steps:
        by_workflow.setdefault(step.workflow_id, []).append(step)
    return [Workflow.from_row(r, tuple(by_workflow.get(r["id"], ()))) for r in rows]


async def get_workflow(conn: AsyncConnection, workflow_id: str) -> Workflow | None:
    row = (
        (await conn.execute(select(workflows).where(workflows.c.id == workflow_id)))
        .mappings()
        .first()
    )
    if row is None:
        return None
    return _attach_steps([row], await get_steps(conn, [workflow_id]))[0]


async def list_visible_workflows(
    conn: AsyncConnection, user_id: str | None, workspace_id: str | None
) -> tuple[list[Workflow], int]:
    where = [hangs_off_visible_workspace(workflows.c.workspace_id, user_id)]
    if workspace_id is not None:
        where.append(workflows.c.workspace_id == workspace_id)
    rows = (
        (
            await conn.execute(
                select(workflows)
                .where(*where)
                .order_by(workflows.c.sort_order, workflows.c.created_at, workflows.c.id)
            )
        )
        .mappings()
        .all()
    )
    steps = await get_steps(conn, [r["id"] for r in rows])
    return _attach_steps(rows, steps), len(rows)


async def update_workflow(conn: AsyncConnection, workflow_id: str, values: dict[str, Any]) -> None:
    await conn.execute(update(workflows).where(workflows.c.id == workflow_id).values(**values))


async def delete_workflow(conn: AsyncConnection, workflow_id: str) -> None:
    await conn.execute(delete(workflow_steps).where(workflow_steps.c.workflow_id == workflow_id))
    await conn.execute(delete(workflows).where(workflows.c.id == workflow_id))


async def update_step(conn: AsyncConnection, step_id: str, values: dict[str, Any]) -> None:
    await conn.execute(
        update(workflow_steps).where(workflow_steps.c.id == step_id).values(**values)
    )


async def delete_step(conn: AsyncConnection, step_id: str) -> None:
    await conn.execute(delete(workflow_steps).where(workflow_steps.c.id == step_id))
