"""Registering repositories in a workspace, and tasks that name one (CONTRACT §10)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import anyio
import httpx
import pytest

from kandev.auth.identity import Identity, acting_as
from kandev.board.inputs import WorkspaceCreate
from kandev.errors import NotFound
from kandev.repos import repository_sql
from kandev.repos.inputs import RepositoryCreate
from kandev.services import Services
from tests.api_client import asgi_client
from tests.clarification.test_repository import wait_for_lock_waiter
from tests.repos.git_helpers import git, make_repo


async def _board(client) -> tuple[dict, dict]:
    ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
    flow = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
    ).json()
    return ws, flow


async def test_register_list_edit_delete(database_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project")
    git(repo, "branch", "develop")
    async with asgi_client(tmp_path, database_url) as client:
        ws, _ = await _board(client)
        base = f"/api/v1/workspaces/{ws['id']}/repositories"
        r = await client.post(base, json={"path": str(repo), "copy_files": [".env"]})
        assert r.status_code == 201, r.text
        created = r.json()
        assert set(created) == {
            "id", "workspace_id", "name", "path", "default_branch", "setup_script",
            "copy_files", "created_at", "updated_at",
        }  # fmt: skip
        assert created["name"] == "project" and created["default_branch"] == "main"
        assert created["path"] == str(repo) and created["copy_files"] == [".env"]
        listed = (await client.get(base)).json()
        assert [x["id"] for x in listed["repositories"]] == [created["id"]]
        r = await client.patch(
            f"{base}/{created['id']}",
            json={"name": "renamed", "default_branch": "develop", "setup_script": "make"},
        )
        assert r.status_code == 200, r.text
        assert (r.json()["name"], r.json()["default_branch"]) == ("renamed", "develop")
        r = await client.patch(f"{base}/{created['id']}", json={"default_branch": "nope"})
        assert r.status_code == 400 and r.json()["error"].startswith("default_branch")
        assert (await client.delete(f"{base}/{created['id']}")).status_code == 204
        assert (await client.get(f"{base}/{created['id']}")).status_code == 404


async def test_bad_paths_are_refused_naming_path(sqlite_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project")
    (repo / "sub").mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    async with asgi_client(tmp_path, sqlite_url) as client:
        ws, _ = await _board(client)
        base = f"/api/v1/workspaces/{ws['id']}/repositories"
        for path in ("relative/dir", str(tmp_path / "missing"), str(plain), str(repo / "sub"), ""):
            r = await client.post(base, json={"path": path})
            assert r.status_code == 400, (path, r.text)
            assert r.json()["error"].startswith("path"), r.text
        r = await client.post(base, json={"path": str(repo), "default_branch": "nope"})
        assert r.status_code == 400 and r.json()["error"].startswith("default_branch")
        for bad in ("../secret", "/etc/passwd", "a/../../b"):
            r = await client.post(base, json={"path": str(repo), "copy_files": [bad]})
            assert r.status_code == 400 and r.json()["error"].startswith("copy_files"), bad
        r = await client.post("/api/v1/workspaces/nope/repositories", json={"path": str(repo)})
        assert r.status_code == 404


async def test_a_checkout_is_registered_once_per_workspace_even_at_once(
    database_url: str, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project")
    async with asgi_client(tmp_path, database_url) as client:
        ws, _ = await _board(client)
        base = f"/api/v1/workspaces/{ws['id']}/repositories"
        # Eight registrations of one path at once (concurrent transactions on PostgreSQL).
        tries = await asyncio.gather(
            *(client.post(base, json={"path": str(repo), "name": f"n{i}"}) for i in range(8))
        )
        assert sorted(r.status_code for r in tries) == [201] + [409] * 7
        (winner,) = [r.json() for r in tries if r.status_code == 201]
        for refused in (r for r in tries if r.status_code == 409):
            assert refused.json()["error"] == (
                f"path: {repo} is already registered in this workspace as "
                f"{winner['name']!r} ({winner['id']})"
            )
        again = await client.post(base, json={"path": f"{repo}/"})  # the same path, spelled apart
        assert again.status_code == 409, again.text
        listed = (await client.get(base)).json()["repositories"]
        assert [x["id"] for x in listed] == [winner["id"]]
        # Another workspace registers its own.
        other, _ = await _board(client)
        r = await client.post(
            f"/api/v1/workspaces/{other['id']}/repositories", json={"path": str(repo)}
        )
        assert r.status_code == 201, r.text


async def test_a_registration_waits_for_one_of_the_same_path_in_flight_on_postgresql(
    database_url: str, tmp_path: Path
) -> None:
    """Deterministic: a registration of the path is held open (its lock taken, its row
    written, not committed); a second one must wait for it, then refuse. Without the lock it
    would see no row and add a second registration."""
    if "postgresql" not in database_url:
        pytest.skip("SQLite serializes whole write transactions (its one write lock)")
    repo = make_repo(tmp_path / "project")
    async with asgi_client(tmp_path, database_url) as client:
        ws, _ = await _board(client)
        db = client.services.db  # type: ignore[attr-defined]
        async with anyio.create_task_group() as group:
            results: list[httpx.Response] = []

            async def second() -> None:
                base = f"/api/v1/workspaces/{ws['id']}/repositories"
                results.append(await client.post(base, json={"path": str(repo)}))

            async with db.write() as conn:
                await repository_sql.lock_registrations_of(conn, ws["id"], str(repo))
                now = datetime.now(UTC)
                first = {
                    "id": "first", "workspace_id": ws["id"], "name": "first", "path": str(repo),
                    "default_branch": "main", "setup_script": "", "copy_files": [],
                    "created_at": now, "updated_at": now,
                }  # fmt: skip
                await repository_sql.insert_repository(conn, first)
                group.start_soon(second)
                await wait_for_lock_waiter(db)
            # Committed: the waiting registration goes on, and finds it.
        (refused,) = results
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"].endswith("as 'first' (first)")


async def test_a_foreign_workspace_repository_is_not_found(
    services: Services, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project")
    alice, bob = Identity(user_id="alice"), Identity(user_id="bob")
    with acting_as(alice):
        ws = await services.workspaces.create_workspace(WorkspaceCreate(name="A"))
        mine = await services.repositories.create_repository(
            ws.id, RepositoryCreate(path=str(repo))
        )
    with acting_as(bob):
        for call in (
            services.repositories.list_repositories(ws.id),
            services.repositories.get_repository(ws.id, mine.id),
            services.repositories.delete_repository(ws.id, mine.id),
            services.repositories.create_repository(ws.id, RepositoryCreate(path=str(repo))),
        ):
            with pytest.raises(NotFound) as caught:
                await call
            assert "not found" in caught.value.message
        with pytest.raises(NotFound) as other:
            await services.repositories.get_repository(ws.id, "missing")
        assert other.value.message == "repository not found"
    with acting_as(alice):
        assert [r.id for r in await services.repositories.list_repositories(ws.id)] == [mine.id]


async def test_tasks_name_a_repository_and_a_base_branch(database_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project")
    git(repo, "branch", "release")
    async with asgi_client(tmp_path, database_url) as client:
        ws, flow = await _board(client)
        other_ws, _ = await _board(client)
        base = f"/api/v1/workspaces/{ws['id']}/repositories"
        repository = (await client.post(base, json={"path": str(repo)})).json()
        task = {"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "T"}
        r = await client.post("/api/v1/tasks", json={**task, "repository_id": repository["id"]})
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["repository_id"] == repository["id"] and body["base_branch"] == "main"
        assert body["branch"] is None and body["worktree_path"] is None
        r = await client.post(
            "/api/v1/tasks",
            json={**task, "repository_id": repository["id"], "base_branch": "release"},
        )
        assert r.status_code == 201 and r.json()["base_branch"] == "release"
        r = await client.post(
            "/api/v1/tasks", json={**task, "repository_id": repository["id"], "base_branch": "x"}
        )
        assert r.status_code == 400 and r.json()["error"].startswith("base_branch")
        r = await client.post("/api/v1/tasks", json={**task, "repository_id": "nope"})
        assert r.status_code == 400 and r.json()["error"].startswith("repository_id")
        foreign = f"/api/v1/workspaces/{other_ws['id']}/repositories"
        elsewhere = (await client.post(foreign, json={"path": str(repo)})).json()
        r = await client.post("/api/v1/tasks", json={**task, "repository_id": elsewhere["id"]})
        assert r.status_code == 400 and r.json()["error"].startswith("repository_id")
        plain = (await client.post("/api/v1/tasks", json=task)).json()
        assert plain["repository_id"] is None and plain["branch"] is None
        r = await client.delete(f"{base}/{repository['id']}")
        assert r.status_code == 409 and "task" in r.json()["error"]


async def test_deleting_a_workspace_deletes_its_repository_registrations(
    sqlite_services: Services, tmp_path: Path
) -> None:
    from sqlalchemy import func, select

    from kandev.db.tables import repositories

    repo = make_repo(tmp_path / "project")
    services = sqlite_services
    gone = await services.workspaces.create_workspace(WorkspaceCreate(name="gone"))
    kept = await services.workspaces.create_workspace(WorkspaceCreate(name="kept"))
    for ws in (gone, kept):
        await services.repositories.create_repository(ws.id, RepositoryCreate(path=str(repo)))
    before = git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")
    await services.workspaces.delete_workspace(gone.id)
    async with services.db.read() as conn:
        rows = (
            await conn.execute(
                select(repositories.c.workspace_id, func.count()).group_by(
                    repositories.c.workspace_id
                )
            )
        ).all()
    assert [tuple(r) for r in rows] == [(kept.id, 1)]
    assert (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")) == before
