"""MCP authentication and scoping over a real server: PATs on /mcp, agent tokens on
/agent/mcp, each caller seeing exactly what REST would show it."""

from __future__ import annotations

import httpx
import pytest

from kandev.auth.middleware import INVALID_CREDENTIALS
from kandev.clock import ManualClock
from kandev.mcp.auth import AGENT_UNAUTHORIZED, EXTERNAL_UNAUTHORIZED
from tests.mcp.conftest import (
    PASSWORD,
    agent_token,
    bearer_client,
    board,
    mcp_client,
    ok,
    raw_post,
    tool_error,
    two_users,
)

FAKE_PAT = "kandev_pat_deadbeef_" + "x" * 40
FAKE_AGENT = "kandev_agent_deadbeef_" + "x" * 40


def assert_401(response: httpx.Response, message: str) -> None:
    assert response.status_code == 401, response.text
    assert response.json() == {"error": message}
    assert response.headers["www-authenticate"] == "Bearer"


async def test_external_requires_a_valid_pat(
    mcp_server_factory, database_url: str, clock: ManualClock
):
    server = mcp_server_factory(database_url, clock=clock, auth=True)
    alice_pat, _ = await two_users(server.url)
    for url in (server.external_url, server.external_url + "/"):
        assert_401(await raw_post(url), EXTERNAL_UNAUTHORIZED)
        for header in (
            f"Bearer {FAKE_PAT}",
            "Bearer garbage",
            "Bearer",
            f"Basic {alice_pat}",
            f"Bearer {FAKE_AGENT}",
        ):
            assert_401(await raw_post(url, {"Authorization": header}), INVALID_CREDENTIALS)
        # The official client is refused before any MCP exchange.
        with pytest.raises(Exception):  # noqa: B017 - the transport's error type is the SDK's
            async with mcp_client(url, FAKE_PAT) as client:
                await client.list_tools()
        r = await raw_post(url, {"Authorization": f"Bearer {alice_pat}"})
        assert r.status_code == 200, r.text

    # A revoked PAT stops working at once.
    async with bearer_client(server.url, alice_pat) as alice:
        r = await alice.post("/api/v1/auth/tokens", json={"name": "short-lived"})
        short = r.json()
    async with mcp_client(server.external_url, short["token"]) as client:
        ok(await client.call_tool("list_workspaces_kandev", {}))
    async with bearer_client(server.url, alice_pat) as alice:
        r = await alice.delete(f"/api/v1/auth/tokens/{short['record']['id']}")
        assert r.status_code == 204
    assert_401(
        await raw_post(server.external_url, {"Authorization": f"Bearer {short['token']}"}),
        INVALID_CREDENTIALS,
    )


async def test_external_pat_is_scoped_like_rest(
    mcp_server_factory, database_url: str, clock: ManualClock
):
    server = mcp_server_factory(database_url, clock=clock, auth=True)
    alice_pat, bob_pat = await two_users(server.url)
    async with (
        bearer_client(server.url, alice_pat) as alice,
        bearer_client(server.url, bob_pat) as bob,
    ):
        a = await board(alice, "Alice's")
        b = await board(bob, "Bob's")
        r = await alice.post(f"/api/v1/tasks/{a['task']['id']}/sessions", json={"prompt": "hi"})
        assert r.status_code == 201
    assert a["workspace"]["owner_id"] != b["workspace"]["owner_id"]

    async with mcp_client(server.external_url, bob_pat) as c:
        workspaces = ok(await c.call_tool("list_workspaces_kandev", {}))["workspaces"]
        assert [w["id"] for w in workspaces] == [b["workspace"]["id"]]
        tasks = ok(await c.call_tool("list_tasks_kandev", {}))["tasks"]
        assert [t["id"] for t in tasks] == [b["task"]["id"]]
        flows = ok(await c.call_tool("list_workflows_kandev", {}))["workflows"]
        assert [f["id"] for f in flows] == [b["workflow"]["id"]]

        foreign = tool_error(
            await c.call_tool("get_task_conversation_kandev", {"task_id": a["task"]["id"]})
        )
        fabricated = tool_error(
            await c.call_tool("get_task_conversation_kandev", {"task_id": "fabricated"})
        )
        assert foreign["code"] == "NOT_FOUND"
        assert foreign == fabricated
        for name, arguments in [
            ("list_task_sessions_kandev", {"task_id": a["task"]["id"]}),
            ("list_workflow_steps_kandev", {"workflow_id": a["workflow"]["id"]}),
            ("list_tasks_kandev", {"workspace_id": a["workspace"]["id"]}),
            (
                "create_task_kandev",
                {
                    "workspace_id": a["workspace"]["id"],
                    "workflow_id": a["workflow"]["id"],
                    "title": "sneaky",
                },
            ),
        ]:
            assert tool_error(await c.call_tool(name, arguments))["code"] == "NOT_FOUND", name
        mine = ok(
            await c.call_tool(
                "create_task_kandev",
                {
                    "workspace_id": b["workspace"]["id"],
                    "workflow_id": b["workflow"]["id"],
                    "title": "Bob via MCP",
                },
            )
        )
        assert mine["task"]["workspace_id"] == b["workspace"]["id"]

    async with mcp_client(server.external_url, alice_pat) as c:
        workspaces = ok(await c.call_tool("list_workspaces_kandev", {}))["workspaces"]
        assert [w["id"] for w in workspaces] == [a["workspace"]["id"]]
        conversation = ok(
            await c.call_tool("get_task_conversation_kandev", {"task_id": a["task"]["id"]})
        )
        assert [m["content"] for m in conversation["messages"]] == ["hi"]


async def test_external_accepts_a_browser_session(mcp_server_factory, sqlite_url: str, clock):
    server = mcp_server_factory(sqlite_url, clock=clock, auth=True)
    await two_users(server.url)
    async with httpx.AsyncClient(base_url=server.url) as browser:
        r = await browser.post(
            "/api/v1/auth/login", json={"email": "alice@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200
        cookie = browser.cookies["kandev_session"]
        await board(browser, "Alice's")
    async with mcp_client(server.external_url, cookies={"kandev_session": cookie}) as c:
        assert len(ok(await c.call_tool("list_workspaces_kandev", {}))["workspaces"]) == 1
    assert_401(
        await raw_post(server.external_url, {"Cookie": "kandev_session=forged"}),
        INVALID_CREDENTIALS,
    )


@pytest.mark.parametrize("auth", [False, True])
async def test_agent_endpoint_requires_a_live_agent_token(
    mcp_server_factory, database_url: str, clock: ManualClock, auth: bool
):
    server = mcp_server_factory(database_url, clock=clock, auth=auth)
    pat = (await two_users(server.url))[0] if auth else None
    http = bearer_client(server.url, pat) if pat else httpx.AsyncClient(base_url=server.url)
    async with http:
        b = await board(http)
        session_id, creds = await agent_token(http, b["task"]["id"])

        url = creds["mcp_url"]
        assert_401(await raw_post(url), AGENT_UNAUTHORIZED)
        for header in (
            "Bearer garbage",
            f"Bearer {FAKE_AGENT}",
            f"Bearer {FAKE_PAT}",
            f"Basic {creds['token']}",
        ):
            assert_401(await raw_post(url, {"Authorization": header}), AGENT_UNAUTHORIZED)
        if pat:
            assert_401(await raw_post(url, {"Authorization": f"Bearer {pat}"}), AGENT_UNAUTHORIZED)

        async with mcp_client(url, creds["token"]) as agent:
            sessions = ok(
                await agent.call_tool("list_task_sessions_kandev", {"task_id": b["task"]["id"]})
            )
            assert [s["id"] for s in sessions["sessions"]] == [session_id]

        r = await http.post(f"/api/v1/sessions/{session_id}/stop", json={})
        assert r.status_code == 200, r.text
    assert_401(
        await raw_post(url, {"Authorization": f"Bearer {creds['token']}"}), AGENT_UNAUTHORIZED
    )
    with pytest.raises(Exception):  # noqa: B017
        async with mcp_client(url, creds["token"]) as agent:
            await agent.list_tools()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_agent_acts_as_the_workspace_owner(
    mcp_server_factory, database_url: str, clock: ManualClock, mode: str
):
    server = mcp_server_factory(database_url, clock=clock, auth=True)
    alice_pat, bob_pat = await two_users(server.url)
    async with (
        bearer_client(server.url, alice_pat) as alice,
        bearer_client(server.url, bob_pat) as bob,
    ):
        a = await board(alice, "Alice's")
        b = await board(bob, "Bob's")
        session_id, creds = await agent_token(alice, a["task"]["id"])

        async with mcp_client(creds["mcp_url"], creds["token"], mode=mode) as agent:
            workspaces = ok(await agent.call_tool("list_workspaces_kandev", {}))["workspaces"]
            assert [w["id"] for w in workspaces] == [a["workspace"]["id"]]
            assert [
                t["id"] for t in ok(await agent.call_tool("list_tasks_kandev", {}))["tasks"]
            ] == [a["task"]["id"]]
            foreign = tool_error(
                await agent.call_tool("get_task_conversation_kandev", {"task_id": b["task"]["id"]})
            )
            assert foreign["code"] == "NOT_FOUND"
            assert foreign == tool_error(
                await agent.call_tool("get_task_conversation_kandev", {"task_id": "fabricated"})
            )
            own = ok(
                await agent.call_tool("get_task_conversation_kandev", {"task_id": a["task"]["id"]})
            )
            assert own["session_id"] == session_id
            created = ok(
                await agent.call_tool(
                    "create_task_kandev",
                    {
                        "workspace_id": a["workspace"]["id"],
                        "workflow_id": a["workflow"]["id"],
                        "title": "follow-up",
                    },
                )
            )["task"]
            refused = tool_error(
                await agent.call_tool(
                    "create_task_kandev",
                    {
                        "workspace_id": b["workspace"]["id"],
                        "workflow_id": b["workflow"]["id"],
                        "title": "into Bob's",
                    },
                )
            )
            assert refused["code"] == "NOT_FOUND"

        # The agent's task is Alice's: she sees it, Bob does not.
        assert (await alice.get(f"/api/v1/tasks/{created['id']}")).status_code == 200
        assert (await bob.get(f"/api/v1/tasks/{created['id']}")).status_code == 404

        r = await alice.post(f"/api/v1/sessions/{session_id}/stop", json={})
        assert r.status_code == 200, r.text
    assert_401(
        await raw_post(creds["mcp_url"], {"Authorization": f"Bearer {creds['token']}"}),
        AGENT_UNAUTHORIZED,
    )
