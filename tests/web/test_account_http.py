"""Sign-in, settings and inbox pages without a browser: parsed HTML, forms posting to the
same services as REST, redirects and scoping. In-process (ASGI, lifespan included), SQLite."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from bs4 import BeautifulSoup

import kandev.web
from kandev.clarification.outcome import MAX_TEXT_RUNES
from tests.api_client import asgi_client

PASSWORD = "s3cret-password"
ADMIN = {"email": "admin@example.com", "password": PASSWORD}
MEMBER = {"email": "member@example.com", "password": PASSWORD}
PAT_RE = re.compile(r"kandev_pat_[0-9a-f]{8}_[A-Za-z0-9_-]{43}")
QUESTIONS = [
    {
        "id": "db",
        "title": "Database",
        "prompt": "Which **database** should the service use?",
        "options": [
            {"option_id": "pg", "label": "PostgreSQL", "description": "a server"},
            {"option_id": "lite", "label": "SQLite", "description": "embedded"},
        ],
    }
]


def soup(response: httpx.Response) -> BeautifulSoup:
    assert response.headers["content-type"].startswith("text/html"), response.headers
    return BeautifulSoup(response.text, "html.parser")


def no_leaks(html: str) -> None:
    for leak in ("None", "{{", "}}", "{%", "undefined"):
        assert leak not in BeautifulSoup(html, "html.parser").get_text(), leak


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """Auth off."""
    async with asgi_client(tmp_path) as c:
        yield c


@pytest.fixture
async def auth_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """Auth on, mode setup (no admin yet)."""
    async with asgi_client(tmp_path, auth=True) as c:
        yield c


async def setup_admin(client: httpx.AsyncClient) -> None:
    r = await client.post("/api/v1/auth/setup", json=ADMIN)
    assert r.status_code == 200, r.text


async def add_member(admin: httpx.AsyncClient) -> None:
    r = await admin.post("/api/v1/users", json=MEMBER)
    assert r.status_code == 201, r.text


async def sign_in(client: httpx.AsyncClient, who: dict) -> None:
    client.cookies.clear()
    r = await client.post("/api/v1/auth/login", json=who)
    assert r.status_code == 200, r.text


async def ask(client: httpx.AsyncClient, workspace: str, title: str) -> dict:
    """A workspace with a task and an open question on a session without a managed agent."""
    ws = (await client.post("/api/v1/workspaces", json={"name": workspace})).json()
    wf = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "Dev"})
    ).json()
    task = (
        await client.post(
            "/api/v1/tasks",
            json={"workspace_id": ws["id"], "workflow_id": wf["id"], "title": title},
        )
    ).json()
    session = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()
    r = await client.post(f"/api/v1/sessions/{session['id']}/prompt", json={"text": "go"})
    assert r.status_code == 202, r.text
    r = await client.post(
        "/api/v1/clarification/request",
        json={"session_id": session["id"], "questions": QUESTIONS, "context": "We need a DB."},
    )
    assert r.status_code == 200, r.text
    return {"workspace": ws, "task": task, "pending_id": r.json()["pending_id"]}


# --- sign-in ------------------------------------------------------------------------

PAGES = ["/", "/inbox", "/settings/tokens", "/settings/agents", "/settings/mcp"]


@pytest.mark.parametrize("path", PAGES)
async def test_signed_out_pages_redirect_to_setup_then_login(auth_client, path) -> None:
    r = await auth_client.get(path)
    assert (r.status_code, r.headers["location"]) == (303, "/setup")
    await setup_admin(auth_client)
    auth_client.cookies.clear()
    r = await auth_client.get(path)
    assert r.status_code == 303
    assert r.headers["location"] == f"/login?next={quote(path, safe='')}"


async def test_setup_form_creates_the_admin_and_signs_in(auth_client) -> None:
    assert (await auth_client.get("/login")).headers["location"] == "/setup"
    doc = soup(await auth_client.get("/setup"))
    form = doc.select_one("#signin-form")
    assert (form["method"], form["action"]) == ("post", "/setup")
    assert {i["name"] for i in form.select("input")} == {"email", "display_name", "password"}

    short = await auth_client.post("/setup", data={"email": ADMIN["email"], "password": "x"})
    assert short.status_code == 400
    assert soup(short).select_one("#signin-error").text == "Password must be at least 8 characters."
    assert soup(short).select_one("input[name=email]")["value"] == ADMIN["email"]

    r = await auth_client.post("/setup", data={**ADMIN, "display_name": "Ada"})
    assert (r.status_code, r.headers["location"]) == (303, "/")
    assert "kandev_session" in auth_client.cookies
    me = (await auth_client.get("/api/v1/auth/me")).json()
    assert me["mode"] == "enabled" and me["user"]["display_name"] == "Ada"
    board = soup(await auth_client.get("/"))
    assert board.select_one(".topbar .user-name").text == "Ada"
    assert (await auth_client.get("/setup")).headers["location"] == "/"  # signed in


async def test_login_errors_inline_and_next_stays_on_site(auth_client) -> None:
    await setup_admin(auth_client)
    auth_client.cookies.clear()
    doc = soup(await auth_client.get("/login?next=/inbox"))
    assert doc.select_one("input[name=next]")["value"] == "/inbox"
    assert doc.select_one(".topnav") is None  # no navigation while signed out

    bad = await auth_client.post("/login", data={**ADMIN, "password": "wrong-password"})
    assert bad.status_code == 401
    assert soup(bad).select_one("#signin-error").text == "Invalid email or password."
    assert "kandev_session" not in auth_client.cookies

    r = await auth_client.post("/login", data={**ADMIN, "next": "/settings/mcp?x=1"})
    assert (r.status_code, r.headers["location"]) == (303, "/settings/mcp?x=1")
    assert (await auth_client.get("/settings/mcp")).status_code == 200


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/", "/\\evil.example", "javascript:x"]
)
async def test_next_never_leaves_the_site(auth_client, target) -> None:
    await setup_admin(auth_client)
    auth_client.cookies.clear()
    assert (
        soup(await auth_client.get(f"/login?next={quote(target)}")).select_one("input[name=next]")[
            "value"
        ]
        == "/"
    )
    r = await auth_client.post("/login", data={**ADMIN, "next": target})
    assert (r.status_code, r.headers["location"]) == (303, "/")


async def test_sign_out_form_ends_the_session(auth_client) -> None:
    await setup_admin(auth_client)
    doc = soup(await auth_client.get("/"))
    form = doc.select_one(".topbar form.signout-form")
    assert (form["method"], form["action"]) == ("post", "/logout")
    session = auth_client.cookies["kandev_session"]
    r = await auth_client.post("/logout")
    assert (r.status_code, r.headers["location"]) == (303, "/login")
    auth_client.cookies.set("kandev_session", session)  # the old cookie no longer works
    assert (await auth_client.get("/")).headers["location"] == "/login?next=%2F"


async def test_auth_off_has_no_sign_in_ui(client) -> None:
    assert (await client.get("/login")).headers["location"] == "/"
    assert (await client.get("/setup")).headers["location"] == "/"
    doc = soup(await client.get("/settings/agents"))
    assert doc.select_one(".signout-form") is None


# --- tokens -------------------------------------------------------------------------


async def test_tokens_are_shown_once_listed_and_revoked(auth_client) -> None:
    await setup_admin(auth_client)
    doc = soup(await auth_client.get("/settings/tokens"))
    assert doc.select_one("#tokens-empty") is not None
    form = doc.select_one("#token-form")
    assert (form["method"], form["action"]) == ("post", "/settings/tokens")

    r = await auth_client.post("/settings/tokens", data={"name": "laptop", "ttl_hours": "24"})
    assert r.status_code == 201
    raw = soup(r).select_one("#new-token-value").text
    assert PAT_RE.fullmatch(raw)
    # The token works, and the page never shows it again.
    transport = auth_client._transport  # type: ignore[attr-defined]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as bearer:
        me = await bearer.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {raw}"})
    assert me.json()["authenticated"] is True
    again = await auth_client.get("/settings/tokens")
    assert raw not in again.text
    (row,) = soup(again).select("#tokens-table tbody tr")
    record = (await auth_client.get("/api/v1/auth/tokens")).json()["tokens"][0]
    assert row["data-token-id"] == record["id"]
    assert row.select_one("th").text == "laptop"
    assert record["prefix"] in row.text and record["expires_at"][:10] in row.text

    bad = await auth_client.post("/settings/tokens", data={"name": "", "ttl_hours": "soon"})
    assert bad.status_code == 400
    assert soup(bad).select_one("#token-error").text == "Ttl hours must be a whole number of hours."

    r = await auth_client.post(f"/settings/tokens/{record['id']}/revoke")
    assert (r.status_code, r.headers["location"]) == (303, "/settings/tokens")
    assert (await auth_client.get("/api/v1/auth/tokens")).json()["tokens"] == []
    assert soup(await auth_client.get("/settings/tokens")).select("#tokens-table") == []


async def test_settings_with_auth_off_lands_on_agent_profiles_with_a_note(client) -> None:
    link = soup(await client.get("/")).select_one(".topnav").find("a", string="Settings")
    assert link["href"] == "/settings/agents"  # not the tokens dead end
    r = await client.get(link["href"])
    assert r.status_code == 200
    note = soup(r).select_one("#auth-off-note")
    assert note is not None and "Authentication is off" in note.text
    assert "kandev serve --auth" in note.text and "docs/auth.md" in note.text
    assert soup(r).select("#profiles > li")  # the useful part: the profiles


async def test_settings_with_auth_on_lands_on_tokens(auth_client) -> None:
    await setup_admin(auth_client)
    link = soup(await auth_client.get("/")).select_one(".topnav").find("a", string="Settings")
    assert link["href"] == "/settings/tokens"
    assert soup(await auth_client.get("/settings/agents")).select_one("#auth-off-note") is None


async def test_tokens_page_with_auth_off_explains_and_the_form_is_404(client) -> None:
    r = await client.get("/settings/tokens")
    assert r.status_code == 200
    doc = soup(r)
    assert "need authentication on" in doc.select_one("#tokens-unavailable").text
    assert doc.select_one("#token-form") is None
    assert (await client.post("/settings/tokens", data={"name": "x"})).status_code == 404


# --- agent profiles -----------------------------------------------------------------


async def test_admin_creates_a_profile_env_is_masked_and_errors_name_the_field(
    auth_client,
) -> None:
    await setup_admin(auth_client)
    r = await auth_client.post(
        "/settings/agents",
        data={"name": "typo", "command": "no-such-agent-xyz --acp", "env": "TOKEN=abc"},
    )
    assert r.status_code == 400
    error = soup(r).select_one("#create-error").text
    assert error == "Command: program 'no-such-agent-xyz' not found on PATH."
    assert soup(r).select_one("#profile-form input[name=command]")["aria-invalid"] == "true"

    secret = "sk-very-secret-value"
    command = f"{sys.executable} -m some_agent --flag 'two words'"
    r = await auth_client.post(
        "/settings/agents", data={"name": "mine", "command": command, "env": f"API_KEY={secret}"}
    )
    assert (r.status_code, r.headers["location"]) == (303, "/settings/agents")
    page = await auth_client.get("/settings/agents")
    assert secret not in page.text
    doc = soup(page)
    no_leaks(page.text)
    (card,) = [li for li in doc.select("#profiles > li") if li["data-profile-name"] == "mine"]
    assert card.select_one(".env-list").text.strip() == "API_KEY=********"
    (profile,) = [
        p
        for p in (await auth_client.get("/api/v1/agent-profiles")).json()["agent_profiles"]
        if p["name"] == "mine"
    ]
    assert profile["command"][-1] == "two words"
    assert profile["env"] == {"API_KEY": "********"}

    # Editing keeps the masked value, as a REST PATCH with "********" does.
    form = card.select_one(".profile-edit form")
    assert form["action"] == f"/settings/agents/{profile['id']}"
    env = form.select_one("textarea[name=env]").text
    assert env == "API_KEY=********"
    r = await auth_client.post(
        form["action"], data={"name": "renamed", "command": command, "env": env}
    )
    assert r.status_code == 303
    stored = await auth_client.services.agent_profiles.get_profile(profile["id"])  # type: ignore[attr-defined]
    assert (stored.name, stored.env) == ("renamed", {"API_KEY": secret})

    duplicate = await auth_client.post(
        "/settings/agents", data={"name": "renamed", "command": command}
    )
    assert duplicate.status_code == 409
    assert soup(duplicate).select_one("#profile-form input[name=name]")["aria-invalid"] == "true"


async def test_member_sees_profiles_read_only_and_a_post_is_refused(auth_client) -> None:
    await setup_admin(auth_client)
    await add_member(auth_client)
    await sign_in(auth_client, MEMBER)
    doc = soup(await auth_client.get("/settings/agents"))
    assert doc.select_one("#agents-readonly") is not None
    assert "demo" in [li["data-profile-name"] for li in doc.select("#profiles > li")]
    assert doc.select("#profile-form, .profile-edit, form[action^='/settings/agents']") == []
    r = await auth_client.post(
        "/settings/agents", data={"name": "sneaky", "command": sys.executable}
    )
    assert r.status_code == 403
    assert soup(r).select_one("#agents-notice").text.startswith("Only admins can")
    names = [
        p["name"]
        for p in (await auth_client.get("/api/v1/agent-profiles")).json()["agent_profiles"]
    ]
    assert "sneaky" not in names


async def test_profile_form_edits_the_permission_policy_and_names_a_bad_field(client) -> None:
    command = sys.executable
    r = await client.post(
        "/settings/agents",
        data={
            "name": "careful",
            "command": command,
            "permission_policy": "deny",
            "permission_allow": "read\n\n  search \nread",
        },
    )
    assert r.status_code == 303, r.text
    profiles = (await client.get("/api/v1/agent-profiles")).json()["agent_profiles"]
    careful = next(p for p in profiles if p["name"] == "careful")
    assert careful["permission_policy"] == "deny"
    assert careful["permission_allow"] == ["read", "search"]
    action = f"/settings/agents/{careful['id']}"

    async def refused(error: str, **fields: str):
        """Post the edit form; it is refused with `error` and re-rendered: the form."""
        bad = await client.post(action, data={"name": "careful", "command": command, **fields})
        assert bad.status_code == 400
        doc = soup(bad)
        assert doc.select_one(f"#edit-{careful['id']}-error").text == error
        return doc.select_one(f"form[action='{action}']")

    form = await refused(
        "Permission policy must be one of 'ask', 'allow', 'deny', not 'maybe'.",
        permission_policy="maybe",
    )
    assert form.select_one("select[name=permission_policy]")["aria-invalid"] == "true"
    too_long = "read\n" + "x" * 201
    form = await refused(
        "Permission allow: line 2: at most 200 characters.",
        permission_policy="allow",
        permission_allow=too_long,
    )
    assert form.select_one("textarea[name=permission_allow]")["aria-invalid"] == "true"
    assert form.select_one("textarea[name=permission_allow]").text == too_long  # kept as typed
    assert form.select_one("select[name=permission_policy] option[selected]")["value"] == "allow"

    # A form without the permission fields (a script, an older page) leaves them as they are.
    r = await client.post(action, data={"name": "careful2", "command": command})
    assert r.status_code == 303
    stored = await client.services.agent_profiles.get_profile(careful["id"])  # type: ignore[attr-defined]
    assert (stored.name, stored.permission_policy, stored.permission_allow) == (
        "careful2",
        "deny",
        ["read", "search"],
    )
    r = await client.post(
        action,
        data={
            "name": "careful2",
            "command": command,
            "permission_policy": "ask",
            "permission_allow": "",
        },
    )
    assert r.status_code == 303
    stored = await client.services.agent_profiles.get_profile(careful["id"])  # type: ignore[attr-defined]
    assert (stored.permission_policy, stored.permission_allow) == ("ask", [])


async def test_auth_off_everyone_may_edit_profiles(client) -> None:
    doc = soup(await client.get("/settings/agents"))
    assert doc.select_one("#agents-readonly") is None
    assert doc.select_one("#profile-form") is not None
    # The built-in profile cannot be changed, so it offers no controls.
    (demo,) = [li for li in doc.select("#profiles > li") if li["data-profile-name"] == "demo"]
    assert demo.select("form") == []


# --- external MCP -------------------------------------------------------------------


async def mcp_request(
    client: httpx.AsyncClient, method: str, params: dict, token: str | None = None
) -> dict:
    """One JSON-RPC request to the external MCP endpoint (stateless Streamable HTTP)."""
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    transport = client._transport  # type: ignore[attr-defined]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as bare:
        r = await bare.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
            headers=headers,
        )
    assert r.status_code == 200, r.text
    body = r.text
    if not body.lstrip().startswith("{"):  # an SSE response: the last data line is the reply
        body = [line[5:] for line in body.splitlines() if line.startswith("data:")][-1]
    return json.loads(body)["result"]


async def registry(client: httpx.AsyncClient) -> dict[str, str]:
    """The live external tool registry, as the endpoint lists it over MCP."""
    tools = (await mcp_request(client, "tools/list", {}))["tools"]
    return {t["name"]: t.get("description") or "" for t in tools}


async def test_mcp_catalog_equals_the_live_registry(client) -> None:
    r = await client.get("/settings/mcp")
    assert r.status_code == 200
    doc = soup(r)
    chrome = soup(r)
    for quoted in chrome.select("#tool-catalog, .config"):  # JSON and tool text may have {{ }}
        quoted.decompose()
    no_leaks(str(chrome))
    shown = {
        entry["data-tool"]: entry.select_one(".tool-description").text
        for entry in doc.select("#tool-catalog .tool")
    }
    listed = await registry(client)
    assert len(doc.select("#tool-catalog .tool")) == len(shown)  # none twice
    assert shown == listed  # same names, same descriptions, none missing, none extra
    assert doc.select_one("#tool-count").text == str(len(listed))
    assert "ask_user_question_kandev" not in shown

    groups = {
        g.select_one("h3").text: [t["data-tool"] for t in g.select(".tool")]
        for g in doc.select(".tool-group")
    }
    assert groups["Answering agent questions"] == [
        "list_pending_questions_kandev",
        "answer_question_kandev",
    ]


async def test_mcp_catalog_follows_the_registry(client) -> None:
    """A tool added to the running server appears (under "Other tools") and a removed one
    disappears, with no change to the page: the catalog cannot drift."""
    app_state = client._transport.app.state  # type: ignore[attr-defined]
    external = app_state.mcp.external
    external.add_tool(lambda: "pong", name="ping_kandev", description="Answer pong.")
    external.remove_tool("move_task_kandev")
    doc = soup(await client.get("/settings/mcp"))
    shown = {t["data-tool"] for t in doc.select("#tool-catalog .tool")}
    assert "ping_kandev" in shown and "move_task_kandev" not in shown
    other = [g for g in doc.select(".tool-group") if g.select_one("h3").text == "Other tools"]
    assert [t["data-tool"] for t in other[0].select(".tool")] == ["ping_kandev"]


async def test_mcp_configs_carry_the_endpoint_and_the_token_only_with_auth_on(
    client, auth_client
) -> None:
    doc = soup(await client.get("/settings/mcp"))
    endpoint = doc.select_one("#mcp-endpoint").text
    assert endpoint.endswith("/mcp") and endpoint.startswith("http://")
    claude = doc.select_one("#client-claude-code-text").text
    assert claude == f"claude mcp add --transport http kandev {endpoint}"
    assert "KANDEV_URL=" in doc.select_one("#client-cli-text").text
    assert "Authorization" not in doc.select_one("#client-cursor-text").text

    await setup_admin(auth_client)
    doc = soup(await auth_client.get("/settings/mcp"))
    claude = doc.select_one("#client-claude-code-text").text
    assert claude.endswith('--header "Authorization: Bearer YOUR_TOKEN"')
    assert '"Authorization": "Bearer YOUR_TOKEN"' in doc.select_one("#client-cursor-text").text
    assert "${input:kandev-token}" in doc.select_one("#client-vscode-text").text
    assert "export KANDEV_TOKEN=YOUR_TOKEN" in doc.select_one("#client-cli-text").text


# --- inbox --------------------------------------------------------------------------


async def test_inbox_lists_own_questions_across_workspaces_oldest_first(auth_client) -> None:
    await setup_admin(auth_client)
    await add_member(auth_client)
    first = await ask(auth_client, "Admin A", "Pick a database")
    second = await ask(auth_client, "Admin B", "Choose storage")
    await sign_in(auth_client, MEMBER)
    foreign = await ask(auth_client, "Member WS", "Member's own question")
    member_doc = soup(await auth_client.get("/inbox"))
    assert [li["data-pending-id"] for li in member_doc.select("#inbox-list > li")] == [
        foreign["pending_id"]
    ]
    assert member_doc.select_one("#inbox-badge")["data-count"] == "1"

    await sign_in(auth_client, ADMIN)
    r = await auth_client.get("/inbox")
    doc = soup(r)
    no_leaks(r.text)
    items = doc.select("#inbox-list > li")
    assert [li["data-pending-id"] for li in items] == [first["pending_id"], second["pending_id"]]
    head = items[0].select_one(".inbox-item-head")
    link = head.select_one("a.task-link")
    assert link.text == "Pick a database"
    assert link["href"].startswith(f"/tasks/{first['task']['id']}")
    assert head.select_one("[data-workspace]").text == "Admin A"
    assert items[0].select_one(".qa-q strong").text == "database"  # Markdown, sanitized
    labels = [s.text for s in items[0].select(".options-static strong")]
    assert labels == ["PostgreSQL", "SQLite"]
    assert doc.select_one("#inbox-badge")["data-count"] == "2"
    assert doc.select_one("#inbox-empty").has_attr("hidden")
    # The same list as the MCP tool answers for the same user.
    token = (await auth_client.post("/api/v1/auth/tokens", json={"name": "t"})).json()["token"]
    listed = await mcp_request(
        auth_client,
        "tools/call",
        {"name": "list_pending_questions_kandev", "arguments": {}},
        token=token,
    )
    bundles = listed["structuredContent"]["bundles"]
    assert [b["pending_id"] for b in bundles] == [li["data-pending-id"] for li in items]
    # The badge fragment on its own: the same count, no page around it.
    count = await auth_client.get("/inbox/count", headers={"HX-Request": "true"})
    assert count.status_code == 200 and soup(count).find("html") is None
    assert soup(count).select_one("#inbox-badge")["data-count"] == "2"


async def test_inbox_form_answers_through_the_shared_resolution(client) -> None:
    asked = await ask(client, "Acme", "Pick a database")
    doc = soup(await client.get("/inbox"))
    form = doc.select_one(f"#inbox-{asked['pending_id']} form")
    assert (form["method"], form["action"]) == ("post", f"/inbox/{asked['pending_id']}/answer")

    incomplete = await client.post(form["action"], data={"question_id": "db", "action": "submit"})
    assert incomplete.status_code == 400
    assert "every question" in soup(incomplete).select_one("#inbox-error").text

    r = await client.post(
        form["action"], data={"question_id": "db", "option.db": "lite", "action": "submit"}
    )
    assert (r.status_code, r.headers["location"]) == (303, "/inbox")
    state = (await client.get(f"/api/v1/clarification/{asked['pending_id']}")).json()
    assert state["status"] == "answered"
    doc = soup(await client.get("/inbox"))
    assert doc.select("#inbox-list > li") == []
    assert not doc.select_one("#inbox-empty").has_attr("hidden")
    assert doc.select_one("#inbox-badge").has_attr("hidden")

    # The loser of a race is simply sent back: the winner's answer stands.
    r = await client.post(form["action"], data={"action": "skip"})
    assert r.status_code in (303, 409)
    state = (await client.get(f"/api/v1/clarification/{asked['pending_id']}")).json()
    assert state["status"] == "answered"


CLARIFICATION_JS = Path(kandev.web.__file__).parent / "static" / "js" / "clarification.js"


async def answer_messages(client: httpx.AsyncClient, task_id: str) -> list[dict]:
    """The conversation's answer messages (one per winning answer, `metadata.via` says how)."""
    sessions = (await client.get(f"/api/v1/tasks/{task_id}/sessions")).json()["sessions"]
    r = await client.get(f"/api/v1/sessions/{sessions[0]['id']}/messages")
    return [m for m in r.json()["messages"] if m["type"] == "answer"]


async def test_the_answer_text_limit_is_the_servers(client) -> None:
    """One number: the server's limit on custom_text (MAX_TEXT_RUNES code points) is the
    no-JavaScript form's maxlength and the overlay's counter (clarification.js MAX_RUNES).
    The form's answer is recorded `via: "web"`."""
    declared = re.search(r"^export const MAX_RUNES = (\d+);$", CLARIFICATION_JS.read_text(), re.M)
    assert declared and int(declared.group(1)) == MAX_TEXT_RUNES
    asked = await ask(client, "Acme", "Limits")
    doc = soup(await client.get("/inbox"))
    box = doc.select_one(f"#inbox-{asked['pending_id']} textarea[name='text.db']")
    assert box["maxlength"] == str(MAX_TEXT_RUNES)

    action = f"/inbox/{asked['pending_id']}/answer"
    fields = {"question_id": "db", "action": "submit"}
    over = await client.post(action, data={**fields, "text.db": "x" * (MAX_TEXT_RUNES + 1)})
    assert over.status_code == 400
    assert f"{MAX_TEXT_RUNES}" in soup(over).select_one("#inbox-error").text
    r = await client.post(action, data={**fields, "text.db": "x" * MAX_TEXT_RUNES})
    assert r.status_code == 303, r.text
    state = (await client.get(f"/api/v1/clarification/{asked['pending_id']}")).json()
    assert state["status"] == "answered"
    [answer] = await answer_messages(client, asked["task"]["id"])
    assert answer["metadata"]["via"] == "web"


async def test_inbox_answer_for_an_invisible_question_is_404(auth_client) -> None:
    await setup_admin(auth_client)
    await add_member(auth_client)
    asked = await ask(auth_client, "Admin", "Private")
    await sign_in(auth_client, MEMBER)
    r = await auth_client.post(f"/inbox/{asked['pending_id']}/answer", data={"action": "skip"})
    missing = await auth_client.post("/inbox/no-such-id/answer", data={"action": "skip"})
    assert r.status_code == missing.status_code == 404
    assert r.text == missing.text


# --- page contexts ------------------------------------------------------------------


class Recorder:
    """Stands in for a page dataclass and records which fields the template reads."""

    def __init__(self, page: object) -> None:
        self._page = page
        self.read: set[str] = set()

    def __getattr__(self, name: str):
        self.read.add(name)
        value = getattr(self._page, name)
        if dataclasses.is_dataclass(value):
            return Recorder(value)
        return value


async def test_templates_read_exactly_the_documented_page_fields(auth_client, monkeypatch) -> None:
    """Across the states a page can be in (empty, with an error, with a new token …), its
    template reads every field of its dataclass and nothing else (STYLE E3)."""
    from kandev.web import pages_account, pages_inbox, render
    from kandev.web.routes import auth as auth_routes
    from kandev.web.routes import inbox as inbox_routes
    from kandev.web.routes import settings as settings_routes

    read: dict[str, set[str]] = {}
    kinds: dict[str, type] = {}
    original = render.render

    def capture(request, template, page, **kw):
        recorder = Recorder(page)
        response = original(request, template, recorder, **kw)
        read.setdefault(template, set()).update(recorder.read)
        kinds[template] = type(page)
        return response

    for module in (auth_routes, inbox_routes, settings_routes):
        monkeypatch.setattr(module, "render", capture)

    await auth_client.get("/setup")
    await auth_client.post("/setup", data={"email": "bad", "password": PASSWORD})
    await setup_admin(auth_client)
    await auth_client.post("/settings/tokens", data={"name": "", "ttl_hours": "x"})
    await auth_client.post("/settings/tokens", data={"name": "t", "ttl_hours": ""})
    await auth_client.get("/settings/tokens")
    await auth_client.post("/settings/agents", data={"name": "a", "command": "no-such-x"})
    created = await auth_client.post(
        "/settings/agents", data={"name": "b", "command": sys.executable, "env": "K=v"}
    )
    assert created.status_code == 303
    profiles = (await auth_client.get("/api/v1/agent-profiles")).json()["agent_profiles"]
    mine = next(p for p in profiles if p["name"] == "b")
    await auth_client.post(f"/settings/agents/{mine['id']}", data={"name": "", "command": "x"})
    demo = next(p for p in profiles if p["name"] == "demo")
    await auth_client.post(f"/settings/agents/{demo['id']}/delete")
    await auth_client.get("/settings/mcp")
    asked = await ask(auth_client, "Ctx", "A task")
    await auth_client.get("/inbox")
    await auth_client.post(f"/inbox/{asked['pending_id']}/answer", data={"action": "submit"})
    await auth_client.get("/inbox/list", headers={"HX-Request": "true"})
    await auth_client.get("/inbox/count", headers={"HX-Request": "true"})
    auth_client.cookies.clear()
    await auth_client.post("/login", data={"email": "x@example.com", "password": "nope"})

    expected = {
        "login.html": pages_account.SignInPage,
        "settings/tokens.html": pages_account.TokensPage,
        "settings/agents.html": pages_account.AgentsPage,
        "settings/mcp.html": pages_account.McpPage,
        "inbox.html": pages_inbox.InboxPage,
        "partials/_inbox_list.html": pages_inbox.InboxPage,
        "partials/inbox_count.html": pages_inbox.InboxCount,
    }
    assert kinds == expected
    for template, cls in expected.items():
        fields = {f.name for f in dataclasses.fields(cls)}
        if template == "partials/_inbox_list.html":
            fields -= {"error"}  # the list alone never shows the form error
        assert read[template] == fields, (template, fields ^ read[template])


async def test_a_failing_count_does_not_break_the_page(client, monkeypatch) -> None:
    from kandev.errors import KandevError

    async def broken(**_: object) -> dict:
        raise KandevError("Failed to list pending questions")

    monkeypatch.setattr(client.services.clarifications, "list_pending", broken)  # type: ignore[attr-defined]
    r = await client.get("/settings/mcp")
    assert r.status_code == 200
    badge = soup(r).select_one("#inbox-badge")
    assert badge.has_attr("hidden") and badge["data-count"] == ""
