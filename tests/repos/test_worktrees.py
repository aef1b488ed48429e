"""Task worktrees: created on first use, reused, recreated, cleaned up (CONTRACT §10)."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

from sqlalchemy import select

from kandev.db.tables import task_session_messages
from kandev.services import Services
from tests.repos.conftest import RepoBoard, make_board
from tests.repos.git_helpers import checkout_state, commit_all, git, make_repo


async def _messages(services: Services, task_id: str) -> list[SimpleNamespace]:
    async with services.db.read() as conn:
        rows = (
            await conn.execute(
                select(task_session_messages)
                .where(task_session_messages.c.task_id == task_id)
                .order_by(task_session_messages.c.created_at, task_session_messages.c.id)
            )
        ).mappings()
        return [SimpleNamespace(**row) for row in rows]


async def test_two_tasks_get_two_worktrees_on_two_branches(
    services: Services, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project")
    board = await make_board(services, repo)
    before = checkout_state(repo)
    one, two = await board.task("Fix the login page!"), await board.task("Fix the login page!")
    path_one, one = await board.worktree(one)
    path_two, two = await board.worktree(two)
    assert path_one == services.settings.data_dir / "worktrees" / one.id
    assert path_two == services.settings.data_dir / "worktrees" / two.id
    assert re.fullmatch(r"kandev/fix-the-login-page-[0-9a-f]{6}", one.branch)
    assert one.branch != two.branch
    assert git(path_one, "rev-parse", "--abbrev-ref", "HEAD") == one.branch
    assert git(path_two, "rev-parse", "--abbrev-ref", "HEAD") == two.branch
    assert one.worktree_path == str(path_one)
    payload = await services.presenter.task(one)
    assert payload["branch"] == one.branch and payload["worktree_path"] == str(path_one)
    # A second session reuses the worktree.
    again, _ = await board.worktree(one)
    assert again == path_one
    status, head, _ = before
    assert checkout_state(repo)[:2] == (status, head)  # only branches were added


async def test_a_missing_worktree_is_recreated_from_its_branch(board: RepoBoard) -> None:
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "kept.txt").write_text("committed\n")
    commit_all(path, "work")
    (path / "lost.txt").write_text("never committed\n")
    shutil.rmtree(path)
    again, same = await board.worktree(task)
    assert again == path and same.branch == task.branch
    assert (path / "kept.txt").read_text() == "committed\n"
    assert not (path / "lost.txt").exists()
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == task.branch


async def test_worktrees_survive_a_restart(board: RepoBoard, tmp_path: Path) -> None:
    from kandev.services import build_services

    task = await board.task()
    path, task = await board.worktree(task)
    (path / "notes.txt").write_text("in progress\n")
    restarted = build_services(board.services.settings)
    await restarted.prepare()
    try:
        again = await restarted.worktrees.ensure_worktree(
            await restarted.tasks.get_task(task.id), await board.session(task)
        )
    finally:
        await restarted.close()
    assert again == path and (path / "notes.txt").read_text() == "in progress\n"


async def test_copy_files_and_setup_script_output(
    sqlite_services: Services, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project", {"README.md": "hi\n", ".gitignore": ".env\nconf/\n"})
    (repo / ".env").write_text("SECRET=1\n")
    (repo / "conf").mkdir()
    (repo / "conf" / "local.toml").write_text("a = 1\n")
    script = 'echo "setting up in $(basename "$PWD")"\ncat .env\necho oops >&2\n'
    board = await make_board(
        sqlite_services, repo, setup_script=script, copy_files=[".env", "conf", "absent.txt"]
    )
    task = await board.task()
    path, task = await board.worktree(task)
    assert (path / ".env").read_text() == "SECRET=1\n"
    assert (path / "conf" / "local.toml").read_text() == "a = 1\n"
    messages = await _messages(sqlite_services, task.id)
    setup = [m for m in messages if m.type == "setup_script"]
    assert [m.author_type for m in setup] == ["system", "system"]
    assert "absent.txt: not found" in setup[0].content
    assert setup[1].content.startswith("setup script finished")
    assert f"setting up in {task.id}" in setup[1].content
    assert "SECRET=1" in setup[1].content and "oops" in setup[1].content
    assert setup[1].metadata["status"] == "ok"


async def test_a_failing_setup_script_is_reported_not_fatal(
    sqlite_services: Services, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project")
    board = await make_board(sqlite_services, repo, setup_script="echo broken\nexit 7\n")
    task = await board.task()
    path, _ = await board.worktree(task)
    assert path.is_dir()
    setup = [m for m in await _messages(sqlite_services, task.id) if m.type == "setup_script"]
    assert len(setup) == 1
    assert setup[0].content.startswith("setup script failed (exit 7)")
    assert "broken" in setup[0].content and setup[0].metadata["status"] == "failed"


async def test_delete_removes_worktree_and_branch_only_when_nothing_unmerged(
    services: Services, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project")
    (repo / "user-file.txt").write_text("the user's own work in progress\n")
    board = await make_board(services, repo)
    before = checkout_state(repo)
    clean, ahead, untouched = await board.task("clean"), await board.task("ahead"), None
    clean_path, clean = await board.worktree(clean)
    ahead_path, ahead = await board.worktree(ahead)
    (clean_path / "scratch.txt").write_text("uncommitted\n")  # goes with the worktree
    (ahead_path / "feature.txt").write_text("feature\n")
    commit_all(ahead_path, "feature")
    untouched = await board.task("never started")
    await services.tasks.delete_task(clean.id)
    await services.tasks.delete_task(ahead.id)
    await services.tasks.delete_task(untouched.id)
    assert not clean_path.exists() and not ahead_path.exists()
    branches = git(repo, "branch", "--format=%(refname:short)").splitlines()
    assert clean.branch not in branches
    assert ahead.branch in branches  # it holds a commit that is not in main
    assert len(git(repo, "worktree", "list").splitlines()) == 1
    status, head, refs = checkout_state(repo)
    assert (status, head) == before[:2]
    kept = f"refs/heads/{ahead.branch} {git(repo, 'rev-parse', ahead.branch)}"
    assert refs.splitlines() == sorted([*before[2].splitlines(), kept])


async def test_concurrent_git_operations_on_one_repository(board: RepoBoard) -> None:
    tasks = [await board.task(f"task {i}") for i in range(4)]
    sessions = [await board.session(t) for t in tasks]
    worktrees = board.services.worktrees
    changes = board.services.changes
    # 20 at once: worktree creation, change reads and commits on one repository.
    paths = await asyncio.gather(
        *(worktrees.ensure_worktree(t, s) for t, s in zip(tasks, sessions, strict=True))
    )
    for i, path in enumerate(paths):
        (path / f"file{i}.txt").write_text(f"{i}\n")
    from kandev.repos.inputs import CommitCreate

    calls = []
    for i, task in enumerate(tasks):
        calls += [changes.changes(task.id) for _ in range(3)]
        calls += [changes.commit(task.id, CommitCreate(message=f"commit {i}"))]
        calls += [changes.overlaps(task.id)]
    assert len(calls) == 20
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert [r for r in results if isinstance(r, BaseException)] == []
    for i, task in enumerate(tasks):
        current = await board.services.tasks.get_task(task.id)
        assert git(paths[i], "log", "-1", "--format=%s") == f"commit {i}"
        assert current.branch


async def test_creating_the_worktree_announces_the_task(board: RepoBoard) -> None:
    task = await board.task()
    stream = board.services.bus.subscribe()
    try:
        _, task = await board.worktree(task)
        seen = []
        while not stream.queue.empty():  # published synchronously, before the call returned
            seen.append(stream.queue.get_nowait())
    finally:
        stream.close()
    updates = [e for e in seen if e.type == "task.updated" and e.task_id == task.id]
    assert updates and updates[-1].data["task"]["branch"] == task.branch
    assert updates[-1].data["task"]["worktree_path"] == task.worktree_path


def test_a_missing_git_binary_is_a_clear_error(monkeypatch) -> None:
    import pytest

    from kandev.repos import git as git_module

    monkeypatch.setattr(git_module.shutil, "which", lambda name: None)
    with pytest.raises(git_module.GitUnavailable, match="git is not installed"):
        git_module.GitRunner.binary()
