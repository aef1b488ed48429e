"""Agents ask permission, people decide — a real ACP agent subprocess (the scripted agent's
`session/request_permission`), a real uvicorn, REST, the external MCP endpoint and the CLI
(issue 11, CONTRACT §11)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import anyio
import httpx
from typer.testing import CliRunner

from kandev.cli import app
from tests.e2e.board_helpers import SCRIPTED_AGENT, make_task, messages
from tests.mcp.conftest import mcp_client, ok, tool_error
from tests.sse_client import SseStream, of_type, sse_stream

PASSWORD = "correct horse battery"


def _is_permission(event: Any) -> bool:
    return (
        event.type == "session.message.added"
        and event.data["message"]["type"] == "permission_request"
    )


async def _profile(client: httpx.AsyncClient, name: str = "scripted", **policy: Any) -> dict:
    r = await client.post(
        "/api/v1/agent-profiles",
        json={"name": name, "command": [sys.executable, SCRIPTED_AGENT], **policy},
    )
    assert r.status_code == 201, r.text
    return r.json()


async def _start(
    client: httpx.AsyncClient, task: dict, prompt: str, profile: dict | None = None
) -> str:
    profile = profile or await _profile(client)
    r = await client.post(
        f"/api/v1/tasks/{task['id']}/sessions",
        json={"agent_profile_id": profile["id"], "prompt": prompt},
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def _ask(
    client: httpx.AsyncClient, events: SseStream, task: dict, prompt: str = "permission"
) -> tuple[str, str, dict]:
    """A session whose agent is blocked on a permission request: (session, pending, message)."""
    sid = await _start(client, task, prompt)
    asked = await events.wait_for(_is_permission)
    await events.wait_for(of_type("session.state_changed", state="WAITING_FOR_INPUT"))
    message = asked.data["message"]
    return sid, message["metadata"]["pending_id"], message


async def _reply(client: httpx.AsyncClient, sid: str) -> str:
    return [m for m in await messages(client, sid) if m["author_type"] == "agent"][-1]["content"]


async def test_ask_is_visible_everywhere_and_a_rest_answer_reaches_the_agent(
    live_server_factory, database_url
) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid, pending_id, message = await _ask(client, events, task, "permission execute ls -la")
            meta = message["metadata"]
            assert meta["status"] == "pending" and message["requests_input"] is True
            assert meta["tool_call"] == {
                "tool_call_id": "call-p",
                "title": "Edit a file",
                "kind": "execute",
                "raw_input": {"command": "ls -la"},
            }
            assert meta["options"] == [
                {"option_id": "no", "name": "Reject", "kind": "reject_once"},
                {"option_id": "yes", "name": "Allow", "kind": "allow_once"},
            ]
            # The pending action, on the session and the task JSON.
            session = (await client.get(f"/api/v1/sessions/{sid}")).json()
            assert (session["state"], session["pending_action"]) == (
                "WAITING_FOR_INPUT",
                "permission",
            )
            shown = (await client.get(f"/api/v1/tasks/{task['id']}")).json()
            assert shown["task_pending_action"] == "permission"
            assert shown["primary_session_pending_action"] == "permission"
            # The REST list and the MCP list.
            listed = (await client.get("/api/v1/permissions")).json()
            assert listed["count"] == 1 and listed["next_cursor"] == ""
            [item] = listed["permissions"]
            assert item["pending_id"] == pending_id
            assert (item["task_id"], item["session_id"]) == (task["id"], sid)
            assert item["tool_call"]["raw_input"] == {"command": "ls -la"}
            assert [o["option_id"] for o in item["options"]] == ["no", "yes"]
            assert item["age_seconds"] >= 0 and item["created_at"]
            async with mcp_client(f"{server.url}/mcp") as mcp:
                via_mcp = ok(await mcp.call_tool("list_pending_permissions_kandev", {}))
            [mcp_item] = via_mcp["permissions"]  # the same list, by the same code
            assert {**mcp_item, "age_seconds": 0} == {**item, "age_seconds": 0}
            # Validated before the claim: an option it does not offer is a 400 naming it.
            bad = await client.post(
                f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "maybe"}
            )
            assert bad.status_code == 400 and "option_id" in bad.json()["error"]
            missing = await client.post("/api/v1/permissions/nope/respond", json={"option_id": "y"})
            assert missing.status_code == 404

            r = await client.post(
                f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "yes"}
            )
            assert r.status_code == 200, r.text
            assert r.json() == {
                "pending_id": pending_id,
                "claimed": True,
                "status": "allowed",
                "option_id": "yes",
            }
            await events.wait_for(of_type("session.state_changed", state="RUNNING"))
            await events.wait_for(of_type("session.turn.completed"))
        assert await _reply(client, sid) == "permission: yes"
        row = next(m for m in await messages(client, sid) if m["type"] == "permission_request")
        assert row["metadata"]["status"] == "allowed"
        assert row["metadata"]["decision"]["option_id"] == "yes"
        assert row["metadata"]["decision"]["via"] == "rest"
        # A late answer is told the winner's decision; nothing changes.
        late = await client.post(
            f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "no"}
        )
        assert late.status_code == 200
        assert (late.json()["claimed"], late.json()["status"], late.json()["option_id"]) == (
            False,
            "allowed",
            "yes",
        )
        assert (await client.get("/api/v1/permissions")).json()["count"] == 0
        session = (await client.get(f"/api/v1/sessions/{sid}")).json()
        assert session["pending_action"] is None


async def test_answered_over_mcp(live_server_factory, sqlite_url) -> None:
    server = live_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid, pending_id, _ = await _ask(client, events, task)
            async with mcp_client(f"{server.url}/mcp") as mcp:
                listed = ok(await mcp.call_tool("list_pending_permissions_kandev", {}))
                assert [p["pending_id"] for p in listed["permissions"]] == [pending_id]
                bad = tool_error(
                    await mcp.call_tool(
                        "answer_permission_kandev", {"pending_id": pending_id, "option_id": "x"}
                    )
                )
                assert bad["code"] == "VALIDATION_ERROR"
                won = ok(
                    await mcp.call_tool(
                        "answer_permission_kandev", {"pending_id": pending_id, "option_id": "no"}
                    )
                )
            assert (won["claimed"], won["status"], won["option_id"]) == (True, "rejected", "no")
            await events.wait_for(of_type("session.turn.completed"))
        assert await _reply(client, sid) == "permission: no"


async def test_answered_from_the_terminal(live_server_factory, sqlite_url) -> None:
    server = live_server_factory(sqlite_url)
    runner = CliRunner()
    env = {"KANDEV_URL": server.url, "KANDEV_TOKEN": ""}

    def cli(*args: str):
        return runner.invoke(app, ["permissions", *args], env=env)

    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid, pending_id, _ = await _ask(client, events, task, "permission execute make test")
            listed = await anyio.to_thread.run_sync(cli, "list")
            assert listed.exit_code == 0, listed.output
            assert pending_id in listed.output and "make test" in listed.output
            as_json = await anyio.to_thread.run_sync(cli, "list", "--json")
            assert [p["pending_id"] for p in json.loads(as_json.output)] == [pending_id]
            wrong = await anyio.to_thread.run_sync(cli, "answer", pending_id, "maybe")
            assert wrong.exit_code == 1 and "option_id" in wrong.output
            answered = await anyio.to_thread.run_sync(cli, "answer", pending_id, "yes")
            assert answered.exit_code == 0, answered.output
            assert "Allowed (yes)" in answered.output
            await events.wait_for(of_type("session.turn.completed"))
        assert await _reply(client, sid) == "permission: yes"
        row = next(m for m in await messages(client, sid) if m["type"] == "permission_request")
        assert row["metadata"]["decision"]["via"] == "cli"
        again = await anyio.to_thread.run_sync(cli, "answer", pending_id, "no", "--json")
        assert again.exit_code == 0, again.output
        assert json.loads(again.output)["claimed"] is False
        unknown = await anyio.to_thread.run_sync(cli, "answer", "no-such-id", "yes")
        assert unknown.exit_code == 1 and "not found" in unknown.output


async def test_rest_and_mcp_race_has_exactly_one_winner(live_server_factory, database_url) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid, pending_id, _ = await _ask(client, events, task)
            async with mcp_client(f"{server.url}/mcp") as mcp:

                async def by_rest() -> dict:
                    r = await client.post(
                        f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "yes"}
                    )
                    assert r.status_code == 200, r.text
                    return r.json()

                async def by_mcp() -> dict:
                    return ok(
                        await mcp.call_tool(
                            "answer_permission_kandev",
                            {"pending_id": pending_id, "option_id": "no"},
                        )
                    )

                rest, via_mcp = await asyncio.gather(by_rest(), by_mcp())
            await events.wait_for(of_type("session.turn.completed"))
        results = [rest, via_mcp]
        assert sorted(r["claimed"] for r in results) == [False, True]
        winner = next(r for r in results if r["claimed"])
        loser = next(r for r in results if not r["claimed"])
        assert (loser["status"], loser["option_id"]) == (winner["status"], winner["option_id"])
        assert await _reply(client, sid) == f"permission: {winner['option_id']}"


async def test_foreign_ids_are_a_fabricated_404_with_auth_on(
    live_server_factory, sqlite_url
) -> None:
    server = live_server_factory(sqlite_url, auth=True)
    async with httpx.AsyncClient(base_url=server.url) as browser:
        r = await browser.post(
            "/api/v1/auth/setup", json={"email": "alice@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        r = await browser.post(
            "/api/v1/users", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 201, r.text
        alice_pat = (await browser.post("/api/v1/auth/tokens", json={"name": "a"})).json()["token"]
    async with httpx.AsyncClient(base_url=server.url) as browser:
        r = await browser.post(
            "/api/v1/auth/login", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        bob_pat = (await browser.post("/api/v1/auth/tokens", json={"name": "b"})).json()["token"]
    alice = httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {alice_pat}"})
    bob = httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {bob_pat}"})
    async with alice, bob:
        task = await make_task(alice)
        async with sse_stream(alice, params={"task_id": task["id"]}) as events:
            sid, pending_id, _ = await _ask(alice, events, task)
            foreign = await bob.post(
                f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "yes"}
            )
            fabricated = await bob.post(
                "/api/v1/permissions/fabricated/respond", json={"option_id": "yes"}
            )
            assert foreign.status_code == fabricated.status_code == 404
            assert foreign.json() == fabricated.json()
            assert (await bob.get("/api/v1/permissions")).json()["count"] == 0
            async with mcp_client(f"{server.url}/mcp", bob_pat) as mcp:
                listed = ok(await mcp.call_tool("list_pending_permissions_kandev", {}))
                assert listed["count"] == 0
                error = tool_error(
                    await mcp.call_tool(
                        "answer_permission_kandev", {"pending_id": pending_id, "option_id": "yes"}
                    )
                )
                assert error["code"] == "NOT_FOUND"
            assert (await alice.get("/api/v1/permissions")).json()["count"] == 1
            r = await alice.post(
                f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "yes"}
            )
            assert r.status_code == 200 and r.json()["claimed"] is True
            await events.wait_for(of_type("session.turn.completed"))
        assert await _reply(alice, sid) == "permission: yes"


async def test_a_request_open_when_its_turn_ends_expires(live_server_factory, sqlite_url) -> None:
    server = live_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid = await _start(client, task, "permission-detached")
            # The request and the turn's end are recorded in either order (born expired
            # when the end came first): wait for both.
            asked = ended = None
            while asked is None or ended is None:
                event = await events.wait_for(
                    lambda e: _is_permission(e) or of_type("session.turn.completed")(e)
                )
                if _is_permission(event):
                    asked = event
                else:
                    ended = event
            pending_id = asked.data["message"]["metadata"]["pending_id"]
            session = (await client.get(f"/api/v1/sessions/{sid}")).json()
            assert (session["state"], session["pending_action"]) == ("IDLE", None)
            r = await client.post(
                f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "yes"}
            )
            assert r.status_code == 409
            # The agent's call got a cancelled outcome.
            r = await client.post(
                f"/api/v1/sessions/{sid}/prompt", json={"text": "permission-result"}
            )
            assert r.status_code == 202, r.text
            await events.wait_for(of_type("session.turn.completed"))
        assert await _reply(client, sid) == "permission: cancelled"
        row = next(m for m in await messages(client, sid) if m["type"] == "permission_request")
        assert row["metadata"]["status"] == "expired"
        assert (await client.get("/api/v1/permissions")).json()["count"] == 0


async def test_a_request_open_when_its_session_stops_expires(
    live_server_factory, sqlite_url
) -> None:
    server = live_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid, pending_id, _ = await _ask(client, events, task)
            r = await client.post(f"/api/v1/sessions/{sid}/stop", json={})
            assert r.status_code == 200, r.text
            assert r.json()["state"] == "CANCELLED"
        row = next(m for m in await messages(client, sid) if m["type"] == "permission_request")
        assert row["metadata"]["status"] == "expired"
        r = await client.post(
            f"/api/v1/permissions/{pending_id}/respond", json={"option_id": "yes"}
        )
        assert r.status_code == 409
        assert (await client.get("/api/v1/permissions")).json()["count"] == 0


async def test_policies_allow_deny_and_the_allow_list(live_server_factory, sqlite_url) -> None:
    server = live_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        bad = await client.post(
            "/api/v1/agent-profiles",
            json={"name": "bad", "command": [sys.executable], "permission_policy": "maybe"},
        )
        assert bad.status_code == 400 and "permission_policy" in bad.json()["error"]
        allow = await _profile(client, "allow", permission_policy="allow")
        assert (allow["permission_policy"], allow["permission_allow"]) == ("allow", [])
        deny = await _profile(client, "deny", permission_policy="deny")
        listed = await _profile(client, "listed", permission_allow=["execute", "Read a file"])
        assert listed["permission_policy"] == "ask"
        changed = await client.patch(
            f"/api/v1/agent-profiles/{deny['id']}", json={"permission_allow": ["read"]}
        )
        assert changed.status_code == 200 and changed.json()["permission_allow"] == ["read"]
        for profile, prompt, expected in (
            (allow, "permission", "permission: yes"),
            (deny, "permission", "permission: no"),
            (deny, "permission read", "permission: yes"),  # allow-listed even under deny
            (listed, "permission execute ls", "permission: yes"),
        ):
            task = await make_task(client)
            async with sse_stream(client, params={"task_id": task["id"]}) as events:
                sid = await _start(client, task, prompt, profile)
                await events.wait_for(of_type("session.turn.completed"))
            history = await messages(client, sid)
            assert history[-1]["content"] == expected, (profile["name"], prompt)
            assert not [m for m in history if m["type"] == "permission_request"]
        # Not on the allow-list: asked.
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid = await _start(client, task, "permission edit", listed)
            asked = await events.wait_for(_is_permission)
            assert asked.data["message"]["metadata"]["tool_call"]["kind"] == "edit"
            await client.post(f"/api/v1/sessions/{sid}/stop", json={})
