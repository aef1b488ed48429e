"""The task page's Changes panel in a real browser, on a real git repository with the
scripted ACP agent in the task's worktree: files and counts, numbered highlighted diffs,
line comments sent as one review prompt, reviewed marks that persist and go stale, live
refresh on `task.changes_updated` and the header's +A -D on `task.updated`."""

from __future__ import annotations

import re
import time
from pathlib import Path

from playwright.sync_api import expect

from tests.repos.git_helpers import checkout_state, commit_all, git, make_repo
from tests.web.conftest import created
from tests.web.test_task_browser import messages, open_task, start

MINUS = "\u2212"


def _idle(rest, session_id: str) -> None:
    deadline = time.monotonic() + 30  # bounded: the scripted agent starts in well under that
    while time.monotonic() < deadline:
        if rest.get(f"/api/v1/sessions/{session_id}").json()["state"] == "IDLE":
            return
        time.sleep(0.1)  # noqa: sleep-ok (polls a condition, with a deadline)
    raise AssertionError("the session never became IDLE")


def _task_on_repo(board, tmp_path: Path) -> tuple[dict, dict, Path]:
    repo = make_repo(tmp_path / "project", {"app.py": "def total(items):\n    return sum(items)\n"})
    repository = created(
        board.rest.post(
            f"/api/v1/workspaces/{board.workspace['id']}/repositories", json={"path": str(repo)}
        )
    )
    task = board.task("Review me", repository_id=repository["id"])
    session = start(board, task, "echo ready")
    _idle(board.rest, session["id"])
    worktree = Path(board.rest.get(f"/api/v1/tasks/{task['id']}").json()["worktree_path"])
    return task, session, worktree


def test_the_changes_panel_diffs_comments_review_and_reviewed_marks(
    page, board, screenshot, tmp_path: Path
) -> None:
    task, session, worktree = _task_on_repo(board, tmp_path)
    (worktree / "app.py").write_text(
        'def total(items):\n    """Sum them."""\n    return round(sum(items), 2)\n'
    )
    (worktree / "README.md").write_text("# Cart\n")
    open_task(page, task)
    panel = page.locator("#changes-panel")
    expect(panel).to_have_attribute("data-loaded", "1")
    files = panel.locator(".changes-files li")
    expect(files).to_have_count(2)
    expect(panel.locator('.changes-files li[data-path="app.py"] .counts')).to_have_text(
        f"+2 {MINUS}1"
    )
    expect(panel.locator('.changes-files li[data-path="README.md"] .counts')).to_have_text(
        f"+1 {MINUS}0"
    )
    expect(panel.locator("#changes-totals")).to_contain_text(f"+3 {MINUS}1")
    app = panel.locator('.diff-file[data-path="app.py"]')
    added = app.locator("tr.diff-add").first
    expect(added.locator(".ln-new")).to_have_text("2")
    expect(added.locator(".code .sd, .code .s2").first).to_be_visible()  # highlighted string
    expect(app.locator("tr.diff-ctx").first.locator(".ln")).to_have_text(["1", "1"])
    expect(app.locator("tr.diff-add .code .k").first).to_have_text("return")

    # A comment on line 3 of app.py, then Send review: one prompt in the conversation.
    app.locator('tr.diff-add[data-line="3"] .ln-new button').click()
    box = page.get_by_label("Comment on app.py line 3")
    box.fill("Round after summing, please.")
    app.get_by_role("button", name="Add comment").click()
    expect(app.locator("tr.diff-comment .comment-text")).to_have_text(
        "Round after summing, please."
    )
    expect(panel.locator("#review-count")).to_have_text("1 comment")
    panel.scroll_into_view_if_needed()
    # The panel alone: the toggle, the commit and merge forms, the files, the comment.
    box = panel.bounding_box()
    assert box is not None
    scroll_x, scroll_y = page.evaluate("[window.scrollX, window.scrollY]")
    clip = {**box, "x": box["x"] + scroll_x, "y": box["y"] + scroll_y}  # page coordinates
    screenshot(page, "task-changes.png", clip=clip, full_page=True)
    panel.get_by_role("button", name="Send review").click()
    expect(panel.locator("#review-count")).to_have_text("No comments")
    user = page.locator("#conversation .msg-user").last
    expect(user).to_contain_text("Review comments on your changes:")
    expect(user).to_contain_text("app.py:3")
    prompts = [
        m["content"] for m in messages(board.rest, session["id"]) if m["author_type"] == "user"
    ]
    assert (
        prompts[-1]
        == "Review comments on your changes:\n\n1. app.py:3\n   Round after summing, please."
    )

    # Reviewed: persists across a reload; stale after the file changes (live, after a turn).
    app.get_by_role("button", name="Mark reviewed").click()
    expect(app).to_have_attribute("data-reviewed", "reviewed")
    expect(panel.locator("#changes-totals")).to_contain_text("1/2 reviewed")
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    app = page.locator('#changes-panel .diff-file[data-path="app.py"]')
    expect(app).to_have_attribute("data-reviewed", "reviewed")
    expect(app.get_by_role("button", name="✓ Reviewed")).to_be_visible()
    (worktree / "app.py").write_text("def total(items):\n    return sum(items) or 0\n")
    box = page.get_by_label("Message the agent")
    box.fill("write notes.txt from hello")
    box.press("Enter")  # the turn ends: task.changes_updated, the panel refreshes itself
    expect(page.locator('#changes-panel .changes-files li[data-path="notes.txt"]')).to_be_visible()
    app = page.locator('#changes-panel .diff-file[data-path="app.py"]')
    expect(app).to_have_attribute("data-reviewed", "stale")
    expect(app).to_contain_text("changed since review")
    expect(page.locator("#task-diff")).to_have_text(f"+3 {MINUS}1")  # task.updated, live
    page.reload()
    expect(page.locator('#changes-panel .diff-file[data-path="app.py"]')).to_have_attribute(
        "data-reviewed", "stale"
    )


def test_since_my_last_review_shows_only_what_changed_after_the_review(
    page, board, tmp_path: Path
) -> None:
    task, _session, worktree = _task_on_repo(board, tmp_path)
    (worktree / "app.py").write_text("def total(items):\n    return round(sum(items), 2)\n")
    (worktree / "README.md").write_text("# Cart\n")
    open_task(page, task)
    panel = page.locator("#changes-panel")
    expect(panel).to_have_attribute("data-loaded", "1")
    files = panel.locator(".changes-files li")
    expect(files).to_have_count(2)

    # Before any review the toggle shows every change, and says why.
    panel.get_by_role("button", name="Since my last review").click()
    panel = page.locator('#changes-panel[data-since="last_review"]')
    expect(panel.locator("#changes-since-note")).to_have_text(
        "You have not reviewed this task yet: all its changes are shown."
    )
    expect(panel.get_by_role("button", name="Since my last review")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(panel.locator(".changes-files li")).to_have_count(2)

    # Marking a file reviewed is a review: nothing has changed since.
    panel.locator('.diff-file[data-path="app.py"]').get_by_role(
        "button", name="Mark reviewed"
    ).click()
    expect(panel.locator(".empty-changes")).to_have_text("Nothing changed since your last review.")
    expect(panel.locator("#changes-since-note")).to_contain_text("since your last review")

    # After the review: README.md edited, a new file, and the agent's turn writes notes.txt.
    (worktree / "README.md").write_text("# Cart\n\nTotals are rounded.\n")
    (worktree / "later.txt").write_text("later\n")
    box = page.get_by_label("Message the agent")
    box.fill("write notes.txt from hello")
    box.press("Enter")  # the turn ends: task.changes_updated, the panel refreshes in its view
    expect(panel.locator('.changes-files li[data-path="notes.txt"]')).to_be_visible()
    expect(panel.locator(".changes-files li")).to_have_count(3)
    expect(panel.locator('.changes-files li[data-path="app.py"]')).to_have_count(0)
    readme = panel.locator('.diff-file[data-path="README.md"]')
    expect(readme.locator("tr.diff-add")).to_have_count(2)  # the blank line and the sentence
    expect(readme.locator("tr.diff-ctx .code")).to_have_text(["# Cart"])  # reviewed already
    since = board.rest.get(
        f"/api/v1/tasks/{task['id']}/changes", params={"since": "last_review"}
    ).json()
    assert sorted(f["path"] for f in since["files"]) == ["README.md", "later.txt", "notes.txt"]

    # Back to all changes: app.py (reviewed) is there again, with the rest.
    panel.get_by_role("button", name="All changes").click()
    panel = page.locator('#changes-panel[data-since=""]')
    expect(panel.locator(".changes-files li")).to_have_count(4)
    expect(panel.locator('.diff-file[data-path="app.py"]')).to_have_attribute(
        "data-reviewed", "reviewed"
    )
    expect(panel.locator("#changes-since-note")).to_have_count(0)


def test_commit_and_merge_from_the_panel_clean_and_conflicting(page, board, tmp_path: Path) -> None:
    task, _session, worktree = _task_on_repo(board, tmp_path)
    repo = tmp_path / "project"
    (worktree / "app.py").write_text("def total(items):\n    return round(sum(items), 2)\n")
    open_task(page, task)
    panel = page.locator("#changes-panel")
    expect(panel).to_have_attribute("data-loaded", "1")
    expect(panel.locator(".changes-files li")).to_have_count(1)

    # Commit with a message: the worktree's change lands on the task branch.
    panel.get_by_label("Commit message").fill("Round the total")
    panel.get_by_role("button", name="Commit", exact=True).click()
    notice = page.locator("#changes-panel #changes-notice")
    expect(notice).to_contain_text("Committed ")
    expect(notice).to_contain_text("(1 file)")
    assert git(worktree, "log", "-1", "--format=%s") == "Round the total"
    assert git(worktree, "status", "--porcelain") == ""
    head = git(worktree, "rev-parse", "HEAD")
    assert page.locator("#changes-notice").inner_text().split()[1] == head[:7]

    # Merge, clean: main (checked out in the repository) gets it, working tree too.
    page.locator("#changes-panel").get_by_label("Merge into main").select_option("merge")
    page.locator("#changes-panel").get_by_role("button", name="Merge", exact=True).click()
    expect(page.locator("#changes-panel #changes-notice")).to_contain_text("Merged into main as ")
    assert (repo / "app.py").read_text() == worktree.joinpath("app.py").read_text()
    branch = board.rest.get(f"/api/v1/tasks/{task['id']}").json()["branch"]
    assert git(repo, "log", "-1", "--format=%s") == f"Merge branch '{branch}' into main"
    expect(page.locator("#changes-panel .empty-changes")).to_have_text("No changes yet.")

    # Merge, conflicting: main and the branch both change app.py; 409, the paths, untouched.
    (repo / "app.py").write_text("def total(items):\n    return sum(items) or 0\n")
    commit_all(repo, "main changes app.py")
    (worktree / "app.py").write_text("def total(items):\n    return float(sum(items))\n")
    commit_all(worktree, "the task changes app.py")
    before = checkout_state(repo)
    page.reload()
    expect(page.locator("#changes-panel")).to_have_attribute("data-loaded", "1")
    with page.expect_response(lambda r: r.url.endswith("/merge-form")) as answered:
        page.locator("#changes-panel").get_by_role("button", name="Merge", exact=True).click()
    assert answered.value.status == 409
    error = page.locator("#changes-panel #changes-error")
    expect(error).to_contain_text("conflicts in app.py")
    expect(error).to_contain_text("nothing was changed")
    assert checkout_state(repo) == before


def _setup_note(page, board, tmp_path: Path, name: str, **repository) -> tuple:
    """A task on a new repository with `repository`'s setup; its first session started and its
    page open. Returns the conversation's setup messages (copy_files notes, then the script)."""
    repo = make_repo(tmp_path / name)
    registered = created(
        board.rest.post(
            f"/api/v1/workspaces/{board.workspace['id']}/repositories",
            json={"path": str(repo), "name": name, **repository},
        )
    )
    task = board.task(f"Setup {name}", repository_id=registered["id"])
    start(board, task, "echo ready")
    open_task(page, task)
    return page.locator('#conversation [data-type="setup_script"]')


def _background(locator) -> str:
    return locator.evaluate("el => getComputedStyle(el).backgroundColor")


def test_a_successful_setup_script_is_a_note_and_a_failing_one_an_error(
    page, board, tmp_path: Path, screenshot
) -> None:
    notes = _setup_note(
        page, board, tmp_path, "broken", setup_script="echo half way\nexit 3", copy_files=[".env"]
    )
    expect(notes).to_have_count(2)
    warning, failed = notes.nth(0), notes.nth(1)
    expect(warning).to_have_attribute("data-status", "warning")
    expect(warning).to_have_text("copy_files: .env: not found")
    expect(failed).to_have_attribute("data-status", "failed")
    expect(failed).to_have_text("setup script failed (exit 3)\nhalf way")
    expect(failed).to_have_class(re.compile(r"\bmsg-error\b"))
    error_bg, warning_bg = _background(failed), _background(warning)
    error_color = failed.evaluate("el => getComputedStyle(el).color")
    assert warning_bg != error_bg  # a warning is not drawn as the failure

    notes = _setup_note(page, board, tmp_path, "fine", setup_script="echo ready in 1s")
    ok = notes.first
    expect(ok).to_have_attribute("data-status", "ok")
    expect(ok).to_have_text("setup script finished\nready in 1s")
    expect(ok).not_to_have_class(re.compile(r"\bmsg-error\b"))
    assert _background(ok) not in (error_bg, warning_bg)
    assert ok.evaluate("el => getComputedStyle(el).color") != error_color
    screenshot(page, "setup-ok.png")


def test_the_change_stats_chip_shows_only_while_the_worktree_has_changes(
    context, page, board, tmp_path: Path
) -> None:
    """No "+0 -0" on a card or in the task header; the chip comes with the first change and
    goes again when the changes go back to none, live (`task.updated`)."""
    task, _session, worktree = _task_on_repo(board, tmp_path)
    page.goto(board.url)
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    card = page.locator(f"#task-{task['id']}")
    expect(card.locator(".chip-state")).to_have_text("Agent done")
    expect(card.locator("[data-diff]")).to_have_count(0)
    task_page = context.new_page()
    open_task(task_page, task)
    expect(task_page.locator("#changes-panel")).to_have_attribute("data-loaded", "1")
    expect(task_page.locator("#task-diff")).to_have_count(0)

    def totals() -> tuple[int, int]:  # reading the changes stores the totals: task.updated
        r = board.rest.get(f"/api/v1/tasks/{task['id']}/changes")
        assert r.status_code == 200, r.text
        return r.json()["additions"], r.json()["deletions"]

    (worktree / "notes.txt").write_text("one\ntwo\n")
    assert totals() == (2, 0)
    expect(card.locator("[data-diff]")).to_have_text(f"+2 {MINUS}0")
    expect(task_page.locator("#task-diff")).to_have_text(f"+2 {MINUS}0")
    (worktree / "notes.txt").unlink()
    assert totals() == (0, 0)
    expect(card.locator("[data-diff]")).to_have_count(0)
    expect(task_page.locator("#task-diff")).to_have_count(0)
