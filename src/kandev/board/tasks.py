"""Task service: create, read, list, edit, archive and delete, through the access rules.

Each change publishes its board event after the transaction commits (`task.created`,
`task.updated`, `task.deleted`; see kandev.board.events).

Moves (REST and MCP) live in `kandev.moves.service.MoveService`. Deleting or archiving a
task stops its running agents first (through the orchestrator), so no agent outlives its
task and nothing writes to rows that are gone.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board import task_repository
from kandev.board.access import BoardAccess
from kandev.board.collaborators import TaskAgents, TaskRepositories, TaskWorktrees
from kandev.board.describe import TaskDescriber
from kandev.board.events import (
    TASK_CREATED,
    TASK_UPDATED,
    add_task_deleted,
    add_task_event,
    pending_events,
)
from kandev.board.inputs import TaskCreate, TaskUpdate
from kandev.board.models import Task, Workflow, WorkflowStep
from kandev.board.scoped import ScopedService
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict, ValidationFailed
from kandev.events.bus import EventBus
from kandev.events.publisher import PendingEvents, task_owner_id
from kandev.ids import IdFactory

TASK_STATE_TODO = "TODO"
STOP_ATTEMPTS = 3  # delete/archive: rounds of "stop the agents, then write" before giving up
SESSIONS_KEEP_STARTING = "sessions of this task keep starting; try again"


def step_in(workflow: Workflow, step_id: str, field: str = "workflow_step_id") -> WorkflowStep:
    step = workflow.step(step_id)
    if step is None:
        raise ValidationFailed(field, "no such step in this workflow")
    return step


class TaskService(ScopedService):
    def __init__(
        self,
        db: Database,
        clock: Clock,
        new_id: IdFactory,
        access: BoardAccess,
        *,
        bus: EventBus,
        describer: TaskDescriber,
        agents: TaskAgents | None = None,
        repositories: TaskRepositories | None = None,
        worktrees: TaskWorktrees | None = None,
    ) -> None:
        super().__init__(db, clock, new_id, access)
        self.bus = bus
        self.describer = describer
        self.agents = agents  # None: a container that runs no agents
        self.repositories = repositories
        self.worktrees = worktrees

    async def create_task(self, data: TaskCreate) -> Task:
        events = pending_events(self.bus)
        repository_fields: dict[str, str] = {}
        if data.repository_id is not None and self.repositories is not None:
            repository_fields = await self.repositories.task_fields(
                data.workspace_id, data.repository_id, data.base_branch
            )
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
            task = await task_repository.insert_task(
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
                    **repository_fields,
                },
            )
            await add_task_event(conn, events, TASK_CREATED, task, self.describer)
        events.publish()
        return task

    async def update_task(self, task_id: str, data: TaskUpdate) -> Task:
        """A PATCH of title, description or local_path (absolute; checked for existence when
        an agent starts). Nothing sent: nothing written, no event."""
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            task = await self.access.authorize_task_write(conn, task_id)
            values = data.model_dump(exclude_none=True)
            if not values:
                return task
            values["updated_at"] = self.clock.now()
            await task_repository.update_task(conn, task_id, values)
            updated = await task_repository.get_task(conn, task_id)
            assert updated is not None
            await add_task_event(conn, events, TASK_UPDATED, updated, self.describer)
        events.publish()
        return updated

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
        for _ in range(STOP_ATTEMPTS):
            await self.stop_task_agents(task_id)
            events = pending_events(self.bus)
            async with self.db.write() as conn:
                task = await self.access.authorize_task_write(conn, task_id)
                # A session started while the agents stopped: stop it too, then try again.
                if not await self._has_open_sessions(conn, task_id):
                    owner_id = await task_owner_id(conn, task_id)
                    await task_repository.delete_task(conn, task_id)
                    add_task_deleted(events, task, owner_id)
                    deleted = True
                else:
                    deleted = False
            if deleted:
                events.publish()
                if self.worktrees is not None:  # its agents are stopped: the worktree can go
                    await self.worktrees.remove_for_task(task)
                return
        raise Conflict(SESSIONS_KEEP_STARTING)

    async def archive_task(self, task_id: str) -> Task:
        """Archived: off the board, its sessions ended (CANCELLED) and their agents stopped.
        An archived task starts no sessions (SessionService refuses them)."""
        for _ in range(STOP_ATTEMPTS):
            await self.stop_task_agents(task_id)
            events = pending_events(self.bus)
            async with self.db.write() as conn:
                task = await self.access.authorize_task_write(conn, task_id)
                archived = None
                if not await self._has_open_sessions(conn, task_id):
                    archived = await self._set_archived(conn, task, events, archived=True)
            if archived is not None:
                events.publish()
                return archived
        raise Conflict(SESSIONS_KEEP_STARTING)

    async def unarchive_task(self, task_id: str) -> Task:
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            task = await self.access.authorize_task_write(conn, task_id)
            unarchived = await self._set_archived(conn, task, events, archived=False)
        events.publish()
        return unarchived

    async def _set_archived(
        self, conn: AsyncConnection, task: Task, events: PendingEvents, *, archived: bool
    ) -> Task:
        if (task.archived_at is not None) == archived:
            return task  # already so: nothing written, nothing announced
        now = self.clock.now()
        await task_repository.update_task(
            conn, task.id, {"archived_at": now if archived else None, "updated_at": now}
        )
        updated = await task_repository.get_task(conn, task.id)
        assert updated is not None
        await add_task_event(conn, events, TASK_UPDATED, updated, self.describer)
        return updated

    async def _has_open_sessions(self, conn: AsyncConnection, task_id: str) -> bool:
        if self.agents is None:  # nothing could stop them (a container without agents)
            return False
        return bool(await self.agents.open_session_ids(conn, task_id))

    async def stop_task_agents(self, task_id: str) -> None:
        """End every session of the task that has not ended, stopping its agent process."""
        if self.agents is None:
            return
        async with self.db.read() as conn:
            await self.access.authorize_task_write(conn, task_id)
            live = await self.agents.open_session_ids(conn, task_id)
        if live:
            await self.agents.stop_sessions(live)
