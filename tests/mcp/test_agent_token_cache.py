"""Agent-token principals are cached in the server (no database lookup per agent MCP
request) and refused on the very next request once revoked — over a real uvicorn with the
official MCP client, on both databases."""

from __future__ import annotations

from contextlib import AbstractContextManager

import anyio
import httpx
import pytest

from kandev.clock import ManualClock
from kandev.db.engine import Database
from kandev.mcp.auth import AGENT_UNAUTHORIZED
from kandev.services import Services
from tests.mcp.conftest import (
    agent_token,
    bearer_client,
    board,
    mcp_client,
    ok,
    raw_post,
    two_users,
)
from tests.statement_counter import selects_from


def token_lookups(db: Database) -> AbstractContextManager[list[str]]:
    """The statements that read the agent_tokens table, as they run (any thread)."""
    return selects_from(db, "agent_tokens")


def assert_401(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json() == {"error": AGENT_UNAUTHORIZED}


@pytest.mark.parametrize("auth", [False, True])
async def test_agent_token_is_looked_up_once_and_refused_right_after_revoke(
    mcp_server_factory, database_url: str, clock: ManualClock, auth: bool
) -> None:
    server = mcp_server_factory(database_url, clock=clock, auth=auth)
    pat = (await two_users(server.url))[0] if auth else None
    http = bearer_client(server.url, pat) if pat else httpx.AsyncClient(base_url=server.url)
    async with http:
        b = await board(http)
        session_id, creds = await agent_token(http, b["task"]["id"])
        with token_lookups(server.services.db) as lookups:
            async with mcp_client(creds["mcp_url"], creds["token"]) as agent:
                for _ in range(5):
                    listed = ok(
                        await agent.call_tool(
                            "list_task_sessions_kandev", {"task_id": b["task"]["id"]}
                        )
                    )
                    assert [s["id"] for s in listed["sessions"]] == [session_id]
                # initialize, initialized, 5 calls (each an HTTP request): one lookup.
                assert len(lookups) == 1

                r = await http.post(f"/api/v1/sessions/{session_id}/stop", json={})
                assert r.status_code == 200, r.text
                # The very next request, on the same open MCP session, is refused.
                with pytest.raises(Exception):  # noqa: B017
                    with anyio.fail_after(30):
                        await agent.call_tool("list_workspaces_kandev", {})
    assert_401(await raw_post(creds["mcp_url"], {"Authorization": f"Bearer {creds['token']}"}))


async def seeded_token(services: Services) -> tuple[str, str, str]:
    """A workspace, task and live session made through the services; its agent token."""
    from tests.prompted import new_session

    task_id, session_id = await new_session(services)
    creds = await services.sessions.create_agent_token(session_id)
    return task_id, session_id, creds["token"]


async def test_a_lookup_racing_the_revoking_transaction_is_not_cached(
    services: Services,
) -> None:
    tokens = services.agent_tokens
    _, session_id, raw = await seeded_token(services)
    assert await tokens.resolve(raw) is not None  # cached now

    async with services.db.write() as conn:
        assert await tokens.revoke_for_session(conn, session_id) == 1
        # Not committed yet: the database still says live, but it must not be cached again.
        async with anyio.create_task_group() as tg:
            seen: list[object] = []

            async def look_up() -> None:
                seen.append(await tokens.resolve(raw))

            tg.start_soon(look_up)
        assert len(seen) == 1
    assert await tokens.resolve(raw) is None


async def test_session_end_forgets_its_principals(services: Services) -> None:
    tokens = services.agent_tokens
    _, session_id, raw = await seeded_token(services)
    principal = await tokens.resolve(raw)
    assert principal is not None and principal.session_id == session_id

    await services.orchestrator.stop_session(session_id)

    assert await tokens.resolve(raw) is None
