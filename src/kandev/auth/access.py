"""Access rules: who may see which workspace, workflow, task and session. One module.

Reference §1.7 / CONTRACT §2:
- unscoped callers (no identity = internal, or the synthetic identity) see everything;
- a workspace is visible to user U when its owner_id is '' or U;
- a task or workflow is visible when its workspace_id is '', names no existing workspace
  (dangling reference), or names a visible workspace;
- a session is visible through its task.
Denial is the not-found error, worded exactly like a missing row, so a foreign id and a
fabricated id cannot be told apart. List queries use the same rule as SQL (db/visibility.py).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth.identity import caller_scope
from kandev.board import task_repository, workflow_repository, workspace_repository
from kandev.board.models import Task, Workflow, Workspace
from kandev.db.engine import Database
from kandev.errors import NotFound
from kandev.sessions import session_repository
from kandev.sessions.models import Session

WORKSPACE_NOT_FOUND = "workspace not found"
WORKFLOW_NOT_FOUND = "workflow not found"
TASK_NOT_FOUND = "task not found"
SESSION_NOT_FOUND = "session not found"


def workspace_visible_to(workspace: Workspace | None, user_id: str | None) -> bool:
    if user_id is None or workspace is None:
        return True
    return workspace.owner_id in ("", user_id)


class AccessRules:
    def __init__(self, db: Database) -> None:
        self.db = db

    @staticmethod
    def scope() -> str | None:
        """The user id list queries must be limited to; None = unscoped."""
        return caller_scope()

    async def workspace_id_visible(self, conn: AsyncConnection, workspace_id: str) -> bool:
        """True for '' and dangling ids; otherwise the owner rule."""
        user_id = caller_scope()
        if user_id is None or workspace_id == "":
            return True
        workspace = await workspace_repository.get_workspace(conn, workspace_id)
        return workspace_visible_to(workspace, user_id)

    async def authorize_workspace(self, conn: AsyncConnection, workspace_id: str) -> Workspace:
        """An existing, visible workspace (callers that need the row)."""
        workspace = await workspace_repository.get_workspace(conn, workspace_id)
        if workspace is None or not workspace_visible_to(workspace, caller_scope()):
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

    async def authorize_task_write(self, conn: AsyncConnection, task_id: str) -> Task:
        """Write access; today equal to visibility, kept apart so roles can narrow it."""
        return await self.authorize_task(conn, task_id)

    async def authorized_session(self, conn: AsyncConnection, session_id: str) -> Session:
        """The session row (read once), if it exists and its task is visible."""
        session = await session_repository.get_session(conn, session_id)
        if session is None:
            raise NotFound(SESSION_NOT_FOUND)
        try:
            await self.authorize_task(conn, session.task_id)
        except NotFound:
            raise NotFound(SESSION_NOT_FOUND) from None
        return session

    async def authorize_session(self, conn: AsyncConnection, session_id: str) -> str:
        """The session's task id, if the session exists and its task is visible."""
        return (await self.authorized_session(conn, session_id)).task_id

    async def authorize_task_session(
        self, conn: AsyncConnection, task_id: str, session_id: str
    ) -> Task:
        """The task, when it is visible and the session belongs to it (no mixing pairs)."""
        task = await self.authorize_task(conn, task_id)
        if await session_repository.session_task_id(conn, session_id) != task_id:
            raise NotFound(SESSION_NOT_FOUND)
        return task
