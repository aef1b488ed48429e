"""Board and task pages without a browser: structure (parsed HTML), fragments, forms,
errors, assets and auth. In-process (ASGI), on SQLite."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup

from kandev.web import pages, render
from kandev.web.assets import VENDOR_FILES, node_modules_dir
from tests.api_client import asgi_client

PASSWORD = "s3cret-password"


def soup(response: httpx.Response) -> BeautifulSoup:
    assert response.headers["content-type"].startswith("text/html"), response.headers
    return BeautifulSoup(response.text, "html.parser")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(tmp_path) as c:
        yield c


async def make_board(client: httpx.AsyncClient, name: str = "Acme") -> tuple[dict, dict]:
    ws = (await client.post("/api/v1/workspaces", json={"name": name})).json()
    wf = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "Dev"})
    ).json()
    return ws, wf


async def make_task(client: httpx.AsyncClient, ws: dict, wf: dict, title: str, **extra) -> dict:
    r = await client.post(
        "/api/v1/tasks",
        json={"workspace_id": ws["id"], "workflow_id": wf["id"], "title": title, **extra},
    )
    assert r.status_code == 201, r.text
    return r.json()


def no_leaks(html: str) -> None:
    for leak in ("None", "{{", "}}", "{%", "undefined"):
        assert leak not in BeautifulSoup(html, "html.parser").get_text(), leak


async def test_empty_board_offers_to_create_a_workspace(client) -> None:
    r = await client.get("/")
    assert r.status_code == 200
    doc = soup(r)
    assert doc.html["lang"] == "en"
    form = doc.select_one("#board-empty form")
    assert form["method"] == "post" and form["action"] == "/workspaces/new"
    assert form.select_one("input[name=name]") is not None
    nav = [a.get_text(" ", strip=True).split()[0] for a in doc.select(".topnav a")]
    assert nav == ["Board", "Inbox", "Settings"]


async def test_board_columns_cards_and_forms(client) -> None:
    ws, wf = await make_board(client)
    steps = {s["name"]: s for s in wf["steps"]}
    await make_task(client, ws, wf, "B", description="second <b>not bold</b>")
    await make_task(client, ws, wf, "A", workflow_step_id=steps["Review"]["id"])
    r = await client.get("/", params={"workspace": ws["id"], "workflow": wf["id"]})
    assert r.status_code == 200
    doc = soup(r)
    no_leaks(r.text)
    assert [h.get_text() for h in doc.select(".column h2")] == [
        "Backlog",
        "In Progress",
        "Review",
        "Done",
    ]
    review = doc.select_one(f'.cards[data-step-id="{steps["Review"]["id"]}"]')
    assert [c.get_text() for c in review.select(".card-title")] == ["A"]
    assert doc.select_one(".card-desc").get_text() == "second <b>not bold</b>"  # escaped
    new_task = doc.select_one("#new-task-form")
    assert new_task["action"] == "/tasks/new" and new_task["method"] == "post"
    assert {i["name"] for i in new_task.select("[name]")} == {
        "workspace_id",
        "workflow_id",
        "title",
        "description",
        "workflow_step_id",
        "agent_profile_id",
        "prompt",
        "open",
    }
    assert "demo" in [o.get_text() for o in new_task.select("select[name=agent_profile_id] option")]
    assert "kandev_board" in r.headers.get("set-cookie", "")


async def test_board_remembers_the_last_workspace_in_a_cookie(client) -> None:
    await make_board(client, "First")
    ws2, wf2 = await make_board(client, "Second")
    await make_task(client, ws2, wf2, "In the second")
    await client.get("/", params={"workspace": ws2["id"]})
    r = await client.get("/")  # the cookie brings the second board back
    doc = soup(r)
    assert doc.select_one("select[name=workspace] option[selected]").get_text() == "Second"
    assert [c.get_text() for c in doc.select(".card-title")] == ["In the second"]


async def test_card_fragment_is_one_card_and_not_a_page(client) -> None:
    ws, wf = await make_board(client)
    task = await make_task(client, ws, wf, "Card")
    r = await client.get(f"/tasks/{task['id']}/card")
    assert r.status_code == 200
    doc = soup(r)
    assert doc.find("html") is None
    cards = doc.select("[data-task-id]")
    assert len(cards) == 1 and cards[0]["id"] == f"task-{task['id']}"
    assert cards[0]["data-step-id"] == task["workflow_step_id"]


async def test_forms_create_workspace_and_task_with_a_first_session(client) -> None:
    r = await client.post("/workspaces/new", data={"name": "Made by form"})
    assert r.status_code == 303
    ws = (await client.get("/api/v1/workspaces")).json()["workspaces"][0]
    wf = (await client.get("/api/v1/workflows", params={"workspace_id": ws["id"]})).json()
    assert [s["name"] for s in wf["workflows"][0]["steps"]] == [
        "Backlog",
        "In Progress",
        "Review",
        "Done",
    ]
    r = await client.post(
        "/tasks/new",
        data={
            "workspace_id": ws["id"],
            "workflow_id": wf["workflows"][0]["id"],
            "title": "  From the form ",
            "agent_profile_id": "",
            "open": "1",
        },
    )
    assert r.status_code == 303 and r.headers["location"].startswith("/tasks/")
    task_id = r.headers["location"].split("/")[-1]
    assert (await client.get(f"/api/v1/tasks/{task_id}")).json()["title"] == "From the form"
    r = await client.post(
        f"/tasks/{task_id}/sessions-form", data={"agent_profile_id": "", "prompt": "hi *you*"}
    )
    assert r.status_code == 303
    page = soup(await client.get(r.headers["location"]))
    assert [m.get_text() for m in page.select("#conversation .msg-user")] == ["hi *you*"]
    composer = page.select_one("#composer")
    session_id = page.select_one("#task-panel")["data-session-id"]
    assert composer["action"] == f"/sessions/{session_id}/prompt-form"


async def test_a_bad_form_field_is_a_400_page_naming_the_field(client) -> None:
    ws, wf = await make_board(client)
    r = await client.post(
        "/tasks/new", data={"workspace_id": ws["id"], "workflow_id": wf["id"], "title": " "}
    )
    assert r.status_code == 400
    # The field is named in a sentence (issue 14: not the API's lower-case "title: …").
    assert (
        "Title: String should have at least 1 character."
        in soup(r).select_one(".empty-state").get_text()
    )


async def test_missing_task_is_a_404_page(client) -> None:
    r = await client.get("/tasks/does-not-exist")
    assert r.status_code == 404
    assert soup(r).select_one("h1").get_text() == "Not found"
    r = await client.get("/tasks/does-not-exist/card", headers={"HX-Request": "true"})
    assert r.status_code == 404 and soup(r).find("html") is None


async def test_task_page_renders_markdown_safely_and_shows_the_stepper(client) -> None:
    ws, wf = await make_board(client)
    task = await make_task(
        client, ws, wf, "MD", description="**bold** <script>alert(1)</script> [x](javascript:1)"
    )
    r = await client.get(f"/tasks/{task['id']}")
    assert r.status_code == 200
    doc = soup(r)
    no_leaks(r.text)
    desc = doc.select_one(".side .md")
    assert desc.select_one("strong").get_text() == "bold"
    assert desc.select_one("script") is None and desc.select('a[href^="javascript"]') == []
    current = doc.select('#stepper [aria-current="step"]')
    assert [li.get_text(strip=True) for li in current] == ["1. Backlog"]
    forms = doc.select("#stepper form")
    assert {f["action"] for f in forms} == {f"/tasks/{task['id']}/move-form"}
    r = await client.post(
        f"/tasks/{task['id']}/move-form",
        data={"workflow_id": wf["id"], "workflow_step_id": wf["steps"][3]["id"]},
    )
    assert r.status_code == 303
    assert (await client.get(f"/api/v1/tasks/{task['id']}")).json()["workflow_step_id"] == (
        wf["steps"][3]["id"]
    )


async def test_task_breadcrumb_links_the_workspace_and_the_workflow_board(client) -> None:
    """The crumbs say where the task lives — workspace / workflow, each a link to that
    board — and not the word "task" (user trial)."""
    ws, _ = await make_board(client, "Acme")
    await make_board(client, "Other")  # the links must pick the task's board, not the last one
    ops = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "Ops"})
    ).json()
    task = await make_task(client, ws, ops, "Rotate the keys")
    r = await client.get(f"/tasks/{task['id']}")
    no_leaks(r.text)
    crumbs = soup(r).select_one('nav.crumbs[aria-label="Breadcrumb"]')
    links = crumbs.select("a")
    assert [(a.get_text(strip=True), a["href"]) for a in links] == [
        (ws["name"], f"/?workspace={ws['id']}"),
        (ops["name"], f"/?workspace={ws['id']}&workflow={ops['id']}"),
    ]
    assert "task" not in crumbs.get_text(" ", strip=True).lower().split()
    for link, workspace, workflow in ((links[0], "Acme", None), (links[1], "Acme", "Ops")):
        board = soup(await client.get(link["href"]))
        assert board.select_one("select[name=workspace] option[selected]").get_text() == workspace
        if workflow:
            chosen = board.select_one("select[name=workflow] option[selected]")
            assert chosen.get_text() == workflow


async def test_static_assets_are_hashed_and_the_vendor_route_is_an_allow_list(client) -> None:
    doc = soup(await client.get("/"))
    css = doc.select_one("link[rel=stylesheet]")["href"]
    assert css.startswith("/static/css/app.css?v=") and "missing" not in css
    r = await client.get(css)
    assert r.status_code == 200 and r.headers["cache-control"].endswith("immutable")
    r = await client.get("/static/css/app.css?v=stale")
    assert r.headers["cache-control"] == "no-cache"
    assert (await client.get("/static/vendor/package.json")).status_code == 404
    assert (await client.get("/static/vendor/..%2F..%2Fpackage.json")).status_code == 404
    htmx = doc.select_one('script[src^="/static/vendor/htmx.min.js"]')["src"]
    if not (node_modules_dir() / VENDOR_FILES["htmx.min.js"]).is_file():
        pytest.skip("node_modules not installed (make installs it)")
    r = await client.get(htmx)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")


async def test_with_auth_on_a_signed_out_page_redirects_to_login(tmp_path: Path) -> None:
    async with asgi_client(tmp_path, auth=True) as client:
        r = await client.post(
            "/api/v1/auth/setup", json={"email": "admin@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        assert (await client.get("/")).status_code == 200  # the cookie signs the page in
        client.cookies.clear()
        r = await client.get("/tasks/abc?session=1")
        assert r.status_code == 303
        assert r.headers["location"] == "/login?next=%2Ftasks%2Fabc%3Fsession%3D1"


async def test_another_users_task_page_is_the_same_404_as_a_missing_one(tmp_path: Path) -> None:
    async with asgi_client(tmp_path, auth=True) as admin:
        await admin.post(
            "/api/v1/auth/setup", json={"email": "admin@example.com", "password": PASSWORD}
        )
        r = await admin.post(
            "/api/v1/users",
            json={"email": "member@example.com", "password": PASSWORD, "role": "member"},
        )
        assert r.status_code == 201, r.text
        ws, wf = await make_board(admin)
        task = await make_task(admin, ws, wf, "Secret title")
        transport = admin._transport
        async with httpx.AsyncClient(transport=transport, base_url=admin.base_url) as member:
            r = await member.post(
                "/api/v1/auth/login", json={"email": "member@example.com", "password": PASSWORD}
            )
            assert r.status_code == 200, r.text
            foreign = await member.get(f"/tasks/{task['id']}")
            missing = await member.get("/tasks/" + "0" * len(task["id"]))
            assert foreign.status_code == missing.status_code == 404
            assert foreign.content == missing.content
            assert "Secret title" not in foreign.text
            board = await member.get("/")
            assert "Secret title" not in board.text and "Acme" not in board.text


# --- the page contexts are documented dataclasses (STYLE E3) ------------------------------


class Recorder:
    """Stands in for a page dataclass and records which fields the template reads."""

    def __init__(self, page: object) -> None:
        self._page = page
        self.read: set[str] = set()

    def __getattr__(self, name: str):
        self.read.add(name)
        return getattr(self._page, name)


async def test_templates_read_exactly_the_documented_page_fields(client, monkeypatch) -> None:
    captured: dict[str, tuple] = {}
    original = render.render

    def capture(request, template, page, **kw):
        captured[template] = (request, page)
        return original(request, template, page, **kw)

    import kandev.web.routes.board as board_routes
    import kandev.web.routes.tasks as task_routes

    monkeypatch.setattr(board_routes, "render", capture)
    monkeypatch.setattr(task_routes, "render", capture)
    ws, wf = await make_board(client)
    task = await make_task(client, ws, wf, "Ctx", description="d")
    await client.post(f"/tasks/{task['id']}/sessions-form", data={"prompt": "hello"})
    await client.get("/")
    await client.get(f"/tasks/{task['id']}")
    await client.get(f"/tasks/{task['id']}/card")
    expected = {
        "board.html": pages.BoardPage,
        "task.html": pages.TaskPage,
        "partials/card.html": pages.CardFragment,
    }
    assert set(captured) == set(expected)
    for template, cls in expected.items():
        request, page = captured[template]
        assert isinstance(page, cls)
        recorder = Recorder(page)
        context = {
            "request": request,
            "identity": None,
            "auth_mode": "disabled",
            "nav": "",
            "page": recorder,
        }
        assert set(context) == set(render.BASE_CONTEXT)
        render.env.get_template(template).render(context)
        fields = {f.name for f in dataclasses.fields(cls)}
        assert recorder.read == fields, (template, fields ^ recorder.read)


# --- conversation items, every kind and every question outcome ---------------------------


def _message(msg_type: str, content: str = "", author: str = "agent", **metadata) -> object:
    from datetime import UTC, datetime

    from kandev.sessions.models import Message

    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Message(
        id=f"m-{msg_type}-{len(metadata)}-{metadata.get('status', '')}",
        session_id="s",
        task_id="t",
        turn_id="turn",
        author_type=author,
        author_id="",
        type=msg_type,
        content=content,
        requests_input=False,
        metadata=metadata,
        created_at=now,
        updated_at=now,
    )


QUESTION = {
    "id": "q",
    "title": "",
    "prompt": "Which **database**?",
    "options": [
        {"option_id": "pg", "label": "PostgreSQL", "description": "the server"},
        {"option_id": "lite", "label": "SQLite", "description": "a file"},
    ],
}


def _asked(status: str, **extra) -> object:
    return _message(
        "clarification_request",
        "Which database?",
        pending_id="p",
        question_id="q",
        question=QUESTION,
        question_index=0,
        question_total=1,
        context="We need to store sessions.",
        status=status,
        **extra,
    )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            _asked("answered", response={"selected_options": ["pg", "lite"], "custom_text": ""}),
            "PostgreSQL SQLite",
        ),
        (
            _asked(
                "answered",
                response={"selected_options": [], "custom_text": "none, use files"},
                agent_disconnected=True,
            ),
            "Written answer none, use files sent as a new message",
        ),
        (_asked("rejected", response={"rejected": True, "reject_reason": ""}), "Skipped"),
        (_asked("expired"), "timed out, agent moved on"),
        (_asked("cancelled"), "Cancelled"),
        (_asked("pending"), "Waiting for your answer"),
    ],
)
def test_question_outcomes_in_the_history(message, expected) -> None:
    html = render.env.get_template("partials/_messages.html").render(
        page=pages.MessagesFragment(messages=[message])
    )
    item = BeautifulSoup(html, "html.parser").select_one("li")
    assert item.select_one(".qa-q strong").get_text() == "database"  # the prompt is Markdown
    assert item.select_one(".qa-context").get_text() == "We need to store sessions."
    assert item.select_one("[data-answer]").get_text(" ", strip=True) == expected


def test_every_message_kind_renders() -> None:
    items = [
        _message("message", "do *it*", author="user"),
        _message("message", "Done: `x`\n\n<img src=x onerror=alert(1)>"),
        _message("thinking", "hmm"),
        _message("tool_call", "42 lines", status="failed", kind="read", raw_input={"p": 1}),
        _message("agent_plan", "", entries=[{"content": "Read", "status": "completed"}]),
        _message("permission_request", "rm?", status="pending", tool_call={"title": "rm -rf"}),
        _message("error", "agent crashed", author="system"),
    ]
    html = render.env.get_template("partials/_messages.html").render(
        page=pages.MessagesFragment(messages=items)
    )
    doc = BeautifulSoup(html, "html.parser")
    assert doc.select_one(".msg-user").get_text() == "do *it*"  # prompts stay plain text
    agent = doc.select(".msg-agent .md")[0]
    assert agent.select_one("code").get_text() == "x" and agent.select_one("img") is None
    assert doc.select_one(".msg-thinking summary").get_text() == "Thinking…"
    tool = doc.select_one(".msg-tool")
    assert tool.name == "details" and not tool.has_attr("open")
    assert tool.select_one(".chip").get_text() == "failed"
    assert doc.select_one(".plan li")["data-status"] == "completed"
    assert "rm -rf" in doc.select_one('[data-type="permission_request"]').get_text()
    assert doc.select_one(".msg-error").get_text() == "agent crashed"
    assert len(doc.select("[data-message-id]")) == len(items)
