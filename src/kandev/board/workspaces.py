"""Workspace service: create, read, list, edit and delete, always through the access rules.

A workspace is deleted only when no task hangs off it (409 otherwise: delete or move them
first), so deleting one never stops agents or loses a conversation; its workflows and their
steps go with it, in the same transaction.
"""

from __future__ import annotations

from kandev.board import task_repository, workspace_repository
from kandev.board.access import BoardAccess
from kandev.board.events import (
    WORKSPACE_DELETED,
    WORKSPACE_UPDATED,
    add_workspace_event,
    pending_events,
)
from kandev.board.inputs import WorkspaceCreate, WorkspaceUpdate
from kandev.board.models import Workspace
from kandev.board.scoped import ScopedService
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict
from kandev.events.bus import EventBus
from kandev.ids import IdFactory


def tasks_in_the_way(kind: str, count: int) -> Conflict:
    noun = "task" if count == 1 else "tasks"
    return Conflict(f"{kind} has {count} {noun}; delete or move them first")


class WorkspaceService(ScopedService):
    def __init__(
        self, db: Database, clock: Clock, new_id: IdFactory, access: BoardAccess, *, bus: EventBus
    ) -> None:
        super().__init__(db, clock, new_id, access)
        self.bus = bus

    async def create_workspace(self, data: WorkspaceCreate) -> Workspace:
        # A real user owns what they create; with auth off (or internal callers) it is unowned.
        owner_id = self.access.scope() or ""
        async with self.db.write() as conn:
            return await workspace_repository.insert_workspace(
                conn,
                id=self.new_id(),
                name=data.name,
                description=data.description,
                owner_id=owner_id,
                now=self.clock.now(),
            )

    async def get_workspace(self, workspace_id: str) -> Workspace:
        async with self.db.read() as conn:
            return await self.access.authorize_workspace(conn, workspace_id)

    async def list_workspaces(self) -> tuple[list[Workspace], int]:
        async with self.db.read() as conn:
            return await workspace_repository.list_visible_workspaces(conn, self.access.scope())

    async def update_workspace(self, workspace_id: str, data: WorkspaceUpdate) -> Workspace:
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            workspace = await self.access.authorize_workspace(conn, workspace_id)
            values = data.model_dump(exclude_none=True)
            if not values:
                return workspace
            values["updated_at"] = self.clock.now()
            await workspace_repository.update_workspace(conn, workspace_id, values)
            updated = await workspace_repository.get_workspace(conn, workspace_id)
            assert updated is not None
            add_workspace_event(events, WORKSPACE_UPDATED, updated)
        events.publish()
        return updated

    async def delete_workspace(self, workspace_id: str) -> None:
        events = pending_events(self.bus)
        async with self.db.write() as conn:
            workspace = await self.access.authorize_workspace(conn, workspace_id)
            count = await task_repository.count_tasks(conn, workspace_id=workspace_id)
            if count:
                raise tasks_in_the_way("workspace", count)
            await workspace_repository.delete_workspace(conn, workspace_id)
            add_workspace_event(events, WORKSPACE_DELETED, workspace)
        events.publish()
