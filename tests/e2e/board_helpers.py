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


async def messages(client: httpx.AsyncClient, session_id: str) -> list[dict]:
    r = await client.get(f"/api/v1/sessions/{session_id}/messages", params={"limit": 500})
    assert r.status_code == 200, r.text
    return r.json()["messages"]
