"""Sessions driving a real ACP agent subprocess over a real uvicorn (CONTRACT §4)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.e2e.board_helpers import first_turn, make_task, messages, scripted_profile
from tests.sse_client import of_type, sse_stream


@pytest.fixture
def server(live_server_factory, sqlite_url: str):
    return live_server_factory(sqlite_url)


async def _start(client: httpx.AsyncClient, task: dict, profile: dict, prompt: str | None) -> dict:
    body = {"agent_profile_id": profile["id"]}
    if prompt is not None:
        body["prompt"] = prompt
    r = await client.post(f"/api/v1/tasks/{task['id']}/sessions", json=body)
    assert r.status_code == 201, r.text
    return r.json()


async def test_prompt_runs_a_turn_whose_text_lands_as_messages(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        profile = await scripted_profile(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            session = await _start(client, task, profile, "echo hello from the agent")
            assert session["is_primary"] is True
            done = await events.wait_for(of_type("session.turn.completed"))
            assert done.data["stop_reason"] == "end_turn"
            await events.wait_for(of_type("session.state_changed", state="IDLE"))
        history = await messages(client, session["id"])
        assert [(m["author_type"], m["content"]) for m in history] == [
            ("user", "echo hello from the agent"),
            ("agent", "hello from the agent"),  # streamed in chunks, stored as one message
        ]
        assert all(m["turn_id"] == done.data["turn_id"] for m in history)
        body = (await client.get(f"/api/v1/sessions/{session['id']}")).json()
        assert body["state"] == "IDLE" and body["current_turn_id"] == done.data["turn_id"]
        assert (await client.get(f"/api/v1/tasks/{task['id']}")).json()["state"] == "REVIEW"


async def test_tool_calls_and_plans_become_messages(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        _, _, history = await first_turn(client, "tool")
        by_type = {m["type"]: m for m in history}
        assert by_type["tool_call"]["metadata"]["status"] == "completed"
        assert by_type["agent_plan"]["content"]


async def test_prompt_during_a_turn_is_queued_then_dispatched(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        profile = await scripted_profile(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            session = await _start(client, task, profile, "slow")
            sid = session["id"]
            await events.wait_for(of_type("session.message.added"))  # the agent is working
            await events.wait_for(
                lambda e: (
                    e.type == "session.message.added"
                    and e.data["message"]["author_type"] == "agent"
                )
            )
            r = await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "echo second"})
            assert r.status_code == 202
            assert r.json()["queued"] is True and r.json()["turn_id"] is None
            r = await client.post(f"/api/v1/sessions/{sid}/cancel")
            assert r.json() == {"cancelled": True}
            first = await events.wait_for(of_type("session.turn.completed"))
            assert first.data["stop_reason"] == "cancelled"
            second = await events.wait_for(of_type("session.turn.completed"))
            assert second.data["stop_reason"] == "end_turn"
            assert second.data["turn_id"] != first.data["turn_id"]
        history = await messages(client, sid)
        assert [m["content"] for m in history if m["author_type"] == "user"] == [
            "slow",
            "echo second",
        ]
        assert history[-1]["content"] == "second"


async def test_stop_ends_the_agent_and_refuses_prompts(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        profile = await scripted_profile(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            session = await _start(client, task, profile, "slow")
            await events.wait_for(
                lambda e: (
                    e.type == "session.message.added"
                    and e.data["message"]["author_type"] == "agent"
                )
            )
            handle = server.services.orchestrator.live(session["id"]).handle
            assert handle is not None and handle.alive
            r = await client.post(f"/api/v1/sessions/{session['id']}/stop", json={})
            assert r.status_code == 200 and r.json()["state"] == "CANCELLED"
            assert r.json()["completed_at"] is not None
            assert not handle.alive
        r = await client.post(f"/api/v1/sessions/{session['id']}/prompt", json={"text": "hi"})
        assert r.status_code == 409 and "CANCELLED" in r.json()["error"]
        r = await client.post(f"/api/v1/sessions/{session['id']}/stop", json={"state": "FAILED"})
        assert r.json()["state"] == "CANCELLED"  # a terminal session never changes again


async def test_agent_crash_marks_the_session_failed_with_the_reason(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        profile = await scripted_profile(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            session = await _start(client, task, profile, "crash")
            failed = await events.wait_for(of_type("session.state_changed", state="FAILED"))
        assert "3" in failed.data["error_message"]
        body = (await client.get(f"/api/v1/sessions/{session['id']}")).json()
        assert body["state"] == "FAILED" and body["error_message"]
        r = await client.post(f"/api/v1/sessions/{session['id']}/prompt", json={"text": "hi"})
        assert r.status_code == 409
        assert (await client.get("/health")).status_code == 200  # the server keeps serving


async def test_missing_agent_command_fails_the_session_readably(server, tmp_path) -> None:
    # A profile's program is checked when the profile is saved; this one disappears later.
    program = tmp_path / "definitely-not-an-agent-xyz"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        r = await client.post(
            "/api/v1/agent-profiles", json={"name": "ghost", "command": [str(program)]}
        )
        assert r.status_code == 201, r.text
        program.unlink()
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            session = await _start(client, task, r.json(), "echo hi")
            failed = await events.wait_for(of_type("session.state_changed", state="FAILED"))
        assert "not found" in failed.data["error_message"]
        assert "definitely-not-an-agent-xyz" in failed.data["error_message"]
        assert (await client.get(f"/api/v1/sessions/{session['id']}")).json()["state"] == "FAILED"


async def test_restart_then_prompt_relaunches_the_agent(live_server_factory, sqlite_url) -> None:
    first = live_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=first.url) as client:
        task, session, history = await first_turn(client, "whoami")
        opened = json.loads(history[-1]["content"])
        assert opened["opened_with"] == "new"
    first.stop()

    second = live_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=second.url) as client:
        assert (await client.get(f"/api/v1/sessions/{session['id']}")).json()["state"] == "IDLE"
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            r = await client.post(
                f"/api/v1/sessions/{session['id']}/prompt", json={"text": "whoami"}
            )
            assert r.status_code == 202 and r.json()["queued"] is False
            await events.wait_for(of_type("session.turn.completed"))
        reopened = json.loads((await messages(client, session["id"]))[-1]["content"])
        # The relaunched agent reattached to the same ACP session with session/load.
        assert reopened["opened_with"] == "load"
        assert reopened["session_id"] == opened["session_id"]


async def test_the_agent_reaches_kandev_over_its_own_mcp_endpoint(
    live_server_factory, database_url: str
) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task, _, history = await first_turn(client, "mcp")
        reply = history[-1]["content"]
        # The agent called list_workspaces_kandev with the token Kandev gave it.
        listed = json.loads(reply)
        assert [w["id"] for w in listed["workspaces"]] == [task["workspace_id"]]
