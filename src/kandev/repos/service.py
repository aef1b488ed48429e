"""Repository service: register, list, edit and delete the git repositories of a workspace.

Scoped like workspaces: a repository of an invisible workspace answers like a missing one.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from kandev.board.access import BoardAccess
from kandev.board.models import Task
from kandev.board.scoped import ScopedService
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict, NotFound, ValidationFailed
from kandev.ids import IdFactory
from kandev.repos import repository_sql
from kandev.repos.git import GitRunner
from kandev.repos.inputs import RepositoryCreate, RepositoryUpdate
from kandev.repos.models import Repository

REPOSITORY_NOT_FOUND = "repository not found"


class RepositoryService(ScopedService):
    def __init__(
        self, db: Database, clock: Clock, new_id: IdFactory, access: BoardAccess, *, git: GitRunner
    ) -> None:
        super().__init__(db, clock, new_id, access)
        self.git = git  # one per server: its per-repository locks serialize git work

    async def _check_branch(self, path: str, branch: str, field: str) -> None:
        if not await self.git.branch_exists(path, branch):
            raise ValidationFailed(field, f"no branch {branch!r} in the repository")

    async def create_repository(self, workspace_id: str, data: RepositoryCreate) -> Repository:
        async with self.db.read() as conn:
            await self.access.authorize_workspace(conn, workspace_id)
        path = os.path.normpath(data.path)  # noqa: ASYNC240 (no I/O: string work)
        if not await asyncio.to_thread(os.path.isdir, path):
            raise ValidationFailed("path", f"not an existing directory: {data.path}")
        if not await self.git.is_repository(path):
            raise ValidationFailed("path", f"not a git repository (its top level): {data.path}")
        if data.default_branch is not None:
            await self._check_branch(path, data.default_branch, "default_branch")
            default_branch = data.default_branch
        else:
            default_branch = await self.git.default_branch(path)
        now = self.clock.now()
        async with self.db.write() as conn:
            await self.access.authorize_workspace(conn, workspace_id)
            await repository_sql.lock_registrations_of(conn, workspace_id, path)
            known = await repository_sql.registration_of(conn, workspace_id, path)
            if known is not None:
                # Two entries for one checkout would look the same and split its tasks.
                raise Conflict(
                    f"path: {path} is already registered in this workspace as "
                    f"{known.name!r} ({known.id})"
                )
            return await repository_sql.insert_repository(
                conn,
                {
                    "id": self.new_id(),
                    "workspace_id": workspace_id,
                    "name": data.name or os.path.basename(path) or path,
                    "path": path,
                    "default_branch": default_branch,
                    "setup_script": data.setup_script,
                    "copy_files": list(data.copy_files),
                    "created_at": now,
                    "updated_at": now,
                },
            )

    async def list_repositories(self, workspace_id: str) -> list[Repository]:
        async with self.db.read() as conn:
            await self.access.authorize_workspace(conn, workspace_id)
            return await repository_sql.list_repositories(conn, workspace_id)

    async def _authorized(self, conn: Any, workspace_id: str, repository_id: str) -> Repository:
        try:
            await self.access.authorize_workspace(conn, workspace_id)
        except NotFound:
            raise NotFound(REPOSITORY_NOT_FOUND) from None
        repository = await repository_sql.get_repository(conn, repository_id)
        if repository is None or repository.workspace_id != workspace_id:
            raise NotFound(REPOSITORY_NOT_FOUND)
        return repository

    async def get_repository(self, workspace_id: str, repository_id: str) -> Repository:
        async with self.db.read() as conn:
            return await self._authorized(conn, workspace_id, repository_id)

    async def update_repository(
        self, workspace_id: str, repository_id: str, data: RepositoryUpdate
    ) -> Repository:
        repository = await self.get_repository(workspace_id, repository_id)
        values = data.model_dump(exclude_none=True)
        if not values:
            return repository
        if data.default_branch is not None:
            await self._check_branch(repository.path, data.default_branch, "default_branch")
        values["updated_at"] = self.clock.now()
        async with self.db.write() as conn:
            await self._authorized(conn, workspace_id, repository_id)
            await repository_sql.update_repository(conn, repository_id, values)
            updated = await repository_sql.get_repository(conn, repository_id)
        assert updated is not None
        return updated

    async def delete_repository(self, workspace_id: str, repository_id: str) -> None:
        """Only while no task uses it (409): its tasks' worktrees and branches stay theirs."""
        async with self.db.write() as conn:
            await self._authorized(conn, workspace_id, repository_id)
            count = await repository_sql.count_tasks_on(conn, repository_id)
            if count:
                noun = "task uses" if count == 1 else "tasks use"
                raise Conflict(f"{count} {noun} this repository; delete them first")
            await repository_sql.delete_repository(conn, repository_id)

    async def task_fields(
        self, workspace_id: str, repository_id: str, base_branch: str | None
    ) -> dict[str, str]:
        """The repository columns of a new task: the repository must be of the task's
        workspace and the base branch (default: the repository's) must exist."""
        async with self.db.read() as conn:
            repository = await repository_sql.get_repository(conn, repository_id)
        if repository is None or repository.workspace_id != workspace_id:
            raise ValidationFailed("repository_id", "no such repository in this workspace")
        branch = base_branch or repository.default_branch
        await self._check_branch(repository.path, branch, "base_branch")
        return {"repository_id": repository.id, "base_branch": branch}

    async def task_repository(self, task_id: str) -> tuple[Task, Repository]:
        """A visible task on a repository, with its repository (404 / 409 otherwise)."""
        async with self.db.read() as conn:
            task = await self.access.authorize_task(conn, task_id)
            if not task.repository_id:
                raise Conflict("the task is not on a repository")
            repository = await repository_sql.get_repository(conn, task.repository_id)
        if repository is None:
            raise Conflict("the task's repository is no longer registered")
        return task, repository
