"""Fixtures for repository tests: services on SQLite, a registered repository, tasks on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.board.models import Task
from kandev.clock import ManualClock
from kandev.repos.inputs import RepositoryCreate
from kandev.repos.models import Repository
from kandev.services import Services, build_services
from kandev.sessions import session_repository
from kandev.sessions.inputs import SessionCreate
from kandev.sessions.models import Session
from tests.conftest import make_settings
from tests.repos.git_helpers import make_repo


@pytest.fixture
async def sqlite_services(sqlite_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    built = build_services(make_settings(tmp_path, sqlite_url), clock=ManualClock())
    await built.prepare()
    yield built
    await built.close()


@dataclass
class RepoBoard:
    services: Services
    repo: Path
    repository: Repository
    workspace_id: str
    workflow_id: str

    async def task(self, title: str = "Fix the thing", base_branch: str | None = None) -> Task:
        return await self.services.tasks.create_task(
            TaskCreate(
                workspace_id=self.workspace_id,
                workflow_id=self.workflow_id,
                title=title,
                repository_id=self.repository.id,
                base_branch=base_branch,
            )
        )

    async def session(self, task: Task) -> Session:
        """An agent-less session of the task (no process; enough to record messages)."""
        created = await self.services.sessions.create_session(task.id, SessionCreate())
        async with self.services.db.read() as conn:
            session = await session_repository.get_session(conn, created["id"])
        assert session is not None
        return session

    async def worktree(self, task: Task) -> tuple[Path, Task]:
        """What a session launch does: the task's worktree, and the task as it is then."""
        path = await self.services.worktrees.ensure_worktree(task, await self.session(task))
        return path, await self.services.tasks.get_task(task.id)


async def make_board(
    services: Services, repo: Path, *, setup_script: str = "", copy_files: list[str] | None = None
) -> RepoBoard:
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="W"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="F"))
    repository = await services.repositories.create_repository(
        ws.id,
        RepositoryCreate(path=str(repo), setup_script=setup_script, copy_files=copy_files or []),
    )
    return RepoBoard(services, repo, repository, ws.id, flow.id)


@pytest.fixture
async def board(sqlite_services: Services, tmp_path: Path) -> RepoBoard:
    repo = make_repo(tmp_path / "project", {"README.md": "# demo\n", "src/app.py": "x = 1\n"})
    return await make_board(sqlite_services, repo)


@pytest.fixture
async def any_services(database_url: str, tmp_path: Path) -> AsyncIterator[Services]:
    """Services on each database kind (SQLite and PostgreSQL)."""
    built = build_services(make_settings(tmp_path, database_url), clock=ManualClock())
    await built.prepare()
    yield built
    await built.close()


@pytest.fixture
async def any_board(any_services: Services, tmp_path: Path) -> RepoBoard:
    repo = make_repo(tmp_path / "project", {"README.md": "# demo\n", "src/app.py": "x = 1\n"})
    return await make_board(any_services, repo)
