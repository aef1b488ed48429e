"""`kandev gc` and the periodic sweep: worktrees of deleted tasks go, nothing else does."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kandev.board import task_repository
from kandev.board.models import Task
from kandev.clock import ManualClock
from kandev.repos.gc import human_bytes
from kandev.services import Services, build_services
from tests.conftest import make_settings
from tests.repos.conftest import RepoBoard, make_board
from tests.repos.git_helpers import checkout_state, commit_all, git, make_repo


async def _forget(services: Services, task: Task) -> None:
    """The task's row goes, its worktree stays: a cleanup that never ran (a crash)."""
    async with services.db.write() as conn:
        await task_repository.delete_task(conn, task.id)


def _branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").splitlines()


async def test_gc_removes_what_deleted_tasks_left_and_nothing_else(board: RepoBoard) -> None:
    services, repo = board.services, board.repo
    live_path, live = await board.worktree(await board.task("live"))
    archived_path, archived = await board.worktree(await board.task("archived"))
    await services.tasks.archive_task(archived.id)
    spare_path, spare = await board.worktree(await board.task("spare"))
    (spare_path / "scratch.txt").write_text("uncommitted\n" * 100)
    ahead_path, ahead = await board.worktree(await board.task("ahead"))
    (ahead_path / "feature.txt").write_text("feature\n")
    commit_all(ahead_path, "feature")
    orphan_path, orphan = await board.worktree(await board.task("orphan"))
    for task in (spare, ahead, orphan):
        await _forget(services, task)
    # git forgot this one: its admin entry is gone, the directory stays.
    shutil.rmtree(repo / ".git" / "worktrees" / orphan_path.name)
    stray = services.settings.data_dir / "worktrees" / "not-a-task"
    (stray / "sub").mkdir(parents=True)
    (stray / "sub" / "junk.bin").write_bytes(b"x" * 5000)
    before = checkout_state(repo)

    dry = (await services.worktree_gc.collect(dry_run=True)).to_json()
    removed = {Path(r["path"]).name: r for r in dry["removed"]}
    assert set(removed) == {spare.id, ahead.id, orphan.id, "not-a-task"}
    assert removed[spare.id]["kind"] == "worktree" and removed[spare.id]["branch_deleted"]
    assert removed[ahead.id]["branch"] == ahead.branch and not removed[ahead.id]["branch_deleted"]
    assert removed[orphan.id]["kind"] == removed["not-a-task"]["kind"] == "directory"
    assert removed["not-a-task"]["bytes"] >= 5000 and dry["bytes"] > 6000
    assert dry["dry_run"] and dry["reclaimed"] == human_bytes(dry["bytes"]) and not dry["errors"]
    assert all(p.exists() for p in (spare_path, ahead_path, orphan_path, stray))
    assert spare.branch in _branches(repo)

    done = (await services.worktree_gc.collect()).to_json()
    assert {Path(r["path"]).name for r in done["removed"]} == set(removed)
    assert done["bytes"] > 6000 and not done["errors"]
    assert not any(p.exists() for p in (spare_path, ahead_path, orphan_path, stray))
    assert live_path.is_dir() and archived_path.is_dir()  # existing tasks keep theirs
    branches = _branches(repo)
    assert spare.branch not in branches  # nothing unmerged on it
    assert ahead.branch in branches  # holds a commit no other branch has
    assert live.branch in branches and archived.branch in branches
    worktrees = git(repo, "worktree", "list", "--porcelain")
    assert str(live_path) in worktrees and str(archived_path) in worktrees
    assert len([w for w in worktrees.splitlines() if w.startswith("worktree ")]) == 3
    status, head, _ = checkout_state(repo)
    assert (status, head) == before[:2]  # the user's checkout is never touched

    again = (await services.worktree_gc.collect()).to_json()
    assert again["removed"] == [] and again["bytes"] == 0


def test_kandev_gc_cli_reports_and_dry_runs(tmp_path: Path) -> None:
    from kandev.cli import app

    settings = make_settings(tmp_path)  # SQLite in the data dir, as the CLI opens it

    async def leave_a_worktree() -> Path:
        services = build_services(settings, clock=ManualClock())
        await services.prepare()
        try:
            board = await make_board(services, make_repo(tmp_path / "project"))
            path, task = await board.worktree(await board.task("gone"))
            (path / "big.txt").write_text("y" * 3000)
            await _forget(services, task)
            return path
        finally:
            await services.close()

    path = asyncio.run(leave_a_worktree())
    runner = CliRunner()
    env = {"KANDEV_HOME": None, "KANDEV_DATABASE_URL": None}
    home = ["--data-dir", str(settings.data_dir)]
    dry = runner.invoke(app, ["gc", "--dry-run", *home], env=env)
    assert dry.exit_code == 0, dry.output
    assert f"would remove worktree {path}" in dry.output
    assert "would reclaim" in dry.output and path.exists()
    done = runner.invoke(app, ["gc", "--json", *home], env=env)
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert [r["path"] for r in report["removed"]] == [str(path)]
    assert report["bytes"] >= 3000 and report["reclaimed"].endswith("KiB")
    assert not path.exists()
    plain = runner.invoke(app, ["gc", *home], env=env)
    assert plain.exit_code == 0 and "0 removed, reclaimed 0 B (0 bytes)" in plain.output


async def test_the_server_sweeps_periodically_and_stops_on_close(
    sqlite_url: str, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, sqlite_url, worktree_sweep_seconds=0.01)
    stray = settings.data_dir / "worktrees" / "left-behind"
    stray.mkdir(parents=True)
    services = build_services(settings, clock=ManualClock())
    await services.prepare()
    try:
        await asyncio.wait_for(services.worktree_gc.swept.wait(), timeout=30)
        assert not stray.exists()
        assert services.worktree_gc.sweeping
    finally:
        await services.close()
    assert not services.worktree_gc.sweeping  # cancelled with the server


async def test_no_sweep_when_the_setting_is_zero(sqlite_url: str, tmp_path: Path) -> None:
    services = build_services(
        make_settings(tmp_path, sqlite_url, worktree_sweep_seconds=0), clock=ManualClock()
    )
    await services.prepare()
    try:
        assert not services.worktree_gc.sweeping
    finally:
        await services.close()


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1536, 5 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "5.0 GiB",
    ]
