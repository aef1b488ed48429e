"""Workflow service: workflows with their steps (a default kanban board when none given).

Every change to a workflow or one of its steps publishes `workflow.updated` with the whole
workflow. A workflow is deleted only while no task sits on it (409), a step only while no
task sits on it (400, CONTRACT §3); deleting the start step makes the first remaining step
the start step.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board import task_repository, workflow_repository
from kandev.board.access import BoardAccess
from kandev.board.events import (
    add_workflow_deleted,
    add_workflow_event,
    pending_events,
    workspace_owner_id,
)
from kandev.board.inputs import StepCreate, StepUpdate, WorkflowCreate, WorkflowUpdate
from kandev.board.models import Workflow, WorkflowStep
from kandev.board.scoped import ScopedService
from kandev.board.workspaces import tasks_in_the_way
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import NotFound, ValidationFailed
from kandev.events.bus import EventBus
from kandev.events.publisher import PendingEvents
from kandev.ids import IdFactory

STEP_NOT_FOUND = "step not found"

DEFAULT_STEPS = ("Backlog", "In Progress", "Review", "Done")


class WorkflowService(ScopedService):
    def __init__(
        self, db: Database, clock: Clock, new_id: IdFactory, access: BoardAccess, *, bus: EventBus
    ) -> None:
        super().__init__(db, clock, new_id, access)
        self.bus = bus

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
        events = pending_events(self.bus)
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
            await add_workflow_event(conn, events, workflow)
        events.publish()
        return workflow

    async def add_step(self, workflow_id: str, data: StepCreate) -> WorkflowStep:
        events = pending_events(self.bus)
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
            await self._changed(conn, events, workflow_id)
        events.publish()
        assert step is not None
        return step

    async def update_workflow(self, workflow_id: str, data: WorkflowUpdate) -> Workflow:
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            workflow = await self.access.authorize_workflow(conn, workflow_id)
            values = data.model_dump(exclude_none=True)
            if not values:
                return workflow
            values["updated_at"] = self.clock.now()
            await workflow_repository.update_workflow(conn, workflow_id, values)
            updated = await self._changed(conn, events, workflow_id)
        events.publish()
        return updated

    async def delete_workflow(self, workflow_id: str) -> None:
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            workflow = await self.access.authorize_workflow(conn, workflow_id)
            count = await task_repository.count_tasks(conn, workflow_id=workflow_id)
            if count:
                raise tasks_in_the_way("workflow", count)
            owner_id = await workspace_owner_id(conn, workflow.workspace_id)
            await workflow_repository.delete_workflow(conn, workflow_id)
            add_workflow_deleted(events, workflow, owner_id)
        events.publish()

    async def update_step(self, workflow_id: str, step_id: str, data: StepUpdate) -> WorkflowStep:
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            workflow = await self.access.authorize_workflow(conn, workflow_id)
            step = self._step_of(workflow, step_id)
            values = data.model_dump(exclude_none=True, exclude={"events", "is_start_step"})
            if data.events is not None:
                values["events"] = data.events.model_dump()
            if data.is_start_step is False and step.is_start_step:
                raise ValidationFailed(
                    "is_start_step", "a workflow needs a start step: mark another step instead"
                )
            if data.is_start_step and not step.is_start_step:
                # Cleared first: at most one start step per workflow (a unique index).
                await workflow_repository.clear_start_step(conn, workflow_id)
                values["is_start_step"] = True
            if not values:
                return step
            values["updated_at"] = self.clock.now()
            await workflow_repository.update_step(conn, step_id, values)
            updated = await self._changed(conn, events, workflow_id)
        events.publish()
        result = updated.step(step_id)
        assert result is not None
        return result

    async def delete_step(self, workflow_id: str, step_id: str) -> Workflow:
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            workflow = await self.access.authorize_workflow(conn, workflow_id)
            step = self._step_of(workflow, step_id)
            count = await task_repository.count_tasks(conn, workflow_step_id=step_id)
            if count:
                noun = "task sits" if count == 1 else "tasks sit"
                raise ValidationFailed(
                    "step_id", f"{count} {noun} on this step; move or delete them first"
                )
            await workflow_repository.delete_step(conn, step_id)
            remaining = [s for s in workflow.steps if s.id != step_id]
            if step.is_start_step and remaining:
                await workflow_repository.update_step(
                    conn, remaining[0].id, {"is_start_step": True, "updated_at": self.clock.now()}
                )
            updated = await self._changed(conn, events, workflow_id)
        events.publish()
        return updated

    @staticmethod
    def _step_of(workflow: Workflow, step_id: str) -> WorkflowStep:
        step = workflow.step(step_id)
        if step is None:
            raise NotFound(STEP_NOT_FOUND)
        return step

    async def _changed(
        self, conn: AsyncConnection, events: PendingEvents, workflow_id: str
    ) -> Workflow:
        """The workflow as it now is, announced; its updated_at moves with its steps."""
        await workflow_repository.update_workflow(
            conn, workflow_id, {"updated_at": self.clock.now()}
        )
        workflow = await workflow_repository.get_workflow(conn, workflow_id)
        assert workflow is not None
        await add_workflow_event(conn, events, workflow)
        return workflow

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
