"""Tasks on a repository with real ACP agents over a real uvicorn (CONTRACT §10)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.e2e.board_helpers import messages, scripted_profile
from tests.repos.git_helpers import checkout_state, git, make_repo
from tests.sse_client import of_type, sse_stream


def _exists(path: str) -> bool:
    return Path(path).exists()


@pytest.fixture
def server(live_server_factory, sqlite_url: str):
    return live_server_factory(sqlite_url)


async def _setup(client: httpx.AsyncClient, repo: Path) -> tuple[dict, dict, dict]:
    ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
    flow = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
    ).json()
    r = await client.post(f"/api/v1/workspaces/{ws['id']}/repositories", json={"path": str(repo)})
    assert r.status_code == 201, r.text
    return ws, flow, r.json()


async def _task(client, ws, flow, repository, title: str, **extra) -> dict:
    body = {"workspace_id": ws["id"], "workflow_id": flow["id"], "title": title}
    r = await client.post(
        "/api/v1/tasks", json={**body, "repository_id": repository["id"], **extra}
    )
    assert r.status_code == 201, r.text
    return r.json()


async def _turn(client, events, session_id: str, text: str) -> str:
    r = await client.post(f"/api/v1/sessions/{session_id}/prompt", json={"text": text})
    assert r.status_code == 202, r.text
    turn_id = r.json()["turn_id"]
    await events.wait_for(of_type("session.turn.completed", turn_id=turn_id))
    return turn_id


async def _last_agent_text(client, session_id: str) -> str:
    return [m for m in await messages(client, session_id) if m["author_type"] == "agent"][-1][
        "content"
    ]


async def test_each_task_agent_works_in_its_own_worktree(server, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project", {"README.md": "# demo\n", "src/app.py": "x = 1\n"})
    before = checkout_state(repo)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        ws, flow, repository = await _setup(client, repo)
        profile = await scripted_profile(client)
        tasks = [await _task(client, ws, flow, repository, f"Task {i}") for i in range(2)]
        sessions = []
        for i, task in enumerate(tasks):
            async with sse_stream(client, params={"task_id": task["id"]}) as events:
                r = await client.post(
                    f"/api/v1/tasks/{task['id']}/sessions",
                    json={"agent_profile_id": profile["id"]},
                )
                assert r.status_code == 201, r.text
                session = r.json()
                await events.wait_for(of_type("session.state_changed", state="IDLE"))
                await _turn(client, events, session["id"], "gitinfo")
                info = json.loads(await _last_agent_text(client, session["id"]))
                await _turn(client, events, session["id"], f"write notes/task{i}.txt from {i}")
                updated = await events.wait_for(of_type("task.changes_updated"))
            tasks[i] = (await client.get(f"/api/v1/tasks/{task['id']}")).json()
            assert info == {"cwd": tasks[i]["worktree_path"], "branch": tasks[i]["branch"]}
            assert tasks[i]["worktree_path"].endswith(f"/worktrees/{task['id']}")
            assert [f["path"] for f in updated.data["changes"]["files"]] == [f"notes/task{i}.txt"]
            sessions.append(session)
        assert tasks[0]["branch"] != tasks[1]["branch"]
        for i, task in enumerate(tasks):
            r = await client.get(f"/api/v1/tasks/{task['id']}/changes")
            assert r.status_code == 200, r.text
            changes = r.json()
            assert [f["path"] for f in changes["files"]] == [f"notes/task{i}.txt"]
            assert f"+from {i}" in changes["files"][0]["diff"]
            assert changes["branch"] == task["branch"] and changes["base_branch"] == "main"
        # Review comments reach the agent as one prompt naming file and line.
        async with sse_stream(client, params={"task_id": tasks[0]["id"]}) as events:
            r = await client.post(
                f"/api/v1/tasks/{tasks[0]['id']}/review",
                json={
                    "comments": [
                        {"path": "notes/task0.txt", "line": 1, "body": "Say more here."},
                        {"path": "src/app.py", "line": 3, "body": "Why x?"},
                    ],
                    "message": "Please address these.",
                },
            )
            assert r.status_code == 202, r.text
            assert r.json()["queued"] is False and r.json()["turn_id"]
            await events.wait_for(of_type("session.turn.completed", turn_id=r.json()["turn_id"]))
        history = await messages(client, sessions[0]["id"])
        prompts = [m for m in history if m["turn_id"] == r.json()["turn_id"]]
        user = [m for m in prompts if m["author_type"] == "user"]
        assert len(user) == 1
        for needle in ("notes/task0.txt:1", "Say more here.", "src/app.py:3", "Why x?",
                       "Please address these."):  # fmt: skip
            assert needle in user[0]["content"]
        agent = [m for m in prompts if m["author_type"] == "agent"][-1]["content"]
        assert "src/app.py:3" in agent  # what reached the agent, quoted back
        # Commit, then nothing to commit; merge; and the user's checkout is untouched.
        r = await client.post(f"/api/v1/tasks/{tasks[1]['id']}/commit", json={"message": "Notes"})
        assert r.status_code == 200, r.text
        assert r.json()["files"] == ["notes/task1.txt"]
        r = await client.post(f"/api/v1/tasks/{tasks[1]['id']}/commit", json={"message": "x"})
        assert r.status_code == 409 and r.json() == {"error": "nothing to commit"}
        assert checkout_state(repo) == (before[0], before[1], checkout_state(repo)[2])
        # Deleting a task stops its agent, then removes its worktree (and unmerged-free branch).
        r = await client.delete(f"/api/v1/tasks/{tasks[0]['id']}")
        assert r.status_code == 204
        assert not _exists(tasks[0]["worktree_path"])
        assert tasks[0]["branch"] not in git(repo, "branch", "--format=%(refname:short)")
        assert _exists(tasks[1]["worktree_path"])
        assert checkout_state(repo)[:2] == before[:2]


async def test_merge_conflict_answers_409_with_paths(server, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project")
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        ws, flow, repository = await _setup(client, repo)
        profile = await scripted_profile(client)
        task = await _task(client, ws, flow, repository, "Conflicting")
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            r = await client.post(
                f"/api/v1/tasks/{task['id']}/sessions",
                json={"agent_profile_id": profile["id"], "prompt": "write README.md theirs"},
            )
            await events.wait_for(of_type("session.turn.completed"))
        r = await client.post(f"/api/v1/tasks/{task['id']}/commit", json={"message": "theirs"})
        assert r.status_code == 200, r.text
        (repo / "README.md").write_text("ours\n")
        git(repo, "commit", "-q", "-am", "ours")
        before = checkout_state(repo)
        r = await client.post(f"/api/v1/tasks/{task['id']}/merge", json={})
        assert r.status_code == 409
        assert r.json()["conflicts"] == ["README.md"] and "conflict" in r.json()["error"]
        assert checkout_state(repo) == before
        r = await client.post(f"/api/v1/tasks/{task['id']}/merge", json={"strategy": "rebase"})
        assert r.status_code == 400 and r.json()["error"].startswith("strategy")


async def test_a_worktree_that_cannot_be_made_fails_the_session(server, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project")
    git(repo, "branch", "release")
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        ws, flow, repository = await _setup(client, repo)
        profile = await scripted_profile(client)
        task = await _task(client, ws, flow, repository, "Doomed", base_branch="release")
        git(repo, "branch", "-D", "release")  # gone before the first session
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            r = await client.post(
                f"/api/v1/tasks/{task['id']}/sessions", json={"agent_profile_id": profile["id"]}
            )
            assert r.status_code == 201, r.text
            failed = await events.wait_for(of_type("session.state_changed", state="FAILED"))
        assert "worktree" in failed.data["error_message"]
        errors = [m for m in await messages(client, r.json()["id"]) if m["type"] == "error"]
        assert errors and "worktree" in errors[0]["content"]


async def test_changes_routes_are_scoped_and_need_a_repository(server, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        r = await client.get("/api/v1/tasks/missing/changes")
        assert r.status_code == 404
        ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
        flow = (
            await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
        ).json()
        plain = (
            await client.post(
                "/api/v1/tasks",
                json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "plain"},
            )
        ).json()
        r = await client.get(f"/api/v1/tasks/{plain['id']}/changes")
        assert r.status_code == 409 and "repository" in r.json()["error"]


async def test_without_git_the_repository_routes_answer_503(
    server, tmp_path: Path, monkeypatch
) -> None:
    repo = make_repo(tmp_path / "project")
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        ws, flow, repository = await _setup(client, repo)
        empty = tmp_path / "no-git-here"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))  # the server runs in this process
        r = await client.post(
            f"/api/v1/workspaces/{ws['id']}/repositories", json={"path": str(repo)}
        )
        assert r.status_code == 503, r.text
        assert r.json() == {
            "error": "git is not installed (no `git` on PATH); install git to use repositories"
        }
        body = {"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "t"}
        r = await client.post("/api/v1/tasks", json={**body, "repository_id": repository["id"]})
        assert r.status_code == 503 and "git is not installed" in r.json()["error"]
