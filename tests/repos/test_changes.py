"""A task's changes, commit, merge and overlaps against real repositories (CONTRACT §10)."""

from __future__ import annotations

import pytest

from kandev.errors import Conflict
from kandev.repos.changes import FILE_DIFF_CAP, MAX_FILES, TOTAL_DIFF_CAP, MergeConflict
from kandev.repos.inputs import CommitCreate, MergeCreate
from tests.repos.conftest import RepoBoard
from tests.repos.git_helpers import checkout_state, commit_all, git


async def test_changes_cover_committed_staged_unstaged_untracked_renames_binary(
    board: RepoBoard,
) -> None:
    task = await board.task()
    path, task = await board.worktree(task)
    empty = await board.services.changes.changes(task.id)
    assert empty["files"] == [] and empty["branch"] == task.branch
    assert empty["base_branch"] == "main"
    assert empty["merge_base"] == git(board.repo, "rev-parse", "main")
    (path / "committed.txt").write_text("one\ntwo\n")
    commit_all(path, "on the branch")
    (path / "staged.txt").write_text("staged\n")
    git(path, "add", "staged.txt")
    (path / "README.md").write_text("# demo\nmore\n")  # unstaged
    (path / "untracked.txt").write_text("new\n")
    git(path, "mv", "src/app.py", "src/main.py")
    (path / "logo.bin").write_bytes(bytes(range(256)) * 4)
    index_before = git(path, "status", "--porcelain")
    changes = await board.services.changes.changes(task.id)
    assert git(path, "status", "--porcelain") == index_before  # the real index untouched
    by_path = {f["path"]: f for f in changes["files"]}
    assert set(by_path) == {
        "committed.txt", "staged.txt", "README.md", "untracked.txt", "src/main.py", "logo.bin",
    }  # fmt: skip
    assert by_path["committed.txt"]["status"] == "added"
    assert (by_path["committed.txt"]["additions"], by_path["committed.txt"]["deletions"]) == (2, 0)
    assert by_path["README.md"]["status"] == "modified"
    assert "+more" in by_path["README.md"]["diff"]
    assert by_path["README.md"]["diff"].startswith("diff --git a/README.md b/README.md")
    assert by_path["untracked.txt"]["status"] == "added"
    rename = by_path["src/main.py"]
    assert (rename["status"], rename["old_path"]) == ("renamed", "src/app.py")
    assert by_path["logo.bin"]["binary"] is True and by_path["logo.bin"]["additions"] == 0
    assert changes["additions"] == sum(f["additions"] for f in changes["files"])
    assert changes["truncated"] is False
    assert all(f["truncated"] is False for f in changes["files"])


async def test_diffs_are_capped_per_file_and_in_all(board: RepoBoard) -> None:
    task = await board.task()
    path, task = await board.worktree(task)
    line = "x" * 99 + "\n"
    (path / "huge.txt").write_text(line * (FILE_DIFF_CAP // 100 + 100))
    for i in range(12):  # 12 files of ~200 KiB: over 2 MiB
        (path / f"big{i:02}.txt").write_text(f"{i}" * 99 + "\n" + line * 2000)
    changes = await board.services.changes.changes(task.id)
    by_path = {f["path"]: f for f in changes["files"]}
    assert by_path["huge.txt"]["truncated"] is True
    assert len(by_path["huge.txt"]["diff"].encode()) <= FILE_DIFF_CAP
    assert by_path["huge.txt"]["additions"] == FILE_DIFF_CAP // 100 + 100  # counts stay whole
    assert changes["truncated"] is True
    assert sum(len(f["diff"].encode()) for f in changes["files"]) <= TOTAL_DIFF_CAP
    assert any(f["diff"] == "" and f["truncated"] for f in changes["files"])


async def test_at_most_500_files(board: RepoBoard) -> None:
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "many").mkdir()
    for i in range(MAX_FILES + 5):
        (path / "many" / f"{i:04}.txt").write_text(f"{i}\n")
    changes = await board.services.changes.changes(task.id)
    assert len(changes["files"]) == MAX_FILES and changes["truncated"] is True


async def test_changes_of_one_task_never_show_in_another(board: RepoBoard) -> None:
    one, two = await board.task("one"), await board.task("two")
    path_one, one = await board.worktree(one)
    _, two = await board.worktree(two)
    (path_one / "only-one.txt").write_text("1\n")
    assert [f["path"] for f in (await board.services.changes.changes(one.id))["files"]] == [
        "only-one.txt"
    ]
    assert (await board.services.changes.changes(two.id))["files"] == []


async def test_commit_and_nothing_to_commit(board: RepoBoard) -> None:
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "a.txt").write_text("a\n")
    (path / "README.md").write_text("changed\n")
    result = await board.services.changes.commit(task.id, CommitCreate(message="Add a"))
    assert result["commit"] == git(path, "rev-parse", "HEAD")
    assert sorted(result["files"]) == ["README.md", "a.txt"]
    assert git(path, "log", "-1", "--format=%s") == "Add a"
    assert git(path, "status", "--porcelain") == ""
    with pytest.raises(Conflict, match="nothing to commit"):
        await board.services.changes.commit(task.id, CommitCreate(message="again"))
    # Committed work still counts as the task's changes.
    files = (await board.services.changes.changes(task.id))["files"]
    assert sorted(f["path"] for f in files) == ["README.md", "a.txt"]


async def _task_with_commit(board: RepoBoard, files: dict[str, str], title: str = "t"):
    task = await board.task(title)
    path, task = await board.worktree(task)
    for name, content in files.items():
        (path / name).write_text(content)
    await board.services.changes.commit(task.id, CommitCreate(message=f"work on {title}"))
    return task, path


async def test_merge_into_the_checked_out_base_updates_its_working_tree(board: RepoBoard) -> None:
    task, _ = await _task_with_commit(board, {"feature.txt": "feature\n"})
    old_main = git(board.repo, "rev-parse", "main")
    result = await board.services.changes.merge(task.id, MergeCreate())
    assert git(board.repo, "rev-parse", "main") == result["commit"]
    parents = git(board.repo, "log", "-1", "--format=%P", "main").split()
    assert parents == [old_main, git(board.repo, "rev-parse", task.branch)]
    assert (board.repo / "feature.txt").read_text() == "feature\n"  # as `git merge` leaves it
    assert git(board.repo, "status", "--porcelain") == ""
    with pytest.raises(Conflict, match="nothing to merge"):
        await board.services.changes.merge(task.id, MergeCreate())


async def test_squash_merge_with_another_branch_checked_out(board: RepoBoard) -> None:
    git(board.repo, "checkout", "-q", "-b", "elsewhere")
    (board.repo / "wip.txt").write_text("user's uncommitted work\n")
    before = checkout_state(board.repo)
    task, _ = await _task_with_commit(board, {"feature.txt": "feature\n"}, "Squash me")
    old_main = git(board.repo, "rev-parse", "main")
    result = await board.services.changes.merge(task.id, MergeCreate(strategy="squash"))
    assert git(board.repo, "rev-parse", "main") == result["commit"]
    assert git(board.repo, "log", "-1", "--format=%P", "main").split() == [old_main]
    assert git(board.repo, "show", "main:feature.txt") == "feature"
    status, head, _ = checkout_state(board.repo)
    assert (status, head) == before[:2]  # the user's checkout is untouched
    assert git(board.repo, "rev-parse", "--abbrev-ref", "HEAD") == "elsewhere"


async def test_a_squashed_branch_has_nothing_more_to_merge(board: RepoBoard) -> None:
    task, _ = await _task_with_commit(board, {"feature.txt": "feature\n"}, "Squash once")
    squashed = await board.services.changes.merge(task.id, MergeCreate(strategy="squash"))
    before = checkout_state(board.repo)
    for strategy in ("squash", "merge"):  # neither may add a commit that changes no file
        with pytest.raises(Conflict, match="already has every change of the branch"):
            await board.services.changes.merge(task.id, MergeCreate(strategy=strategy))
    assert git(board.repo, "rev-parse", "main") == squashed["commit"]
    assert checkout_state(board.repo) == before


async def test_merging_uncommitted_work_says_to_commit_it_first(board: RepoBoard) -> None:
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "feature.txt").write_text("not committed\n")
    with pytest.raises(Conflict, match="not committed yet: commit them first"):
        await board.services.changes.merge(task.id, MergeCreate())
    (path / "feature.txt").unlink()  # a clean worktree: the plain reason alone
    with pytest.raises(Conflict) as caught:
        await board.services.changes.merge(task.id, MergeCreate())
    assert caught.value.message == "nothing to merge: 'main' already has every commit of the branch"


async def test_merge_conflict_leaves_the_repository_untouched(board: RepoBoard) -> None:
    task, _ = await _task_with_commit(board, {"README.md": "theirs\n", "new.txt": "n\n"})
    (board.repo / "README.md").write_text("ours\n")
    commit_all(board.repo, "a conflicting change on main")
    before = checkout_state(board.repo)
    with pytest.raises(MergeConflict) as caught:
        await board.services.changes.merge(task.id, MergeCreate())
    assert caught.value.conflicts == ["README.md"]
    assert checkout_state(board.repo) == before


async def test_a_dirty_checkout_of_the_base_refuses_the_merge(board: RepoBoard) -> None:
    task, _ = await _task_with_commit(board, {"feature.txt": "feature\n"})
    (board.repo / "README.md").write_text("the user is editing this\n")
    before = checkout_state(board.repo)
    with pytest.raises(Conflict, match="uncommitted changes"):
        await board.services.changes.merge(task.id, MergeCreate())
    assert checkout_state(board.repo) == before


async def test_overlaps_name_other_open_tasks_touching_the_same_files(board: RepoBoard) -> None:
    one, two, three = await board.task("one"), await board.task("two"), await board.task("three")
    p1, one = await board.worktree(one)
    p2, two = await board.worktree(two)
    p3, three = await board.worktree(three)
    (p1 / "README.md").write_text("one\n")
    (p1 / "a.txt").write_text("a\n")
    (p2 / "README.md").write_text("two\n")
    commit_all(p2, "two")
    (p3 / "other.txt").write_text("3\n")
    overlaps = await board.services.changes.overlaps(one.id)
    assert overlaps["overlaps"] == [
        {"task_id": two.id, "title": "two", "branch": two.branch, "files": ["README.md"]}
    ]
    assert (await board.services.changes.overlaps(three.id))["overlaps"] == []


async def test_commit_and_merge_over_rest_announce_changes_and_totals_reach_the_board(
    tmp_path,
) -> None:
    from tests.api_client import asgi_client
    from tests.repos.conftest import make_board
    from tests.repos.git_helpers import make_repo

    repo = make_repo(tmp_path / "project", {"README.md": "# demo\n"})
    async with asgi_client(tmp_path) as client:
        services = client.services
        board = await make_board(services, repo)
        task = await board.task("Totals")
        path, task = await board.worktree(task)
        (path / "new.txt").write_text("one\ntwo\n")
        (path / "README.md").write_text("# changed\n")
        stream = services.bus.subscribe()

        def drained() -> list:
            seen = []
            while not stream.queue.empty():
                seen.append(stream.queue.get_nowait())
            return [e for e in seen if e.task_id == task.id]

        try:
            r = await client.get(f"/api/v1/tasks/{task.id}/changes")
            assert (r.json()["additions"], r.json()["deletions"]) == (3, 1)
            updated = [e for e in drained() if e.type == "task.updated"]
            assert [
                (e.data["task"]["additions"], e.data["task"]["deletions"]) for e in updated
            ] == [(3, 1)]
            shown = (await client.get(f"/api/v1/tasks/{task.id}")).json()
            assert (shown["additions"], shown["deletions"]) == (3, 1)
            listed = (await client.get(f"/api/v1/tasks?workspace_id={board.workspace_id}")).json()
            assert [(t["additions"], t["deletions"]) for t in listed["tasks"]] == [(3, 1)]
            page = await client.get(
                f"/?workspace={board.workspace_id}&workflow={board.workflow_id}"
            )
            assert "+3 \u22121" in page.text
            assert "+3 \u22121" in (await client.get(f"/tasks/{task.id}")).text

            r = await client.post(f"/api/v1/tasks/{task.id}/commit", json={"message": "work"})
            assert r.status_code == 200, r.text
            after_commit = [e for e in drained() if e.type == "task.changes_updated"]
            assert len(after_commit) == 1  # the same files, now committed: announced anyway
            assert after_commit[0].data["changes"]["additions"] == 3

            r = await client.post(f"/api/v1/tasks/{task.id}/merge", json={})
            assert r.status_code == 200, r.text
            seen = drained()
            after_merge = [e for e in seen if e.type == "task.changes_updated"]
            assert len(after_merge) == 1 and after_merge[0].data["changes"]["files"] == []
            totals = [e.data["task"]["additions"] for e in seen if e.type == "task.updated"]
            assert totals == [0]  # main has it all now
        finally:
            stream.close()


async def test_counts_from_the_patch_equal_git_numstat(board: RepoBoard) -> None:
    """+/- come from the patch text (one git pass): held to `git diff --numstat` on content
    that looks like diff headers, a rename with edits, a binary, no final newline, CRLF."""
    tricky = "--- a/x\n+++ b/y\n@@ -1 +1 @@\n-- minus\n++ plus\n\\ not a note\nend"
    git(board.repo, "checkout", "-q", "-b", "side")
    (board.repo / "tricky.txt").write_text("keep\n" + tricky + "\n")
    (board.repo / "moved.txt").write_text("".join(f"line {i}\n" for i in range(30)))
    commit_all(board.repo, "more files")
    git(board.repo, "checkout", "-q", "main")
    git(board.repo, "merge", "-q", "--ff-only", "side")
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "tricky.txt").write_text("--- a/x\n" + tricky.replace("plus", "PLUS") + "\n++ more")
    git(path, "mv", "moved.txt", "renamed.txt")
    (path / "renamed.txt").write_text("".join(f"line {i}\n" for i in range(28)) + "changed\n")
    (path / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (path / "blob.bin").write_bytes(bytes(range(256)))
    (path / "src/app.py").write_text("")  # every line deleted
    changes = await board.services.changes.changes(task.id)
    git(path, "add", "-A")
    numstat = git(path, "diff", "--cached", "--find-renames", "--numstat", changes["merge_base"])
    expected = {}
    for line in numstat.splitlines():
        added, deleted, name = line.split("\t")
        name = name.split(" => ")[-1].rstrip("}") if "=>" in name else name
        expected[name] = (0, 0, True) if added == "-" else (int(added), int(deleted), False)
    got = {f["path"]: (f["additions"], f["deletions"], f["binary"]) for f in changes["files"]}
    assert got == expected
    assert got["tricky.txt"][:2] != (0, 0) and got["blob.bin"][2] is True
    assert _status(changes, "renamed.txt") == ("renamed", "moved.txt")


def _status(changes: dict, path: str) -> tuple[str, str | None]:
    found = next(f for f in changes["files"] if f["path"] == path)
    return found["status"], found["old_path"]
