"""Transport behaviour the next tools rely on: progress notifications during a blocking call
(both protocol eras), the caller's identity reaching handlers through the SDK's task
structure, the stateless legacy transport, and DNS-rebinding protection."""

from __future__ import annotations

import threading
from typing import Any

import anyio.to_thread
import httpx
import pytest
from mcp.server.mcpserver import Context

from kandev.auth.identity import current_identity
from kandev.mcp.context import current_agent
from tests.mcp.conftest import agent_token, bearer_client, board, mcp_client, raw_post, two_users


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_blocking_tool_streams_progress_and_sees_its_caller(
    mcp_server_factory, sqlite_url: str, clock, mode: str
):
    server = mcp_server_factory(sqlite_url, clock=clock, auth=True)
    alice_pat, _ = await two_users(server.url)
    async with bearer_client(server.url, alice_pat) as alice:
        alice_id = (await alice.get("/api/v1/auth/me")).json()["user"]["id"]
        b = await board(alice)
        session_id, creds = await agent_token(alice, b["task"]["id"])

    client_saw_progress = threading.Event()

    # A raw SDK tool (not through Kandev's runner): it sees only what the auth gate's
    # contextvars carried into the handler task, and it cannot finish until the client has
    # received its first progress notification.
    async def probe(ctx: Context) -> dict[str, Any]:
        identity, agent = current_identity(), current_agent()
        await ctx.report_progress(1, 2, "waiting for the client")
        delivered = await anyio.to_thread.run_sync(client_saw_progress.wait, 30)
        await ctx.report_progress(2, 2, "done")
        return {
            "user_id": identity.user_id if identity else None,
            "session_id": agent.session_id if agent else None,
            "task_id": agent.task_id if agent else None,
            "delivered": delivered,
        }

    server.app.state.mcp.agent.add_tool(probe, name="probe_progress_test")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))
        client_saw_progress.set()

    async with mcp_client(creds["mcp_url"], creds["token"], mode=mode) as agent:
        result = await agent.call_tool("probe_progress_test", {}, progress_callback=on_progress)
    assert not result.is_error, result.content
    assert result.structured_content == {
        "user_id": alice_id,
        "session_id": session_id,
        "task_id": b["task"]["id"],
        "delivered": True,
    }
    assert progress == [(1, 2, "waiting for the client"), (2, 2, "done")]


async def test_legacy_transport_is_stateless(mcp_server_factory, sqlite_url: str, clock):
    server = mcp_server_factory(sqlite_url, clock=clock)
    r = await raw_post(server.external_url)
    assert r.status_code == 200, r.text
    assert "mcp-session-id" not in r.headers


async def test_dns_rebinding_protection(mcp_server_factory, sqlite_url: str, clock):
    server = mcp_server_factory(sqlite_url, clock=clock)
    port = server.port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        r = await raw_post(server.external_url, {"Host": host})
        assert r.status_code == 200, (host, r.text)
    r = await raw_post(server.external_url, {"Host": f"evil.example:{port}"})
    assert r.status_code == 421
    r = await raw_post(server.external_url, {"Origin": "http://evil.example"})
    assert r.status_code == 403
    r = await raw_post(server.external_url, {"Origin": f"http://localhost:{port}"})
    assert r.status_code == 200


async def test_public_url_host_is_allowed(mcp_server_factory, sqlite_url: str, clock):
    server = mcp_server_factory(sqlite_url, clock=clock, public_url="https://kandev.example.com")
    r = await raw_post(server.external_url, {"Host": "kandev.example.com"})
    assert r.status_code == 200, r.text
    r = await raw_post(
        server.external_url,
        {"Host": "kandev.example.com", "Origin": "https://kandev.example.com"},
    )
    assert r.status_code == 200, r.text
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        _, creds = await agent_token(http, b["task"]["id"])
    assert creds["mcp_url"] == "https://kandev.example.com/agent/mcp/"
    # The same server still answers on loopback.
    async with mcp_client(server.agent_url, creds["token"]) as agent:
        assert len((await agent.list_tools()).tools) == 9  # 8 shared tools + the ask tool
