"""The Changes panel's Commit and Merge forms and its overlap warning, without a browser: the
page routes on a real git repository. In-process (ASGI), on SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup

from kandev.sessions import session_repository
from tests.api_client import asgi_client
from tests.repos.git_helpers import checkout_state, commit_all, git, make_repo
from tests.web.conftest import board_on_repository

HX = {"HX-Request": "true"}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(tmp_path) as c:
        yield c


async def _task(client: httpx.AsyncClient, on: dict[str, str], title: str) -> tuple[dict, Path]:
    task = (await client.post("/api/v1/tasks", json={**on, "title": title})).json()
    created = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()
    services = client.services  # type: ignore[attr-defined]
    async with services.db.read() as conn:
        session = await session_repository.get_session(conn, created["id"])
    model = await services.tasks.get_task(task["id"])
    path = await services.worktrees.ensure_worktree(model, session)
    return task, path


def _doc(response: httpx.Response, status: int = 200) -> BeautifulSoup:
    assert response.status_code == status, response.text
    return BeautifulSoup(response.text, "html.parser")


async def test_the_commit_form_commits_the_worktree_with_the_message(
    client, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project", {"app.py": "x = 1\n"})
    task, path = await _task(client, await board_on_repository(client, repo), "T")
    (path / "app.py").write_text("x = 2\n")
    (path / "new.txt").write_text("hi\n")
    url = f"/tasks/{task['id']}/commit-form"
    doc = _doc(await client.post(url, data={"message": "Change x\n\nand add new.txt"}, headers=HX))
    assert doc.select_one("#changes-panel") is not None
    assert "Committed" in doc.select_one("#changes-notice").get_text()
    assert git(path, "log", "-1", "--format=%B").strip() == "Change x\n\nand add new.txt"
    assert git(path, "status", "--porcelain") == ""
    # Nothing left to commit: the reason, as a sentence, in the panel.
    doc = _doc(await client.post(url, data={"message": "again"}, headers=HX), 409)
    assert doc.select_one("#changes-error").get_text(strip=True) == "Nothing to commit."
    # An empty message is the same 400 as on REST.
    r = await client.post(url, data={"message": "  "}, headers=HX)
    assert r.status_code == 400
    # Without JavaScript: a redirect back to the page.
    (path / "app.py").write_text("x = 3\n")
    r = await client.post(url, data={"message": "Third"})
    assert r.status_code == 303 and r.headers["location"].startswith(f"/tasks/{task['id']}")
    assert git(path, "log", "-1", "--format=%s") == "Third"


@pytest.mark.parametrize("strategy", ["merge", "squash"])
async def test_the_merge_form_lands_the_branch_on_the_base_branch(
    client, tmp_path: Path, strategy: str
) -> None:
    repo = make_repo(tmp_path / "project", {"app.py": "x = 1\n"})
    task, path = await _task(client, await board_on_repository(client, repo), "Feature")
    (path / "app.py").write_text("x = 2\n")
    commit_all(path, "work")
    before = git(repo, "rev-parse", "main")
    url = f"/tasks/{task['id']}/merge-form"
    doc = _doc(await client.post(url, data={"strategy": strategy}, headers=HX))
    notice = doc.select_one("#changes-notice").get_text()
    assert ("Squashed" if strategy == "squash" else "Merged") in notice and "main" in notice
    parents = git(repo, "rev-list", "--parents", "-n", "1", "main").split()[1:]
    assert parents[0] == before
    assert len(parents) == (1 if strategy == "squash" else 2)
    assert git(repo, "show", "main:app.py") == "x = 2"
    assert (repo / "app.py").read_text() == "x = 2\n"  # the checkout of main follows


async def test_a_merge_conflict_lists_the_paths_and_changes_nothing(client, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project", {"a.txt": "1\n", "b.txt": "1\n", "c.txt": "1\n"})
    task, path = await _task(client, await board_on_repository(client, repo), "T")
    for name in ("a.txt", "b.txt"):
        (path / name).write_text("task\n")
        (repo / name).write_text("main\n")
    commit_all(path, "task side")
    commit_all(repo, "main side")
    before = checkout_state(repo)
    url = f"/tasks/{task['id']}/merge-form"
    doc = _doc(await client.post(url, data={"strategy": "merge"}, headers=HX), 409)
    assert doc.select_one("#changes-error").get_text(strip=True) == (
        "Merge refused: conflicts in a.txt, b.txt — nothing was changed."
    )
    assert doc.select_one("#changes-notice") is None
    assert checkout_state(repo) == before
    # Without JavaScript: the error page says the same, with the same status.
    r = await client.post(url, data={"strategy": "squash"})
    assert r.status_code == 409 and "conflicts in a.txt, b.txt" in r.text
    assert checkout_state(repo) == before


async def test_the_panel_warns_of_open_tasks_changing_the_same_files(
    client, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project", {"app.py": "x = 1\n", "other.py": "y = 1\n"})
    on = await board_on_repository(client, repo)
    mine, my_path = await _task(client, on, "Mine")
    theirs, their_path = await _task(client, on, "Theirs <b>")
    apart, apart_path = await _task(client, on, "Apart")
    (my_path / "app.py").write_text("x = 2\n")
    (their_path / "app.py").write_text("x = 3\n")
    (apart_path / "other.py").write_text("y = 2\n")
    doc = _doc(await client.get(f"/tasks/{mine['id']}/changes-fragment"))
    warning = doc.select_one("#changes-overlaps")
    items = warning.select("li")
    assert [li["data-task-id"] for li in items] == [theirs["id"]]
    link = items[0].select_one("a")
    assert link["href"] == f"/tasks/{theirs['id']}" and link.get_text() == "Theirs <b>"
    assert "app.py" in items[0].get_text() and "other.py" not in items[0].get_text()
    api = (await client.get(f"/api/v1/tasks/{mine['id']}/overlaps")).json()
    assert [o["task_id"] for o in api["overlaps"]] == [theirs["id"]]
    doc = _doc(await client.get(f"/tasks/{apart['id']}/changes-fragment"))
    assert doc.select_one("#changes-overlaps") is None
