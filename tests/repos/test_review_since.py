""" "Changes since my last review" (CONTRACT §10 `?since=last_review`): marking a file
reviewed or sending review comments snapshots the worktree (a commit kept by a ref under
refs/kandev/reviews/, its id in task_review_snapshots); the changes since then are the
worktree against that snapshot. Real git repositories, both databases."""

from __future__ import annotations

import pytest

from kandev.auth.identity import Identity, acting_as
from kandev.db.tables import task_review_snapshots
from kandev.errors import Conflict, ValidationFailed
from kandev.repos import repository_sql
from kandev.repos.changes import SINCE_LAST_REVIEW
from kandev.repos.git import REVIEW_REF_PREFIX
from tests.repos.conftest import RepoBoard
from tests.repos.git_helpers import commit_all, git


def _files(answer: dict) -> dict[str, dict]:
    return {f["path"]: f for f in answer["files"]}


def _review_refs(board: RepoBoard) -> list[str]:
    return git(board.repo, "for-each-ref", "--format=%(refname)", REVIEW_REF_PREFIX).split()


async def test_since_last_review_is_what_changed_after_the_review(any_board: RepoBoard) -> None:
    board, changes = any_board, any_board.services.changes
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "src/app.py").write_text("x = 2\n")
    (path / "notes.txt").write_text("first\n")

    # No review yet: all the changes, and it says so.
    before = await changes.changes(task.id, SINCE_LAST_REVIEW)
    assert before["since"] == SINCE_LAST_REVIEW and before["last_review"] is None
    assert set(_files(before)) == {"src/app.py", "notes.txt"}

    await changes.mark_reviewed(task.id, "src/app.py", True)
    async with board.services.db.read() as conn:
        found = await repository_sql.review_snapshot(conn, task.id, "")
    assert found is not None
    snapshot, _ = found
    refs = _review_refs(board)
    assert len(refs) == 1 and refs[0].startswith(f"{REVIEW_REF_PREFIX}/{task.id}/")
    assert git(board.repo, "rev-parse", refs[0]) == snapshot
    # The snapshot holds the worktree as reviewed, untracked file included.
    assert git(board.repo, "show", f"{snapshot}:notes.txt") == "first"
    assert git(path, "status", "--porcelain", "--", "notes.txt") == "?? notes.txt"  # index as was

    quiet = await changes.changes(task.id, SINCE_LAST_REVIEW)
    assert quiet["files"] == [] and (quiet["additions"], quiet["deletions"]) == (0, 0)
    assert quiet["last_review"]["commit"] == snapshot

    # After the review: a line more in notes.txt, a new untracked file, a commit on the branch.
    (path / "notes.txt").write_text("first\nsecond\n")
    (path / "later.txt").write_text("later\n")
    (path / "README.md").write_text("# demo\nmore\n")
    commit_all(path, "README on the branch")
    since = await changes.changes(task.id, SINCE_LAST_REVIEW)
    by_path = _files(since)
    assert set(by_path) == {"notes.txt", "later.txt", "README.md"}
    assert (by_path["notes.txt"]["additions"], by_path["notes.txt"]["deletions"]) == (1, 0)
    notes = by_path["notes.txt"]["diff"]
    assert "+second" in notes and "+first" not in notes
    assert by_path["later.txt"]["status"] == "added"
    assert (since["additions"], since["deletions"]) == (3, 0)

    # The whole changes are unchanged by it, and the task row keeps their totals.
    full = await changes.changes(task.id)
    assert "since" not in full
    assert set(_files(full)) == {"src/app.py", "notes.txt", "later.txt", "README.md"}
    await changes.changes(task.id, SINCE_LAST_REVIEW)
    stored = await board.services.tasks.get_task(task.id)
    assert (stored.additions, stored.deletions) == (full["additions"], full["deletions"])

    # A file changed back after the review shows as changed since, and cannot be marked.
    (path / "src/app.py").write_text("x = 1\n")
    panel = await changes.review_panel(task.id, SINCE_LAST_REVIEW)
    shown = _files(panel)
    assert shown["src/app.py"]["markable"] is False
    assert shown["notes.txt"]["markable"] is True
    assert panel["last_review"]["commit"] == snapshot
    all_panel = await changes.review_panel(task.id)
    assert all_panel["since"] is None and "src/app.py" not in _files(all_panel)

    # Deleting the task removes the snapshot row and its ref.
    await board.services.tasks.delete_task(task.id)
    async with board.services.db.read() as conn:
        assert await repository_sql.review_snapshot(conn, task.id, "") is None
        assert (await conn.execute(task_review_snapshots.select())).first() is None
    assert _review_refs(board) == []


async def test_each_reviewer_has_their_own_last_review(any_board: RepoBoard) -> None:
    board, changes = any_board, any_board.services.changes
    task = await board.task()
    path, task = await board.worktree(task)
    ann = Identity(user_id="ann", synthetic=True)
    bob = Identity(user_id="bob", synthetic=True)
    (path / "a.txt").write_text("a\n")
    with acting_as(ann):
        await changes.mark_reviewed(task.id, "a.txt", True)
    (path / "b.txt").write_text("b\n")
    with acting_as(bob):
        _, repository = await board.services.repositories.task_repository(task.id)
        await changes.record_review(task, repository)  # what sending comments does
    (path / "c.txt").write_text("c\n")
    with acting_as(ann):
        assert set(_files(await changes.changes(task.id, SINCE_LAST_REVIEW))) == {"b.txt", "c.txt"}
    with acting_as(bob):
        assert set(_files(await changes.changes(task.id, SINCE_LAST_REVIEW))) == {"c.txt"}
    assert len(_review_refs(board)) == 2
    # Clearing a mark is not a review, nor is a refused one: ann's snapshot stays.
    with acting_as(ann):
        await changes.mark_reviewed(task.id, "a.txt", False)
        with pytest.raises(Conflict):
            await changes.mark_reviewed(task.id, "README.md", True)  # not changed
        assert set(_files(await changes.changes(task.id, SINCE_LAST_REVIEW))) == {"b.txt", "c.txt"}


async def test_a_bad_since_is_refused_naming_since(any_board: RepoBoard) -> None:
    task = await any_board.task()
    with pytest.raises(ValidationFailed) as raised:
        await any_board.services.changes.changes(task.id, "yesterday")
    assert raised.value.field == "since"


async def test_a_snapshot_gone_from_the_repository_is_a_clear_conflict(board: RepoBoard) -> None:
    changes = board.services.changes
    task = await board.task()
    path, task = await board.worktree(task)
    (path / "a.txt").write_text("a\n")
    await changes.mark_reviewed(task.id, "a.txt", True)
    for ref in _review_refs(board):
        git(board.repo, "update-ref", "-d", ref)
    git(board.repo, "gc", "-q", "--prune=now")
    with pytest.raises(Conflict) as raised:
        await changes.changes(task.id, SINCE_LAST_REVIEW)
    assert "last review" in raised.value.message


async def test_since_over_rest(tmp_path) -> None:
    from tests.api_client import asgi_client
    from tests.repos.conftest import make_board
    from tests.repos.git_helpers import make_repo

    repo = make_repo(tmp_path / "project", {"README.md": "# demo\n"})
    async with asgi_client(tmp_path) as client:
        board = await make_board(client.services, repo)
        task = await board.task("Since")
        path, task = await board.worktree(task)
        (path / "a.txt").write_text("a\n")
        url = f"/api/v1/tasks/{task.id}/changes"
        r = await client.get(url, params={"since": "last_review"})
        assert r.status_code == 200, r.text
        assert r.json()["last_review"] is None and [f["path"] for f in r.json()["files"]] == [
            "a.txt"
        ]
        r = await client.get(url, params={"since": "bogus"})
        assert r.status_code == 400, r.text
        assert "since" in r.text
        form = {"path": "a.txt", "reviewed": "1", "since": "last_review"}
        r = await client.post(
            f"/tasks/{task.id}/reviewed-form", data=form, headers={"HX-Request": "true"}
        )
        assert r.status_code == 200, r.text
        assert 'data-since="last_review"' in r.text
        assert "Nothing changed since your last review." in r.text
        (path / "b.txt").write_text("b\n")
        r = await client.get(url, params={"since": "last_review"})
        body = r.json()
        assert [f["path"] for f in body["files"]] == ["b.txt"]
        assert body["last_review"]["reviewed_at"] and body["last_review"]["commit"]
        fragment = await client.get(f"/tasks/{task.id}/changes-fragment?since=last_review")
        assert fragment.status_code == 200
        assert 'data-path="b.txt"' in fragment.text and 'data-path="a.txt"' not in fragment.text
        assert (await client.get(f"/tasks/{task.id}/changes-fragment?since=x")).status_code == 400
