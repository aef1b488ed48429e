"""Task service: create, read, list and delete, through the access rules.

Moves (REST and MCP) live in `kandev.moves.service.MoveService`.
"""

from __future__ import annotations

from typing import Any

from kandev.board import task_repository
from kandev.board.inputs import TaskCreate
from kandev.board.models import Task, Workflow, WorkflowStep
from kandev.errors import ValidationFailed
from kandev.service_base import ScopedService

TASK_STATE_TODO = "TODO"


def step_in(workflow: Workflow, step_id: str, field: str = "workflow_step_id") -> WorkflowStep:
    step = workflow.step(step_id)
    if step is None:
        raise ValidationFailed(field, "no such step in this workflow")
    return step


class TaskService(ScopedService):
    async def create_task(self, data: TaskCreate) -> Task:
        async with self.db.write() as conn:
            await self.access.authorize_workspace(conn, data.workspace_id)
            workflow = await self.access.authorize_workflow(conn, data.workflow_id)
            if workflow.workspace_id != data.workspace_id:
                raise ValidationFailed("workflow_id", "workflow belongs to another workspace")
            if data.workflow_step_id is not None:
                step = step_in(workflow, data.workflow_step_id)
            else:
                start = workflow.start_step()
                if start is None:
                    raise ValidationFailed("workflow_id", "workflow has no steps")
                step = start
            now = self.clock.now()
            return await task_repository.insert_task(
                conn,
                {
                    "id": self.new_id(),
                    "workspace_id": data.workspace_id,
                    "workflow_id": workflow.id,
                    "workflow_step_id": step.id,
                    "title": data.title,
                    "description": data.description,
                    "local_path": data.local_path,
                    "state": TASK_STATE_TODO,
                    "position": await task_repository.next_position_in_step(conn, step.id),
                    "metadata": {},
                    "created_at": now,
                    "updated_at": now,
                },
            )

    async def present(self, tasks: list[Task]) -> list[dict[str, Any]]:
        """Public JSON of tasks, with their pending actions (one batch query)."""
        from kandev.sessions.pending import tasks_json

        async with self.db.read() as conn:
            return await tasks_json(conn, tasks)

    async def present_one(self, task: Task) -> dict[str, Any]:
        return (await self.present([task]))[0]

    async def get_task(self, task_id: str) -> Task:
        async with self.db.read() as conn:
            return await self.access.authorize_task(conn, task_id)

    async def list_tasks(
        self, *, workflow_id: str | None = None, workspace_id: str | None = None
    ) -> tuple[list[Task], int]:
        async with self.db.read() as conn:
            if workflow_id is not None:
                await self.access.authorize_workflow(conn, workflow_id)
            if workspace_id is not None:
                await self.access.authorize_workspace(conn, workspace_id)
            return await task_repository.list_visible_tasks(
                conn, self.access.scope(), workflow_id=workflow_id, workspace_id=workspace_id
            )

    async def delete_task(self, task_id: str) -> None:
        async with self.db.write() as conn:
            await self.access.authorize_task_write(conn, task_id)
            await task_repository.delete_task(conn, task_id)
