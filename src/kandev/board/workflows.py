"""Workflow service: workflows with their steps (a default kanban board when none given)."""

from __future__ import annotations

from typing import Any

from kandev.board import workflow_repository
from kandev.board.inputs import StepCreate, WorkflowCreate
from kandev.board.models import Workflow, WorkflowStep
from kandev.errors import ValidationFailed
from kandev.service_base import ScopedService

DEFAULT_STEPS = ("Backlog", "In Progress", "Review", "Done")


class WorkflowService(ScopedService):
    async def create_workflow(self, data: WorkflowCreate) -> Workflow:
        steps = data.steps
        if steps is None:
            steps = [
                StepCreate(name=name, position=i, is_start_step=(i == 0))
                for i, name in enumerate(DEFAULT_STEPS)
            ]
        start_flags = [i for i, s in enumerate(steps) if s.is_start_step]
        if len(start_flags) > 1:
            raise ValidationFailed(
                f"steps[{start_flags[1]}].is_start_step", "only one step can be the start step"
            )
        async with self.db.write() as conn:
            await self.access.authorize_workspace(conn, data.workspace_id)
            workflow_id = self.new_id()
            await workflow_repository.insert_workflow(
                conn,
                id=workflow_id,
                workspace_id=data.workspace_id,
                name=data.name,
                description=data.description,
                prompt=data.prompt,
                now=self.clock.now(),
            )
            # Without an explicit start step, the first step (lowest position) is the start.
            positions = [s.position if s.position is not None else i for i, s in enumerate(steps)]
            first = min(range(len(steps)), key=lambda i: positions[i]) if steps else None
            for i, step in enumerate(steps):
                is_start = step.is_start_step if start_flags else i == first
                await workflow_repository.insert_step(
                    conn, self._step_values(workflow_id, step, positions[i], is_start)
                )
            workflow = await workflow_repository.get_workflow(conn, workflow_id)
        assert workflow is not None
        return workflow

    async def add_step(self, workflow_id: str, data: StepCreate) -> WorkflowStep:
        async with self.db.write() as conn:
            await self.access.authorize_workflow(conn, workflow_id)
            position = data.position
            if position is None:
                position = await workflow_repository.next_step_position(conn, workflow_id)
            if data.is_start_step:
                await workflow_repository.clear_start_step(conn, workflow_id)
            values = self._step_values(workflow_id, data, position, data.is_start_step)
            await workflow_repository.insert_step(conn, values)
            step = await workflow_repository.get_step(conn, values["id"])
        assert step is not None
        return step

    async def get_workflow(self, workflow_id: str) -> Workflow:
        async with self.db.read() as conn:
            return await self.access.authorize_workflow(conn, workflow_id)

    async def list_workflows(self, workspace_id: str | None) -> tuple[list[Workflow], int]:
        async with self.db.read() as conn:
            if workspace_id is not None:
                await self.access.authorize_workspace(conn, workspace_id)
            return await workflow_repository.list_visible_workflows(
                conn, self.access.scope(), workspace_id
            )

    def _step_values(
        self, workflow_id: str, step: StepCreate, position: int, is_start: bool
    ) -> dict[str, Any]:
        now = self.clock.now()
        events = step.events.model_dump() if step.events else {}
        return {
            "id": self.new_id(),
            "workflow_id": workflow_id,
            "name": step.name,
            "position": position,
            "prompt": step.prompt,
            "events": events,
            "wip_limit": step.wip_limit,
            "is_start_step": is_start,
            "created_at": now,
            "updated_at": now,
        }
