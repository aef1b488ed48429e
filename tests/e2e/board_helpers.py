"""Small helpers that set up a board over HTTP for end-to-end tests."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

SCRIPTED_AGENT = str(Path(__file__).resolve().parents[1] / "agents" / "scripted_agent.py")


async def make_task(client: httpx.AsyncClient, title: str = "Task") -> dict:
    ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
    flow = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
    ).json()
    r = await client.post(
        "/api/v1/tasks",
        json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": title},
    )
    assert r.status_code == 201, r.text
    return r.json()


async def scripted_profile(
    client: httpx.AsyncClient, name: str = "scripted", env: dict[str, str] | None = None
) -> dict:
    r = await client.post(
        "/api/v1/agent-profiles",
        json={"name": name, "command": [sys.executable, SCRIPTED_AGENT], "env": env or {}},
    )
    assert r.status_code == 201, r.text
    return r.json()


async def start_demo(client: httpx.AsyncClient, task: dict, prompt: str) -> str:
    """A session of the built-in demo agent on `task` with its first prompt; its id."""
    profiles = (await client.get("/api/v1/agent-profiles")).json()["agent_profiles"]
    demo = next(p for p in profiles if p["name"] == "demo")
    r = await client.post(
        f"/api/v1/tasks/{task['id']}/sessions",
        json={"agent_profile_id": demo["id"], "prompt": prompt},
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def messages(client: httpx.AsyncClient, session_id: str) -> list[dict]:
    r = await client.get(f"/api/v1/sessions/{session_id}/messages", params={"limit": 500})
    assert r.status_code == 200, r.text
    return r.json()["messages"]


async def first_turn(client: httpx.AsyncClient, prompt: str) -> tuple[dict, dict, list[dict]]:
    """A task, a scripted-agent session whose first prompt is `prompt`, run to the end of that
    turn; returns (task, session, messages)."""
    from tests.sse_client import of_type, sse_stream

    task = await make_task(client)
    profile = await scripted_profile(client)
    async with sse_stream(client, params={"task_id": task["id"]}) as events:
        r = await client.post(
            f"/api/v1/tasks/{task['id']}/sessions",
            json={"agent_profile_id": profile["id"], "prompt": prompt},
        )
        assert r.status_code == 201, r.text
        await events.wait_for(of_type("session.turn.completed"))
    session = r.json()
    return task, session, await messages(client, session["id"])
