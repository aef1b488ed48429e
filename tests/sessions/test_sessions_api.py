"""Session REST endpoints without a managed agent: shapes, pagination, bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.api_client import asgi_client
from tests.e2e.board_helpers import make_task


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(tmp_path) as c:
        yield c


async def test_session_shape_primary_flag_and_listing(client: httpx.AsyncClient) -> None:
    task = await make_task(client)
    first = await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})
    second = await client.post(f"/api/v1/tasks/{task['id']}/sessions")
    assert first.status_code == second.status_code == 201
    body = first.json()
    assert set(body) >= {
        "id",
        "task_id",
        "state",
        "is_primary",
        "agent_profile_id",
        "current_turn_id",
        "pending_action",
        "started_at",
        "completed_at",
        "updated_at",
    }
    # No profile: Kandev runs nothing, so the session waits (IDLE) and says how to connect.
    assert (body["state"], body["is_primary"], body["current_turn_id"]) == ("IDLE", True, None)
    assert body["pending_action"] is None and body["agent_profile_id"] is None
    assert second.json()["is_primary"] is False
    listed = (await client.get(f"/api/v1/tasks/{task['id']}/sessions")).json()
    assert listed["total"] == 2
    assert [s["id"] for s in listed["sessions"]] == [body["id"], second.json()["id"]]


async def test_session_without_a_profile_waits_for_an_external_agent(
    client: httpx.AsyncClient,
) -> None:
    task = await make_task(client)
    created = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()
    sid = created["id"]
    assert created["state"] == "IDLE"
    assert created["hint"] == (
        f"No managed agent: connect one with POST /api/v1/sessions/{sid}/agent-token "
        "(it reads prompts with get_task_conversation_kandev)"
    )
    listed = (await client.get(f"/api/v1/tasks/{task['id']}/sessions")).json()["sessions"]
    assert listed[0]["hint"] == created["hint"]
    token = await client.post(f"/api/v1/sessions/{sid}/agent-token")
    assert token.status_code == 201
    # A prompt opens a turn for that agent to read.
    r = await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "hello"})
    assert r.status_code == 202
    assert (await client.get(f"/api/v1/sessions/{sid}")).json()["state"] == "RUNNING"
    # An ended session has nothing left to connect to.
    stopped = await client.post(f"/api/v1/sessions/{sid}/stop", json={})
    assert (stopped.json()["state"], stopped.json()["hint"]) == ("CANCELLED", None)


async def test_prompt_records_turns_and_messages_page_both_ways(client: httpx.AsyncClient) -> None:
    task = await make_task(client)
    sid = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()["id"]
    turn_ids = []
    for i in range(5):
        r = await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": f"m{i}"})
        assert r.status_code == 202 and r.json()["queued"] is False
        turn_ids.append(r.json()["turn_id"])
    session = (await client.get(f"/api/v1/sessions/{sid}")).json()
    assert session["current_turn_id"] == turn_ids[-1]
    url = f"/api/v1/sessions/{sid}/messages"
    page = (await client.get(url, params={"limit": 2})).json()
    assert [m["content"] for m in page["messages"]] == ["m0", "m1"]
    assert page["has_more"] is True and page["cursor"] == page["messages"][-1]["id"]
    page2 = (await client.get(url, params={"limit": 2, "after": page["cursor"]})).json()
    assert [m["content"] for m in page2["messages"]] == ["m2", "m3"]
    last = (await client.get(url, params={"limit": 2, "after": page2["cursor"]})).json()
    assert [m["content"] for m in last["messages"]] == ["m4"]
    assert last["has_more"] is False and last["cursor"] is None
    desc = (await client.get(url, params={"sort": "desc", "limit": 3})).json()
    assert [m["content"] for m in desc["messages"]] == ["m4", "m3", "m2"]
    before = (await client.get(url, params={"before": desc["messages"][-1]["id"]})).json()
    assert [m["content"] for m in before["messages"]] == ["m0", "m1"]
    message = page["messages"][0]
    assert set(message) >= {
        "id",
        "session_id",
        "task_id",
        "turn_id",
        "author_type",
        "type",
        "content",
        "requests_input",
        "metadata",
        "created_at",
        "updated_at",
    }
    assert (message["author_type"], message["type"], message["turn_id"]) == (
        "user",
        "message",
        turn_ids[0],
    )


async def test_bad_input_on_session_endpoints(client: httpx.AsyncClient) -> None:
    task = await make_task(client)
    sid = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()["id"]
    cases = [
        (
            "POST",
            f"/api/v1/tasks/{task['id']}/sessions",
            {"agent_profile_id": 5},
            "agent_profile_id",
        ),
        ("POST", f"/api/v1/tasks/{task['id']}/sessions", {"prompt": ""}, "prompt"),
        ("POST", f"/api/v1/sessions/{sid}/prompt", {}, "text"),
        ("POST", f"/api/v1/sessions/{sid}/prompt", {"text": ""}, "text"),
        ("POST", f"/api/v1/sessions/{sid}/prompt", {"text": "x" * 100_001}, "text"),
        ("POST", f"/api/v1/sessions/{sid}/stop", {"state": "PAUSED"}, "state"),
    ]
    for method, path, body, field in cases:
        r = await client.request(method, path, json=body)
        assert r.status_code == 400, (path, body, r.text)
        assert r.json()["error"].startswith(f"{field}:"), r.json()
    for params, field in (
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"sort": "sideways"}, "sort"),
    ):
        r = await client.get(f"/api/v1/sessions/{sid}/messages", params=params)
        assert r.status_code == 400 and r.json()["error"].startswith(f"{field}:"), r.text
    r = await client.get(f"/api/v1/sessions/{sid}/messages", params={"after": "nope"})
    assert (r.status_code, r.json()) == (404, {"error": "message not found"})
    # Nothing above created a session or a message.
    assert (await client.get(f"/api/v1/tasks/{task['id']}/sessions")).json()["total"] == 1
    assert (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["messages"] == []


async def test_unknown_ids_and_terminal_sessions(client: httpx.AsyncClient) -> None:
    task = await make_task(client)
    r = await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={"agent_profile_id": "nope"})
    assert (r.status_code, r.json()) == (404, {"error": "agent profile not found"})
    assert (await client.get(f"/api/v1/tasks/{task['id']}/sessions")).json()["total"] == 0
    r = await client.post("/api/v1/tasks/nope/sessions", json={})
    assert (r.status_code, r.json()) == (404, {"error": "task not found"})
    for method, path in (
        ("GET", "/api/v1/sessions/nope"),
        ("POST", "/api/v1/sessions/nope/prompt"),
        ("POST", "/api/v1/sessions/nope/stop"),
        ("POST", "/api/v1/sessions/nope/cancel"),
        ("POST", "/api/v1/sessions/nope/agent-token"),
        ("GET", "/api/v1/sessions/nope/messages"),
    ):
        body = {"text": "x"} if path.endswith("prompt") else None
        r = await client.request(method, path, json=body)
        assert (r.status_code, r.json()) == (404, {"error": "session not found"}), path
    sid = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()["id"]
    stopped = await client.post(f"/api/v1/sessions/{sid}/stop", json={"state": "COMPLETED"})
    assert stopped.json()["state"] == "COMPLETED"
    r = await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "more"})
    assert r.status_code == 409 and r.json()["error"].startswith("session is COMPLETED")
    assert (await client.post(f"/api/v1/sessions/{sid}/agent-token")).status_code == 409
    assert (await client.post(f"/api/v1/sessions/{sid}/cancel")).status_code == 409


async def test_agent_token_shape(client: httpx.AsyncClient) -> None:
    task = await make_task(client)
    sid = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()["id"]
    r = await client.post(f"/api/v1/sessions/{sid}/agent-token")
    assert r.status_code == 201
    body = r.json()
    assert body["mcp_url"].endswith("/agent/mcp/")
    assert body["token"].startswith("kandev_agent_") and len(body["token"]) == 13 + 8 + 1 + 43
    principal = await client.services.agent_tokens.resolve(body["token"])
    assert principal is not None and principal.session_id == sid
    await client.post(f"/api/v1/sessions/{sid}/stop", json={})
    assert await client.services.agent_tokens.resolve(body["token"]) is None  # revoked
