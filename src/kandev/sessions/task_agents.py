"""The board's `TaskAgents`: a task's open sessions, and stopping their agents together."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.sessions import session_repository
from kandev.sessions.orchestrator import Orchestrator


class TaskAgentStopper:
    def __init__(self, orchestrator: Orchestrator) -> None:
        self.orchestrator = orchestrator

    async def open_session_ids(self, conn: AsyncConnection, task_id: str) -> list[str]:
        sessions = await session_repository.list_task_sessions(conn, task_id)
        return [s.id for s in sessions if not s.is_terminal]

    async def stop_sessions(self, session_ids: list[str]) -> None:
        # Concurrently: a task's agents take one stop grace period together, not each.
        await asyncio.gather(*(self.orchestrator.stop_session(sid) for sid in session_ids))
