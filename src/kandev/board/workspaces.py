"""Workspace service: create, read and list, always through the access rules."""

from __future__ import annotations

from kandev.board import workspace_repository
from kandev.board.inputs import WorkspaceCreate
from kandev.board.models import Workspace
from kandev.service_base import ScopedService


class WorkspaceService(ScopedService):
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
