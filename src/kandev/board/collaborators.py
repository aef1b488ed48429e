"""What the task service needs from the layers above the board, as small protocols: the
container hands it the implementations (sessions' agent stopper, the repositories and
worktree services), so the board imports none of them."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.models import Task


class TaskAgents(Protocol):
    """The agents working on a task: deleting or archiving it stops them first."""

    async def open_session_ids(self, conn: AsyncConnection, task_id: str) -> list[str]: ...

    async def stop_sessions(self, session_ids: list[str]) -> None: ...


class TaskRepositories(Protocol):
    """A task created on a repository: its repository fields, validated."""

    async def task_fields(
        self, workspace_id: str, repository_id: str, base_branch: str | None
    ) -> dict[str, str]: ...


class TaskWorktrees(Protocol):
    """A deleted task's worktree (and branch, when merged) goes with it."""

    async def remove_for_task(self, task: Task) -> None: ...
