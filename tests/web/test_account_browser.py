"""Sign-in, settings and the inbox in a real browser (Debian's Chromium) against a real
uvicorn: setup, login, tokens, scoping, answering in place through the shared overlay, and
the live badge. Every wait is on DOM state; nothing sleeps."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import expect

from tests.web.conftest import DESKTOP, PHONE

PASSWORD = "s3cret-password"
ADMIN = {"email": "admin@example.com", "password": PASSWORD, "display_name": "Ada Admin"}
MEMBER = {"email": "member@example.com", "password": PASSWORD}
PAT_RE = re.compile(r"kandev_pat_[0-9a-f]{8}_[A-Za-z0-9_-]{43}")


def question(qid: str, prompt: str) -> list[dict]:
    return [
        {
            "id": qid,
            "title": "Database",
            "prompt": prompt,
            "options": [
                {"option_id": "pg", "label": "PostgreSQL", "description": "a server"},
                {"option_id": "lite", "label": "SQLite", "description": "embedded, one file"},
            ],
        }
    ]


class Api:
    """REST as one user (cookie), making boards and open questions."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    def ok(self, response: httpx.Response) -> dict:
        assert response.status_code in (200, 201, 202), response.text
        return response.json() if response.content else {}

    def login(self, who: dict) -> Api:
        self.ok(self.http.post("/api/v1/auth/login", json=who))
        return self

    def board(self, name: str) -> dict:
        ws = self.ok(self.http.post("/api/v1/workspaces", json={"name": name}))
        wf = self.ok(
            self.http.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "Dev"})
        )
        return {"workspace": ws, "workflow": wf}

    def ask(self, board: dict, title: str, prompt: str = "Which database?") -> dict:
        task = self.ok(
            self.http.post(
                "/api/v1/tasks",
                json={
                    "workspace_id": board["workspace"]["id"],
                    "workflow_id": board["workflow"]["id"],
                    "title": title,
                },
            )
        )
        session = self.ok(self.http.post(f"/api/v1/tasks/{task['id']}/sessions", json={}))
        self.ok(self.http.post(f"/api/v1/sessions/{session['id']}/prompt", json={"text": "go"}))
        asked = self.ok(
            self.http.post(
                "/api/v1/clarification/request",
                json={
                    "session_id": session["id"],
                    "questions": question("db", prompt),
                    "context": f"Setting up storage for “{title}”.",
                },
            )
        )
        return {"task": task, "pending_id": asked["pending_id"]}

    def status(self, pending_id: str) -> dict:
        return self.ok(self.http.get(f"/api/v1/clarification/{pending_id}"))

    def answer_vias(self, task_id: str) -> list[str]:
        """How each winning answer of the task's session was given (`metadata.via`)."""
        sessions = self.ok(self.http.get(f"/api/v1/tasks/{task_id}/sessions"))["sessions"]
        rows = self.ok(self.http.get(f"/api/v1/sessions/{sessions[0]['id']}/messages"))
        return [m["metadata"]["via"] for m in rows["messages"] if m["type"] == "answer"]

    def answer(self, pending_id: str, option: str) -> dict:
        body = {"answers": [{"question_id": "db", "selected_options": [option]}]}
        return self.ok(self.http.post(f"/api/v1/clarification/{pending_id}/respond", json=body))


@pytest.fixture
def auth_server(live_server_factory, sqlite_url):
    """A live Kandev with auth on (mode setup until the first admin exists)."""
    return live_server_factory(sqlite_url, auth=True, clarification_progress_seconds=0.2)


@pytest.fixture
def auth_context(browser, auth_server) -> Iterator:
    ctx = browser.new_context(base_url=auth_server.url, viewport=DESKTOP)
    ctx.set_default_timeout(15_000)
    yield ctx
    ctx.close()


@pytest.fixture
def admin_and_member(auth_server) -> Iterator[tuple[Api, Api]]:
    admin = Api(auth_server.url)
    admin.ok(admin.http.post("/api/v1/auth/setup", json=ADMIN))
    admin.ok(admin.http.post("/api/v1/users", json=MEMBER))
    member = Api(auth_server.url).login(MEMBER)
    yield admin, member
    admin.http.close()
    member.http.close()


def sign_in(page, who: dict, path: str = "/") -> None:
    page.goto(path)
    expect(page).to_have_url(re.compile(r"/login"))
    page.get_by_label("Email").fill(who["email"])
    page.get_by_label("Password").fill(who["password"])
    page.get_by_role("button", name="Sign in").click()


def inbox_items(page):
    return page.locator("#inbox-list > .inbox-item")


# --- sign-in and tokens ---------------------------------------------------------------


def test_setup_login_tokens_and_only_own_workspaces(auth_context, auth_server, screenshot) -> None:
    page = auth_context.new_page()
    page.goto("/settings/tokens")
    expect(page).to_have_url(re.compile(r"/setup$"))  # mode setup: the first admin first
    page.get_by_label("Email").fill(ADMIN["email"])
    page.get_by_label("Display name").fill(ADMIN["display_name"])
    page.get_by_label("Password").fill(ADMIN["password"])
    page.get_by_role("button", name="Create admin and sign in").click()
    expect(page).to_have_url(auth_server.url + "/")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()

    # A token is shown once, with a copy button; then it is listed by name and prefix.
    page.get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", name="Personal access tokens")).to_be_visible()
    expect(page.locator("#tokens-empty")).to_be_visible()
    page.get_by_label("Name").fill("scripts")
    page.get_by_label("Expires").select_option(label="in 7 days")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token")).to_contain_text("shown only this once")
    token = page.locator("#new-token-value").inner_text()
    assert PAT_RE.fullmatch(token)
    expect(page.locator("#new-token").get_by_role("button", name="Copy")).to_be_visible()
    rows = page.locator("#tokens-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("th")).to_have_text("scripts")
    expect(rows.first).to_contain_text(token[: len("kandev_pat_") + 8])
    page.get_by_label("Name").fill("throwaway")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token")).to_contain_text("throwaway")
    screenshot(page, "settings-tokens.png")
    page.reload()  # shown once: a reload (a GET) does not show it again
    expect(page.locator("#new-token")).to_have_count(0)
    assert token not in page.content()
    expect(rows).to_have_count(2)
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke throwaway").click()
    expect(rows).to_have_count(1)
    expect(rows.first.locator("th")).to_have_text("scripts")

    # The token works from a script; with it, a member and two boards are made.
    with httpx.Client(
        base_url=auth_server.url, headers={"Authorization": f"Bearer {token}"}
    ) as admin:
        assert admin.post("/api/v1/users", json=MEMBER).status_code == 201
        assert admin.post("/api/v1/workspaces", json={"name": "Admin WS"}).status_code == 201
    member = Api(auth_server.url).login(MEMBER)
    member.board("Member WS")
    member.http.close()

    # Sign out, a wrong password is refused inline, then the member sees only their board.
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.get_by_label("Email").fill(MEMBER["email"])
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Invalid email or password.")
    expect(page.get_by_label("Email")).to_have_value(MEMBER["email"])
    screenshot(page, "login.png")
    page.get_by_label("Password").fill(MEMBER["password"])
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(auth_server.url + "/")
    workspaces = page.get_by_label("Workspace").locator("option")
    expect(workspaces).to_have_text(["Member WS"])
    # The member's inbox is empty: the admin's boards are not theirs.
    page.get_by_role("link", name="Inbox").click()
    expect(page.locator("#inbox-empty")).to_be_visible()


def test_signed_out_pages_go_to_login_and_come_back(
    auth_context, auth_server, admin_and_member
) -> None:
    page = auth_context.new_page()
    for path in ("/", "/inbox", "/settings/agents", "/settings/mcp"):
        page.goto(path)
        expect(page).to_have_url(re.compile(r"/login\?next="))
    sign_in(page, MEMBER, "/settings/mcp")
    expect(page).to_have_url(auth_server.url + "/settings/mcp")
    expect(page.get_by_role("heading", name="External MCP endpoint")).to_be_visible()


# --- inbox ------------------------------------------------------------------------------


def test_inbox_answers_in_place_and_stays_live(auth_context, admin_and_member, screenshot) -> None:
    admin, member = admin_and_member
    first = admin.ask(admin.board("Payments"), "Pick a database for payments")
    second = admin.ask(admin.board("Search"), "Storage for the search index")
    theirs = member.ask(member.board("Member WS"), "The member's own question")

    page = auth_context.new_page()
    sign_in(page, ADMIN, "/inbox")
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    expect(inbox_items(page)).to_have_count(2)
    ids = [inbox_items(page).nth(i).get_attribute("data-pending-id") for i in range(2)]
    assert ids == [first["pending_id"], second["pending_id"]]  # oldest first
    assert theirs["pending_id"] not in page.content()
    expect(inbox_items(page).first.locator("[data-workspace]")).to_have_text("Payments")
    expect(inbox_items(page).nth(1).locator("[data-workspace]")).to_have_text("Search")
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "2")
    expect(page).to_have_title("(2) Inbox · Kandev")
    screenshot(page, "inbox.png")

    # Answer the first in place, through the same overlay as the task page.
    item = page.locator(f"#inbox-{first['pending_id']}")
    overlay = item.get_by_role("region", name="Clarification needed")
    expect(overlay).to_be_visible()
    expect(item.locator("form.inbox-static")).to_be_hidden()  # the no-JS form steps aside
    overlay.get_by_role("button", name=re.compile(r"^PostgreSQL")).click()
    overlay.get_by_role("button", name="Submit").click()
    expect(item).to_have_count(0)
    expect(inbox_items(page)).to_have_count(1)
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "1")
    settled = admin.status(first["pending_id"])
    assert settled["status"] == "answered"

    # Live: a new question appears (badge and title follow); one answered elsewhere goes.
    third = admin.ask(admin.board("Infra"), "Where should backups go?")
    expect(page.locator(f"#inbox-{third['pending_id']}")).to_be_visible()
    expect(inbox_items(page)).to_have_count(2)
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "2")
    expect(page).to_have_title("(2) Inbox · Kandev")
    assert admin.answer(second["pending_id"], "lite")["claimed"] is True
    expect(page.locator(f"#inbox-{second['pending_id']}")).to_have_count(0)
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "1")

    # Skip all declines the last one; the empty state says nothing is waiting.
    last = page.locator(f"#inbox-{third['pending_id']}")
    last.get_by_role("button", name="Skip all").click()
    expect(last).to_have_count(0)
    expect(page.locator("#inbox-empty")).to_be_visible()
    expect(page.locator("#inbox-badge")).to_be_hidden()
    expect(page).to_have_title("Inbox · Kandev")
    assert admin.status(third["pending_id"])["status"] == "rejected"


def test_badge_and_notification_follow_new_questions_on_any_page(
    auth_context, admin_and_member
) -> None:
    admin, _ = admin_and_member
    board = admin.board("Acme")
    # A stand-in for the browser's Notification API that records what was announced.
    auth_context.add_init_script(
        """
        window.__notes = [];
        const settings = { configurable: true, writable: true };
        Object.defineProperty(window, "Notification", { ...settings, value: class {
          // Granted once asked, for the rest of the test (the opt-in lives in localStorage).
          static permission = localStorage.getItem("kandev.notify") === "1" ? "granted" : "default";
          static async requestPermission() { this.permission = "granted"; return "granted"; }
          constructor(title, options) { window.__notes.push({ title, ...options }); }
        } });
        """
    )
    page = auth_context.new_page()
    sign_in(page, ADMIN, "/inbox")
    expect(page.locator("#live-status")).to_have_attribute("data-state", "live")
    assert page.evaluate("typeof window.__notes") == "object"  # the stand-in is in place
    page.get_by_role("button", name="Notify me of new questions").click()
    expect(page.get_by_role("button", name="Notifications on")).to_be_visible()

    page.goto("/settings/mcp")
    expect(page.locator("body")).to_have_attribute("data-live", "1")
    expect(page.locator("#inbox-badge")).to_be_hidden()
    admin.ask(board, "First question")
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "1")
    expect(page.locator("#inbox-badge")).to_be_visible()
    expect(page).to_have_title("(1) MCP & CLI · Settings · Kandev")
    page.wait_for_function("window.__notes.length === 1")
    note = page.evaluate("window.__notes[0]")
    assert note["title"] == "An agent is waiting for you" and "1 open question" in note["body"]
    admin.ask(board, "Second question")
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "2")
    # A fresh page renders the count on the server.
    page.goto("/settings/agents")
    expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "2")


# --- settings ---------------------------------------------------------------------------


def test_mcp_page_copy_button_copies_the_config(browser, server, screenshot) -> None:
    ctx = browser.new_context(base_url=server.url, viewport=DESKTOP)
    ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    try:
        page = ctx.new_page()
        page.goto("/settings/mcp")
        endpoint = page.locator("#mcp-endpoint")
        expect(endpoint).to_have_text(server.url + "/mcp")
        claude = page.locator("#client-claude-code")
        claude.get_by_role("button", name="Copy the Claude Code configuration").click()
        expect(claude.get_by_role("button", name=re.compile("Copy"))).to_have_text("Copied")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == f"claude mcp add --transport http kandev {server.url}/mcp"
        catalog = page.locator("#tool-catalog")
        group = catalog.get_by_role("region", name="Answering agent questions")
        expect(group.locator(".tool-name")).to_have_text(
            ["list_pending_questions_kandev", "answer_question_kandev"]
        )
        screenshot(page, "settings-mcp.png")
    finally:
        ctx.close()


def test_admin_edits_profiles_and_a_member_only_reads(auth_context, admin_and_member) -> None:
    page = auth_context.new_page()
    sign_in(page, ADMIN, "/settings/agents")
    form = page.locator("#profile-form")
    form.get_by_label("Name").fill("claude")
    form.get_by_label("Command").fill("no-such-agent-xyz --acp")
    form.get_by_label("Environment").fill("ANTHROPIC_API_KEY=sk-secret-123")
    form.get_by_role("button", name="Create profile").click()
    error = page.locator("#profile-form [role=alert]")
    expect(error).to_have_text("Command: program 'no-such-agent-xyz' not found on PATH.")
    expect(form.get_by_label("Command")).to_have_attribute("aria-invalid", "true")
    form.get_by_label("Command").fill("python3 -c pass")
    form.get_by_role("button", name="Create profile").click()
    card = page.locator("#profiles > li[data-profile-name=claude]")
    expect(card.locator(".env-list")).to_have_text("ANTHROPIC_API_KEY=********")
    assert "sk-secret-123" not in page.content()

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, MEMBER, "/settings/agents")
    expect(page.locator("#agents-readonly")).to_be_visible()
    expect(page.locator("#profiles > li[data-profile-name=claude]")).to_be_visible()
    expect(page.locator("#profile-form")).to_have_count(0)
    expect(page.get_by_role("button", name=re.compile("^(Edit|Delete)"))).to_have_count(0)


def test_profiles_show_their_permission_policy_and_the_edit_form_changes_it(
    page, rest, screenshot
) -> None:
    r = rest.post(
        "/api/v1/agent-profiles",
        json={
            "name": "careful",
            "command": [sys.executable],
            "permission_policy": "deny",
            "permission_allow": ["read"],
        },
    )
    assert r.status_code == 201, r.text
    profile_id = r.json()["id"]
    page.goto("/settings/agents")
    demo = page.locator("#profiles > li[data-profile-name=demo] .profile-policy")
    careful = page.locator("#profiles > li[data-profile-name=careful]")
    policy = careful.locator(".profile-policy")
    expect(demo).to_have_attribute("data-policy", "ask")
    expect(demo).to_contain_text("a person decides each request")
    expect(policy).to_have_attribute("data-policy", "deny")
    expect(policy).to_contain_text("every request is rejected at once")
    expect(policy.locator(".policy-allow-list code")).to_have_text(["read"])

    careful.locator("summary", has_text="Edit").click()
    form = page.get_by_role("form", name="Edit careful")
    expect(form.get_by_label("Permission policy")).to_have_value("deny")
    expect(form.get_by_label("Permission allow")).to_have_value("read")
    form.get_by_label("Permission policy").select_option("allow")
    form.get_by_label("Permission allow").fill("read\n" + "x" * 201)
    form.get_by_role("button", name="Save changes").click()
    form = page.get_by_role("form", name="Edit careful")
    expect(form.get_by_role("alert")).to_have_text(
        "Permission allow: line 2: at most 200 characters."
    )
    expect(form.get_by_label("Permission allow")).to_have_attribute("aria-invalid", "true")
    expect(form.get_by_label("Permission policy")).to_have_value("allow")  # kept as chosen
    form.get_by_label("Permission allow").fill("read\nsearch")
    form.get_by_role("button", name="Save changes").click()
    expect(policy).to_have_attribute("data-policy", "allow")
    expect(policy.locator(".policy-allow-list code")).to_have_text(["read", "search"])
    stored = rest.get(f"/api/v1/agent-profiles/{profile_id}").json()
    assert stored["permission_policy"] == "allow"
    assert stored["permission_allow"] == ["read", "search"]
    screenshot(page, "settings-agents-policy.png")


def test_pages_fit_a_phone(browser, server) -> None:
    ctx = browser.new_context(base_url=server.url, viewport=PHONE)
    try:
        page = ctx.new_page()
        api = Api(server.url)
        api.ask(api.board("Phone"), "A question on a small screen")
        for path in ("/inbox", "/settings/tokens", "/settings/agents", "/settings/mcp"):
            page.goto(path)
            expect(page.locator("main h1").first).to_be_visible()
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], (path, width)
        api.http.close()
    finally:
        ctx.close()


def test_inbox_without_javascript_answers_with_the_form(browser, server) -> None:
    api = Api(server.url)
    asked = api.ask(api.board("No JS"), "Answer me without scripts")
    ctx = browser.new_context(base_url=server.url, java_script_enabled=False, viewport=DESKTOP)
    try:
        page = ctx.new_page()
        page.goto("/inbox")
        item = page.locator(f"#inbox-{asked['pending_id']}")
        expect(item.locator(".task-link")).to_have_text("Answer me without scripts")
        expect(page.locator("#inbox-badge")).to_have_attribute("data-count", "1")
        expect(item.get_by_role("region", name="Clarification needed")).to_have_count(0)
        item.get_by_label("SQLite").check()
        item.get_by_role("button", name="Submit").click()
        expect(page.locator("#inbox-empty")).to_be_visible()
        expect(page.locator("#inbox-badge")).to_be_hidden()
        settled = api.status(asked["pending_id"])
        assert settled["status"] == "answered"
        assert api.answer_vias(asked["task"]["id"]) == ["web"]  # the inbox form
    finally:
        ctx.close()
        api.http.close()


def test_inbox_answer_box_stops_at_the_servers_limit_and_is_recorded_via_rest(page, server) -> None:
    """The overlay's text box has no maxlength (it would count UTF-16 units): it counts code
    points up to 2000, as its counter says and as the server does. Answering in place posts
    to POST /api/v1/clarification/{id}/respond, so the answer is recorded `via: "rest"` (the
    no-JavaScript form records "web")."""
    api = Api(server.url)
    asked = api.ask(api.board("Limit"), "Long answer")
    page.goto("/inbox")
    overlay = page.locator(f"#inbox-{asked['pending_id']}").get_by_role(
        "region", name="Clarification needed"
    )
    box = overlay.get_by_role("textbox", name="Your answer")
    assert box.get_attribute("maxlength") is None
    counter = overlay.locator("[data-rune-count]")
    box.fill("x" * 2000)
    expect(counter).to_have_text("2000 / 2000 · limit reached")
    page.keyboard.press("End")
    page.keyboard.insert_text("y")  # the 2001st is refused, visibly
    expect(counter).to_contain_text("limited to 2000 characters")
    assert box.evaluate("b => [...b.value].length") == 2000
    overlay.get_by_role("button", name="Submit").click()
    expect(page.locator(f"#inbox-{asked['pending_id']}")).to_have_count(0)
    state = api.status(asked["pending_id"])
    assert state["status"] == "answered"
    assert api.answer_vias(asked["task"]["id"]) == ["rest"]
    api.http.close()


def test_inbox_answers_a_multi_question_bundle(page, server) -> None:
    api = Api(server.url)
    board = api.board("Multi")
    asked = api.ask(board, "Two questions")  # one question …
    api.answer(asked["pending_id"], "pg")
    task = asked["task"]
    session = api.ok(api.http.get(f"/api/v1/tasks/{task['id']}/sessions"))["sessions"][0]
    two = [
        *question("db", "Which database?"),
        {
            "id": "lang",
            "title": "Language",
            "prompt": "Which language?",
            "options": [
                {"option_id": "py", "label": "Python", "description": "dynamic"},
                {"option_id": "go", "label": "Go", "description": "compiled"},
            ],
        },
    ]
    api.ok(api.http.post(f"/api/v1/sessions/{session['id']}/prompt", json={"text": "more"}))
    pending = api.ok(
        api.http.post(
            "/api/v1/clarification/request",
            json={"session_id": session["id"], "questions": two},
        )
    )["pending_id"]
    page.goto("/inbox")
    overlay = page.locator(f"#inbox-{pending}").get_by_role("region", name="Clarification needed")
    expect(overlay).to_contain_text("Question 1 of 2")
    overlay.get_by_role("button", name=re.compile(r"^SQLite")).click()
    overlay.get_by_role("button", name="Next →").click()
    expect(overlay).to_contain_text("Question 2 of 2")
    overlay.get_by_role("textbox", name="Your answer").fill("Rust, please")
    expect(overlay.get_by_role("button", name="Submit")).to_be_enabled()
    overlay.get_by_role("button", name="Submit").click()
    expect(page.locator(f"#inbox-{pending}")).to_have_count(0)
    state = api.status(pending)
    assert state["status"] == "answered"
    api.http.close()


def test_inbox_loser_is_told_the_winners_answer(page, server) -> None:
    """The answer that loses the race (claimed: false) closes the item and shows what won."""
    api = Api(server.url)
    asked = api.ask(api.board("Race"), "Contested question")
    page.goto("/inbox")
    overlay = page.locator(f"#inbox-{asked['pending_id']}").get_by_role(
        "region", name="Clarification needed"
    )
    overlay.get_by_role("button", name=re.compile(r"^PostgreSQL")).click()

    def someone_else_first(route) -> None:
        assert api.answer(asked["pending_id"], "lite")["claimed"] is True  # the winner
        route.continue_()  # …then this page's answer reaches the server and loses

    page.route(re.compile(r".*/api/v1/clarification/[^/]+/respond$"), someone_else_first)
    overlay.get_by_role("button", name="Submit").click()
    expect(page.locator("#toasts")).to_contain_text("Someone else answered first: SQLite")
    expect(page.locator(f"#inbox-{asked['pending_id']}")).to_have_count(0)
    expect(page.locator("#inbox-empty")).to_be_visible()
    api.http.close()
