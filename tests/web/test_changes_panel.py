"""The task page's Changes panel without a browser: the fragment route on a real git
repository (file list, counts, line numbers, highlighting, escaping, binary files), the
reviewed-form and its stale marks. In-process (ASGI), on SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup

from kandev.sessions import session_repository
from kandev.web.diff_view import diff_rows, file_views
from tests.api_client import asgi_client
from tests.repos.git_helpers import make_repo
from tests.web.conftest import board_on_repository

HX = {"HX-Request": "true"}
MINUS = "\u2212"  # the panel's minus sign


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(tmp_path) as c:
        yield c


async def _task_with_worktree(client: httpx.AsyncClient, repo: Path) -> tuple[dict, Path]:
    on = await board_on_repository(client, repo)
    task = (await client.post("/api/v1/tasks", json={**on, "title": "T"})).json()
    created = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()
    services = client.services  # type: ignore[attr-defined]
    async with services.db.read() as conn:
        session = await session_repository.get_session(conn, created["id"])
    model = await services.tasks.get_task(task["id"])
    path = await services.worktrees.ensure_worktree(model, session)
    return task, path


def _doc(response: httpx.Response) -> BeautifulSoup:
    assert response.status_code == 200, response.text
    return BeautifulSoup(response.text, "html.parser")


async def test_the_fragment_lists_files_and_renders_numbered_highlighted_escaped_diffs(
    client, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project", {"app.py": "x = 1\ny = 2\n", "logo.bin": "a"})
    task, path = await _task_with_worktree(client, repo)
    (path / "app.py").write_text('x = 1\ny = "<script>alert(1)</script>"\n')
    (path / "logo.bin").write_bytes(b"\x00\x01\x02binary")
    (path / "notes.md").write_text("# hi\n")
    page = await client.get(f"/tasks/{task['id']}")
    assert _doc(page).select_one("#changes-panel")["data-task-id"] == task["id"]

    doc = _doc(await client.get(f"/tasks/{task['id']}/changes-fragment"))
    assert doc.select_one("html") is None  # a fragment, not a page
    items = {
        li["data-path"]: li.select_one(".counts").get_text(" ", strip=True)
        for li in doc.select(".changes-files li")
    }
    assert items == {
        "app.py": f"+1 {MINUS}1",
        "logo.bin": f"+0 {MINUS}0",
        "notes.md": f"+1 {MINUS}0",
    }
    assert f"3 files · +2 {MINUS}1" in doc.select_one("#changes-totals").get_text(
        " ", strip=True
    ).replace("  ", " ")
    app = doc.select_one('.diff-file[data-path="app.py"]')
    added = app.select_one("tr.diff-add")
    assert added.select_one(".ln-new").get_text(strip=True) == "2"
    assert added.select_one(".ln-old").get_text(strip=True) == ""
    assert app.select_one("tr.diff-del .ln-old").get_text(strip=True) == "2"
    context = app.select_one("tr.diff-ctx")
    assert [td.get_text(strip=True) for td in context.select(".ln")] == ["1", "1"]
    assert added.select_one(".code .s2") is not None  # a highlighted string token
    assert "<script>" not in str(added) and "&lt;script&gt;" in str(added)
    assert "alert(1)" in added.get_text()
    binary = doc.select_one('.diff-file[data-path="logo.bin"]')
    assert "Binary file" in binary.get_text() and binary.select_one("table") is None


async def test_the_reviewed_form_marks_a_file_and_the_mark_goes_stale(
    client, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "project", {"app.py": "x = 1\n"})
    task, path = await _task_with_worktree(client, repo)
    (path / "app.py").write_text("x = 22\n")
    url = f"/tasks/{task['id']}/reviewed-form"
    doc = _doc(await client.post(url, data={"path": "app.py", "reviewed": "1"}, headers=HX))
    assert doc.select_one('.diff-file[data-path="app.py"]')["data-reviewed"] == "reviewed"
    doc = _doc(await client.get(f"/tasks/{task['id']}/changes-fragment"))
    assert doc.select_one(".changes-files li")["data-reviewed"] == "reviewed"
    (path / "app.py").write_text("x = 333\n")
    doc = _doc(await client.get(f"/tasks/{task['id']}/changes-fragment"))
    assert doc.select_one(".diff-file")["data-reviewed"] == "stale"
    assert "changed since review" in doc.select_one(".diff-file").get_text()
    # Without JavaScript: a redirect back to the task page.
    r = await client.post(url, data={"path": "app.py", "reviewed": "0"})
    assert r.status_code == 303 and r.headers["location"].startswith(f"/tasks/{task['id']}")
    doc = _doc(await client.get(f"/tasks/{task['id']}/changes-fragment"))
    assert doc.select_one(".diff-file")["data-reviewed"] == ""
    # A file that did not change cannot be marked: the error page's status.
    r = await client.post(url, data={"path": "nope.txt", "reviewed": "1"}, headers=HX)
    assert r.status_code == 409


def test_diff_rows_number_both_sides_and_keep_no_newline_notes() -> None:
    diff = (
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n"
        "@@ -3,2 +3,3 @@ ctx\n keep\n-old\n+new\n+more\n\\ No newline at end of file\n"
    )
    rows = [(r.kind, r.old, r.new, str(r.code)) for r in diff_rows("a.txt", diff)]
    assert rows == [
        ("hunk", None, None, "@@ -3,2 +3,3 @@ ctx"),
        ("ctx", 3, 3, "keep"),
        ("del", 4, None, "old"),
        ("add", None, 4, "new"),
        ("add", None, 5, "more"),
        ("note", None, None, "No newline at end of file"),
    ]


def test_the_panel_template_reads_exactly_the_documented_fields() -> None:
    import dataclasses

    from kandev.web import pages, render
    from tests.web.test_pages import Recorder

    diff = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    changes = {
        "files": [
            {
                "path": "a.py",
                "old_path": None,
                "status": "modified",
                "additions": 1,
                "deletions": 1,
                "binary": False,
                "truncated": False,
                "diff": diff,
                "fingerprint": "f",
                "reviewed": "stale",
            }
        ]
    }
    page = pages.ChangesFragment(
        task_id="t",
        branch="kandev/t",
        base_branch="main",
        additions=1,
        deletions=1,
        truncated=True,
        reviewed_files=0,
        files=file_views(changes),
        since="last_review",
        last_review={"commit": "c0ffee", "reviewed_at": "2026-12-01T10:00:00+00:00"},
    )
    recorder = Recorder(page)
    context = {
        "request": None,
        "identity": None,
        "auth_mode": "disabled",
        "nav": "",
        "page": recorder,
    }
    html = render.env.get_template("partials/_changes.html").render(context)
    assert recorder.read == {f.name for f in dataclasses.fields(pages.ChangesFragment)}
    assert "changed since review" in html and "too large to show in full" in html
    assert "since your last review" in html and "2026-12-01 10:00 UTC" in html
