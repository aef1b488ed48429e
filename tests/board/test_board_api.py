"""Board REST API (CONTRACT §3) with auth off, in-process."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.api_client import asgi_client


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(tmp_path) as c:
        yield c


async def _workspace(client: httpx.AsyncClient, name: str = "Main") -> dict:
    r = await client.post("/api/v1/workspaces", json={"name": name})
    assert r.status_code == 201, r.text
    return r.json()


async def _workflow(client: httpx.AsyncClient, workspace_id: str, **extra: object) -> dict:
    r = await client.post(
        "/api/v1/workflows", json={"workspace_id": workspace_id, "name": "Flow", **extra}
    )
    assert r.status_code == 201, r.text
    return r.json()


async def test_health(client: httpx.AsyncClient) -> None:
    r = await client.get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


async def test_workspace_round_trip(client: httpx.AsyncClient) -> None:
    ws = await _workspace(client)
    assert ws["owner_id"] == ""
    assert set(ws) >= {"id", "name", "description", "owner_id", "created_at", "updated_at"}
    assert ws["created_at"].endswith("Z")
    assert (await client.get(f"/api/v1/workspaces/{ws['id']}")).json() == ws
    listed = (await client.get("/api/v1/workspaces")).json()
    assert listed == {"workspaces": [ws], "total": 1}


async def test_default_workflow_has_four_steps_starting_at_backlog(
    client: httpx.AsyncClient,
) -> None:
    ws = await _workspace(client)
    flow = await _workflow(client, ws["id"])
    assert [s["name"] for s in flow["steps"]] == ["Backlog", "In Progress", "Review", "Done"]
    assert [s["is_start_step"] for s in flow["steps"]] == [True, False, False, False]
    assert [s["position"] for s in flow["steps"]] == [0, 1, 2, 3]
    step = flow["steps"][0]
    assert set(step) >= {
        "id",
        "workflow_id",
        "name",
        "position",
        "prompt",
        "events",
        "wip_limit",
        "is_start_step",
    }
    listed = (await client.get("/api/v1/workflows", params={"workspace_id": ws["id"]})).json()
    assert listed["total"] == 1 and listed["workflows"][0]["id"] == flow["id"]
    assert (await client.get(f"/api/v1/workflows/{flow['id']}")).json() == flow


async def test_custom_steps_and_added_step(client: httpx.AsyncClient) -> None:
    ws = await _workspace(client)
    flow = await _workflow(
        client,
        ws["id"],
        steps=[
            {"name": "Plan", "prompt": "plan it"},
            {
                "name": "Build",
                "is_start_step": True,
                "wip_limit": 2,
                "events": {"on_enter": [{"type": "auto_start_agent"}]},
            },
        ],
    )
    assert [s["is_start_step"] for s in flow["steps"]] == [False, True]
    assert flow["steps"][1]["events"]["on_enter"] == [{"type": "auto_start_agent", "config": {}}]
    r = await client.post(
        f"/api/v1/workflows/{flow['id']}/steps", json={"name": "Ship", "is_start_step": True}
    )
    assert r.status_code == 201, r.text
    assert r.json()["position"] == 2
    steps = (await client.get(f"/api/v1/workflows/{flow['id']}")).json()["steps"]
    assert [s["name"] for s in steps if s["is_start_step"]] == ["Ship"]


async def test_task_lifecycle(client: httpx.AsyncClient) -> None:
    ws = await _workspace(client)
    flow = await _workflow(client, ws["id"])
    backlog, progress = flow["steps"][0], flow["steps"][1]
    created = []
    for title in ("first", "second"):
        r = await client.post(
            "/api/v1/tasks",
            json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": title},
        )
        assert r.status_code == 201, r.text
        created.append(r.json())
    first, second = created
    assert first["workflow_step_id"] == backlog["id"]
    assert (first["position"], second["position"]) == (0, 1)
    assert first["state"] == "TODO"
    assert first["task_pending_action"] is None
    assert first["primary_session_pending_action"] is None
    assert "metadata" in first and "archived_at" in first

    r = await client.post(
        f"/api/v1/tasks/{second['id']}/move",
        json={"workflow_id": flow["id"], "workflow_step_id": progress["id"]},
    )
    assert r.status_code == 200, r.text
    moved = r.json()
    assert moved["task"]["workflow_step_id"] == progress["id"]
    assert moved["workflow_step"]["id"] == progress["id"]

    # Insert at position 0 of In Progress pushes the other task down.
    r = await client.post(
        f"/api/v1/tasks/{first['id']}/move",
        json={"workflow_id": flow["id"], "workflow_step_id": progress["id"], "position": 0},
    )
    assert r.json()["task"]["position"] == 0
    assert (await client.get(f"/api/v1/tasks/{second['id']}")).json()["position"] == 1

    listed = (await client.get("/api/v1/tasks", params={"workflow_id": flow["id"]})).json()
    assert listed["total"] == 2
    assert [t["id"] for t in listed["tasks"]] == [first["id"], second["id"]]

    assert (await client.delete(f"/api/v1/tasks/{first['id']}")).status_code == 204
    r = await client.get(f"/api/v1/tasks/{first['id']}")
    assert r.status_code == 404 and r.json() == {"error": "task not found"}


async def test_task_on_explicit_step_and_cross_workspace_workflow(
    client: httpx.AsyncClient,
) -> None:
    ws, other = await _workspace(client), await _workspace(client, "Other")
    flow, other_flow = await _workflow(client, ws["id"]), await _workflow(client, other["id"])
    review = flow["steps"][2]
    r = await client.post(
        "/api/v1/tasks",
        json={
            "workspace_id": ws["id"],
            "workflow_id": flow["id"],
            "workflow_step_id": review["id"],
            "title": "t",
        },
    )
    assert r.json()["workflow_step_id"] == review["id"]
    r = await client.post(
        "/api/v1/tasks",
        json={"workspace_id": ws["id"], "workflow_id": other_flow["id"], "title": "t"},
    )
    assert r.status_code == 400
    assert r.json()["error"].startswith("workflow_id:")
    r = await client.post(
        "/api/v1/tasks",
        json={
            "workspace_id": ws["id"],
            "workflow_id": flow["id"],
            "workflow_step_id": other_flow["steps"][0]["id"],
            "title": "t",
        },
    )
    assert r.status_code == 400
    assert r.json()["error"].startswith("workflow_step_id:")
    assert (await client.get("/api/v1/tasks")).json()["total"] == 1


async def test_agent_profiles(client: httpx.AsyncClient) -> None:
    profiles = (await client.get("/api/v1/agent-profiles")).json()["agent_profiles"]
    demo = [p for p in profiles if p["name"] == "demo"]
    assert len(demo) == 1 and demo[0]["command"] == ["kandev", "demo-agent"]
    body = {"name": "claude", "command": [sys.executable, "-m", "some_acp_agent"]}
    r = await client.post("/api/v1/agent-profiles", json={**body, "env": {"FOO": "1"}})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["command"] == body["command"] and created["env"] == {"FOO": "********"}
    assert (await client.post("/api/v1/agent-profiles", json=body)).status_code == 409
    r = await client.patch(f"/api/v1/agent-profiles/{created['id']}", json={"env": {"X": "2"}})
    assert r.json()["env"] == {"X": "********"} and r.json()["command"] == body["command"]
    assert (await client.delete(f"/api/v1/agent-profiles/{demo[0]['id']}")).status_code == 409
    assert (await client.delete(f"/api/v1/agent-profiles/{created['id']}")).status_code == 204
    assert (await client.get(f"/api/v1/agent-profiles/{created['id']}")).status_code == 404


async def test_unknown_ids_are_404(client: httpx.AsyncClient) -> None:
    for path, error in (
        ("/api/v1/workspaces/nope", "workspace not found"),
        ("/api/v1/workflows/nope", "workflow not found"),
        ("/api/v1/tasks/nope", "task not found"),
        ("/api/v1/agent-profiles/nope", "agent profile not found"),
    ):
        r = await client.get(path)
        assert (r.status_code, r.json()) == (404, {"error": error}), path
    r = await client.get("/api/v1/workflows", params={"workspace_id": "nope"})
    assert (r.status_code, r.json()) == (404, {"error": "workspace not found"})
    r = await client.get("/api/v1/tasks", params={"workflow_id": "nope"})
    assert (r.status_code, r.json()) == (404, {"error": "workflow not found"})
    r = await client.post(
        "/api/v1/tasks/nope/move", json={"workflow_id": "a", "workflow_step_id": "b"}
    )
    assert (r.status_code, r.json()) == (404, {"error": "task not found"})
    r = await client.post("/api/v1/workflows/nope/steps", json={"name": "x"})
    assert (r.status_code, r.json()) == (404, {"error": "workflow not found"})
    assert (await client.delete("/api/v1/tasks/nope")).status_code == 404
