"""GET /api/v1/clarification and pending_clarification_id (CONTRACT §12, issue 14.1).

The REST list is list_pending_questions_kandev by the same code: same envelope, order,
visibility and validation errors, for the same caller.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.mcp.conftest import (
    agent_token,
    bearer_client,
    board,
    mcp_client,
    ok,
    tool_error,
    two_users,
)

QUESTIONS = [
    {
        "id": "pick",
        "prompt": "Pick some",
        "options": [
            {"option_id": "a", "label": "Alpha", "description": "first"},
            {"option_id": "b", "label": "Beta", "description": "second"},
        ],
    }
]
LIST = "/api/v1/clarification"


async def _question(http: httpx.AsyncClient, task_id: str) -> tuple[str, str]:
    """An open question on a new session of the task; (session_id, pending_id)."""
    sid, _ = await agent_token(http, task_id)
    await http.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "go"})
    r = await http.post(LIST + "/request", json={"session_id": sid, "questions": QUESTIONS})
    assert r.status_code == 200, r.text
    return sid, r.json()["pending_id"]


def _timeless(envelope: dict[str, Any]) -> dict[str, Any]:
    """age_seconds follows the server clock between two calls; everything else must match."""
    return {
        **envelope,
        "bundles": [
            {k: v for k, v in b.items() if k != "age_seconds"} for b in envelope["bundles"]
        ],
    }


async def _both(http: httpx.AsyncClient, mcp: Any, params: dict[str, Any]) -> dict[str, Any]:
    r = await http.get(LIST, params=params)
    assert r.status_code == 200, r.text
    via_mcp = ok(await mcp.call_tool("list_pending_questions_kandev", params))
    assert _timeless(r.json()) == _timeless(via_mcp), params
    return r.json()


async def test_rest_list_equals_the_mcp_tool_per_caller(mcp_server_factory, database_url) -> None:
    server = mcp_server_factory(database_url, auth=True)
    alice_pat, bob_pat = await two_users(server.url)
    async with (
        bearer_client(server.url, alice_pat) as alice,
        bearer_client(server.url, bob_pat) as bob,
        mcp_client(server.external_url, alice_pat) as alice_mcp,
        mcp_client(server.external_url, bob_pat) as bob_mcp,
    ):
        alice_board = await board(alice, "Alice")
        bob_board = await board(bob, "Bob")
        alice_ids = [(await _question(alice, alice_board["task"]["id"]))[1] for _ in range(3)]
        _, bob_id = await _question(bob, bob_board["task"]["id"])

        # Bob sees his own bundle, never Alice's: scoping is the tool's.
        mine = await _both(bob, bob_mcp, {})
        assert [b["pending_id"] for b in mine["bundles"]] == [bob_id]
        assert set(mine) == {"bundles", "count", "next_cursor"}
        assert mine["count"] == 1 and mine["next_cursor"] == ""
        bundle = mine["bundles"][0]
        assert bundle["task_id"] == bob_board["task"]["id"]
        assert bundle["questions"][0]["options"][0] == {
            "option_id": "a",
            "label": "Alpha",
            "description": "first",
        }
        # Filtering on a workspace he cannot see is an empty list, not an error (L7).
        hidden = await _both(bob, bob_mcp, {"workspace_id": alice_board["workspace"]["id"]})
        assert hidden == {"bundles": [], "count": 0, "next_cursor": ""}

        # Alice, oldest first, one page at a time: the same pages and cursors on both.
        everything = await _both(alice, alice_mcp, {"workspace_id": alice_board["workspace"]["id"]})
        assert [b["pending_id"] for b in everything["bundles"]] == alice_ids
        seen: list[str] = []
        params: dict[str, Any] = {"limit": 2, "workspace_id": alice_board["workspace"]["id"]}
        while True:
            page = await _both(alice, alice_mcp, params)
            seen += [b["pending_id"] for b in page["bundles"]]
            if not page["next_cursor"]:
                break
            params = {**params, "cursor": page["next_cursor"]}
        assert seen == alice_ids
        since = everything["bundles"][1]["created_at"]
        await _both(alice, alice_mcp, {"created_since": since})
        unfiltered = await _both(alice, alice_mcp, {})
        assert set(alice_ids) <= {b["pending_id"] for b in unfiltered["bundles"]}

        # An answered bundle leaves both lists at once.
        r = await alice.post(
            f"{LIST}/{alice_ids[0]}/respond",
            json={"answers": [{"question_id": "pick", "selected_options": ["a"]}]},
        )
        assert r.status_code == 200, r.text
        after = await _both(alice, alice_mcp, {"workspace_id": alice_board["workspace"]["id"]})
        assert [b["pending_id"] for b in after["bundles"]] == alice_ids[1:]

    # Without a token the REST list is refused like every other route.
    async with httpx.AsyncClient(base_url=server.url) as anonymous:
        assert (await anonymous.get(LIST)).status_code == 401


async def test_bad_parameters_are_400_naming_the_field(mcp_server_factory, sqlite_url) -> None:
    server = mcp_server_factory(sqlite_url)
    async with (
        httpx.AsyncClient(base_url=server.url) as http,
        mcp_client(server.external_url) as external,
    ):
        for params, field in (
            ({"created_since": "yesterday"}, "created_since"),
            ({"created_since": "2026-01-01"}, "created_since"),
            ({"cursor": "not a cursor!"}, "cursor"),
            ({"cursor": "bm9wZQ"}, "cursor"),  # valid base64, not a cursor
            ({"cursor": "x", "created_since": "2026-01-01T00:00:00Z"}, "cursor"),
            ({"workspace_id": "w" * 65}, "workspace_id"),
        ):
            r = await http.get(LIST, params=params)
            assert r.status_code == 400, (params, r.text)
            assert r.json()["error"].startswith(f"{field}:"), (params, r.text)
            error = tool_error(await external.call_tool("list_pending_questions_kandev", params))
            assert error["code"] == "VALIDATION_ERROR"
            if field != "workspace_id":  # over-long strings: pydantic's text on both sides
                assert error["message"] == r.json()["error"], params
        r = await http.get(LIST, params={"limit": "many"})
        assert r.status_code == 400 and r.json()["error"].startswith("limit:"), r.text
        # limit is clamped, never rejected (L10), as the tool does.
        for limit in ("0", "-3", "1000", "7"):
            r = await http.get(LIST, params={"limit": limit})
            assert r.status_code == 200, r.text
            assert r.json() == {"bundles": [], "count": 0, "next_cursor": ""}


async def test_pending_clarification_id_on_sessions_and_tasks(
    mcp_server_factory, database_url
) -> None:
    server = mcp_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        task_id, workspace_id = b["task"]["id"], b["workspace"]["id"]
        other = (await http.post("/api/v1/tasks", json={**_task_body(b), "title": "Other"})).json()

        async def ids(session_id: str) -> tuple[Any, Any, dict[str, Any]]:
            session = (await http.get(f"/api/v1/sessions/{session_id}")).json()
            task = (await http.get(f"/api/v1/tasks/{task_id}")).json()
            listed = (await http.get("/api/v1/tasks", params={"workspace_id": workspace_id})).json()
            by_id = {t["id"]: t["pending_clarification_id"] for t in listed["tasks"]}
            return session["pending_clarification_id"], task["pending_clarification_id"], by_id

        assert b["task"]["pending_clarification_id"] is None  # the key is always there
        sid, _ = await agent_token(http, task_id)
        assert await ids(sid) == (None, None, {task_id: None, other["id"]: None})
        await http.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "go"})
        r = await http.post(LIST + "/request", json={"session_id": sid, "questions": QUESTIONS})
        pending_id = r.json()["pending_id"]
        assert await ids(sid) == (pending_id, pending_id, {task_id: pending_id, other["id"]: None})
        sessions = (await http.get(f"/api/v1/tasks/{task_id}/sessions")).json()["sessions"]
        assert [s["pending_clarification_id"] for s in sessions] == [pending_id]
        # The id the task carries is the one the list shows and the answer takes.
        listed = (await http.get(LIST, params={"workspace_id": workspace_id})).json()
        assert [x["pending_id"] for x in listed["bundles"]] == [pending_id]

        r = await http.post(
            f"{LIST}/{pending_id}/respond",
            json={"answers": [{"question_id": "pick", "custom_text": "done"}]},
        )
        assert r.status_code == 200 and r.json()["claimed"] is True, r.text
        assert await ids(sid) == (None, None, {task_id: None, other["id"]: None})


def _task_body(b: dict[str, Any]) -> dict[str, Any]:
    return {"workspace_id": b["workspace"]["id"], "workflow_id": b["workflow"]["id"]}


async def test_pending_clarification_id_of_an_idle_session_without_a_managed_agent(
    mcp_server_factory, sqlite_url
) -> None:
    """Issue 14 trial: a BYO session (no agent profile, state IDLE) asked over REST and over
    MCP: the list shows the bundle, so the session and the task carry its pending_id."""
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        task_id, workspace_id = b["task"]["id"], b["workspace"]["id"]
        sid, _token = await agent_token(http, task_id)
        r = await http.post(LIST + "/request", json={"session_id": sid, "questions": QUESTIONS})
        assert r.status_code == 200, r.text
        pending_id = r.json()["pending_id"]
        listed = (await http.get(LIST, params={"workspace_id": workspace_id})).json()
        assert [x["pending_id"] for x in listed["bundles"]] == [pending_id]
        session = (await http.get(f"/api/v1/sessions/{sid}")).json()
        task = (await http.get(f"/api/v1/tasks/{task_id}")).json()
        assert (session["pending_clarification_id"], task["pending_clarification_id"]) == (
            pending_id,
            pending_id,
        ), (session["state"], task["task_pending_action"])
