"""Row-level authorization of the board's rows (workspaces, workflows, tasks) by the
scoping rules of kandev.access.rules. Runs inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.access.rules import (
    TASK_NOT_FOUND,
    WORKFLOW_NOT_FOUND,
    WORKSPACE_NOT_FOUND,
    owner_visible_to,
    scope,
)
from kandev.board import task_repository, workflow_repository, workspace_repository
from kandev.board.models import Task, Workflow, Workspace
from kandev.errors import NotFound


def workspace_visible_to(workspace: Workspace | None, user_id: str | None) -> bool:
    return workspace is None or owner_visible_to(workspace.owner_id, user_id)


class BoardAccess:
    @staticmethod
    def scope() -> str | None:
        """The user id list queries must be limited to; None = unscoped."""
        return scope()

    async def workspace_id_visible(self, conn: AsyncConnection, workspace_id: str) -> bool:
        """True for '' and dangling ids; otherwise the owner rule."""
        user_id = scope()
        if user_id is None or workspace_id == "":
            return True
        workspace = await workspace_repository.get_workspace(conn, workspace_id)
        return workspace_visible_to(workspace, user_id)

    async def authorize_workspace(self, conn: AsyncConnection, workspace_id: str) -> Workspace:
        """An existing, visible workspace (callers that need the row)."""
        workspace = await workspace_repository.get_workspace(conn, workspace_id)
        if workspace is None or not workspace_visible_to(workspace, scope()):
            raise NotFound(WORKSPACE_NOT_FOUND)
        return workspace

    async def authorize_workflow(self, conn: AsyncConnection, workflow_id: str) -> Workflow:
        workflow = await workflow_repository.get_workflow(conn, workflow_id)
        if workflow is None or not await self.workspace_id_visible(conn, workflow.workspace_id):
            raise NotFound(WORKFLOW_NOT_FOUND)
        return workflow

    async def authorize_task(self, conn: AsyncConnection, task_id: str) -> Task:
        task = await task_repository.get_task(conn, task_id)
        if task is None or not await self.workspace_id_visible(conn, task.workspace_id):
            raise NotFound(TASK_NOT_FOUND)
        return task

    @staticmethod
    def authorize_task_row(row: Mapping[Any, Any]) -> None:
        """`authorize_task` for a row read with `task_repository.with_task_owner`'s columns:
        the same rule (a missing task is not found; a task without a workspace, or with a
        dangling one, is visible; otherwise the owner rule), no statement of its own."""
        if row[task_repository.TASK_FOUND] is None:
            raise NotFound(TASK_NOT_FOUND)
        if row[task_repository.WORKSPACE_FOUND] is None:
            return
        if not owner_visible_to(row[task_repository.WORKSPACE_OWNER], scope()):
            raise NotFound(TASK_NOT_FOUND)

    async def authorize_task_write(self, conn: AsyncConnection, task_id: str) -> Task:
        """Write access; today equal to visibility, kept apart so roles can narrow it."""
        return await self.authorize_task(conn, task_id)
