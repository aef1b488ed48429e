"""Row-level authorization of sessions: a session is visible through its task
(kandev.access.rules). The one access object the session-level services hold."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.access.rules import SESSION_NOT_FOUND
from kandev.board.access import BoardAccess
from kandev.board.models import Task
from kandev.errors import NotFound
from kandev.sessions import session_repository
from kandev.sessions.models import Session


class AccessRules(BoardAccess):
    async def authorized_session(
        self, conn: AsyncConnection, session_id: str, *, lock_turn: bool = False
    ) -> Session:
        """The session row, if it exists and its task is visible (one statement reads the
        session with its task's workspace). `lock_turn`: PostgreSQL's turn lock of the session
        taken by that same statement (a transaction about to start a turn)."""
        found = await session_repository.get_session_authorizable(
            conn, session_id, lock_turn=lock_turn
        )
        if found is None:
            raise NotFound(SESSION_NOT_FOUND)
        session, row = found
        try:
            self.authorize_task_row(row)
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
