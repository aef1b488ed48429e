"""Per-file "reviewed" marks of a task's changes: durable, and stale once the file's diff
changes (the Changes panel, CONTRACT §10)."""

from __future__ import annotations

import pytest

from kandev.errors import Conflict
from kandev.repos import repository_sql
from tests.repos.conftest import RepoBoard


def _marks(panel: dict) -> dict[str, str]:
    return {f["path"]: f["reviewed"] for f in panel["files"]}


async def test_a_reviewed_mark_turns_stale_when_the_file_changes(board: RepoBoard) -> None:
    changes = board.services.changes
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "src/app.py").write_text("x = 22\n")
    (path / "notes.txt").write_text("hello\n")
    panel = await changes.review_panel(task.id)
    assert _marks(panel) == {"notes.txt": "", "src/app.py": ""}
    assert panel["reviewed_files"] == 0

    panel = await changes.mark_reviewed(task.id, "src/app.py", True)
    assert _marks(panel) == {"notes.txt": "", "src/app.py": "reviewed"}
    assert panel["reviewed_files"] == 1
    assert panel["files"][-1]["path"] == "src/app.py"
    # Another file changing leaves the mark as it is, and so does a file sorting after it
    # (src/app.py was the last file of the patch, now it is not).
    (path / "notes.txt").write_text("hello again\n")
    (path / "src/zz.py").write_text("z = 1\n")
    assert _marks(await changes.review_panel(task.id))["src/app.py"] == "reviewed"
    # The file itself changing makes it stale; marking again makes it fresh.
    (path / "src/app.py").write_text("x = 333\n")
    assert _marks(await changes.review_panel(task.id))["src/app.py"] == "stale"
    panel = await changes.mark_reviewed(task.id, "src/app.py", True)
    assert _marks(panel)["src/app.py"] == "reviewed"
    # Cleared on request.
    panel = await changes.mark_reviewed(task.id, "src/app.py", False)
    assert _marks(panel)["src/app.py"] == ""


async def test_only_changed_files_can_be_marked_and_marks_go_with_the_task(
    board: RepoBoard,
) -> None:
    changes = board.services.changes
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "notes.txt").write_text("hello\n")
    with pytest.raises(Conflict):
        await changes.mark_reviewed(task.id, "README.md", True)
    await changes.mark_reviewed(task.id, "notes.txt", True)

    async with board.services.db.read() as conn:
        assert list(await repository_sql.reviewed_marks(conn, task.id)) == ["notes.txt"]
    await board.services.tasks.delete_task(task.id)
    async with board.services.db.read() as conn:
        assert await repository_sql.reviewed_marks(conn, task.id) == {}
