"""Bad input on every board endpoint: 400 naming the field, nothing written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.api_client import asgi_client

LONG = "x" * 201  # names are capped at 200 characters


@pytest.fixture
async def seeded(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str]]]:
    async with asgi_client(tmp_path) as client:
        ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
        flow = (
            await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
        ).json()
        task = (
            await client.post(
                "/api/v1/tasks",
                json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "T"},
            )
        ).json()
        ids = {"ws": ws["id"], "wf": flow["id"], "step": flow["steps"][1]["id"], "task": task["id"]}
        yield client, ids


def _cases(ids: dict[str, str]) -> list[tuple[str, str, object, str]]:
    ws, wf, step = ids["ws"], ids["wf"], ids["step"]
    task_body = {"workspace_id": ws, "workflow_id": wf, "title": "t"}
    move = f"/api/v1/tasks/{ids['task']}/move"
    steps = f"/api/v1/workflows/{wf}/steps"
    return [
        # (method, path, json body, field the error must name)
        ("POST", "/api/v1/workspaces", {}, "name"),
        ("POST", "/api/v1/workspaces", {"name": ""}, "name"),
        ("POST", "/api/v1/workspaces", {"name": "   "}, "name"),
        ("POST", "/api/v1/workspaces", {"name": LONG}, "name"),
        ("POST", "/api/v1/workspaces", {"name": 7}, "name"),
        ("POST", "/api/v1/workspaces", {"name": "ok", "description": "d" * 20_001}, "description"),
        ("POST", "/api/v1/workflows", {"name": "f"}, "workspace_id"),
        ("POST", "/api/v1/workflows", {"workspace_id": ws}, "name"),
        ("POST", "/api/v1/workflows", {"workspace_id": ws, "name": "f", "steps": "x"}, "steps"),
        (
            "POST",
            "/api/v1/workflows",
            {"workspace_id": ws, "name": "f", "steps": [{}]},
            "steps.0.name",
        ),
        (
            "POST",
            "/api/v1/workflows",
            {
                "workspace_id": ws,
                "name": "f",
                "steps": [
                    {"name": "a", "is_start_step": True},
                    {"name": "b", "is_start_step": True},
                ],
            },
            "steps[1].is_start_step",
        ),
        (
            "POST",
            "/api/v1/workflows",
            {
                "workspace_id": ws,
                "name": "f",
                "steps": [{"name": "a", "events": {"on_enter": [{"type": "explode"}]}}],
            },
            "steps.0.events.on_enter.0.type",
        ),
        (
            "POST",
            "/api/v1/workflows",
            {"workspace_id": ws, "name": "f", "steps": [{"name": "a", "events": {"on_lunch": []}}]},
            "steps.0.events.on_lunch",
        ),
        ("POST", steps, {}, "name"),
        ("POST", steps, {"name": "s", "position": -1}, "position"),
        ("POST", steps, {"name": "s", "wip_limit": "2"}, "wip_limit"),
        ("POST", steps, {"name": "s", "is_start_step": "yes"}, "is_start_step"),
        ("POST", "/api/v1/tasks", {**task_body, "title": ""}, "title"),
        ("POST", "/api/v1/tasks", {**task_body, "title": "t" * 501}, "title"),
        (
            "POST",
            "/api/v1/tasks",
            {k: v for k, v in task_body.items() if k != "workflow_id"},
            "workflow_id",
        ),
        ("POST", "/api/v1/tasks", {**task_body, "workspace_id": None}, "workspace_id"),
        ("POST", "/api/v1/tasks", {**task_body, "local_path": "p" * 4097}, "local_path"),
        ("POST", move, {"workflow_id": wf}, "workflow_step_id"),
        ("POST", move, {"workflow_id": wf, "workflow_step_id": step, "position": -3}, "position"),
        ("POST", move, {"workflow_id": wf, "workflow_step_id": "not-a-step"}, "workflow_step_id"),
        ("POST", "/api/v1/agent-profiles", {"name": "p"}, "command"),
        ("POST", "/api/v1/agent-profiles", {"name": "p", "command": []}, "command"),
        ("POST", "/api/v1/agent-profiles", {"name": "p", "command": "claude"}, "command"),
        ("POST", "/api/v1/agent-profiles", {"name": "p", "command": [""]}, "command.0"),
        (
            "POST",
            "/api/v1/agent-profiles",
            {"name": "p", "command": ["a"], "env": {"BAD NAME": "1"}},
            "env.BAD NAME.[key]",
        ),
        (
            "POST",
            "/api/v1/agent-profiles",
            {"name": "p", "command": ["a"], "env": {"A": 1}},
            "env.A",
        ),
    ]


async def _snapshot(client: httpx.AsyncClient) -> tuple:
    return (
        (await client.get("/api/v1/workspaces")).json(),
        (await client.get("/api/v1/workflows")).json(),
        (await client.get("/api/v1/tasks")).json(),
        (await client.get("/api/v1/agent-profiles")).json(),
    )


async def test_every_endpoint_rejects_bad_bodies_naming_the_field(
    seeded: tuple[httpx.AsyncClient, dict[str, str]],
) -> None:
    client, ids = seeded
    before = await _snapshot(client)
    for method, path, body, field in _cases(ids):
        r = await client.request(method, path, json=body)
        assert r.status_code == 400, (path, body, r.text)
        error = r.json()["error"]
        assert error.startswith(f"{field}:"), (path, body, error)
    assert await _snapshot(client) == before


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/workspaces",
        "/api/v1/workflows",
        "/api/v1/tasks",
        "/api/v1/agent-profiles",
        "/api/v1/tasks/{task}/move",
        "/api/v1/workflows/{wf}/steps",
    ],
)
async def test_malformed_and_non_object_bodies(
    seeded: tuple[httpx.AsyncClient, dict[str, str]], path: str
) -> None:
    client, ids = seeded
    url = path.format(**ids)
    r = await client.post(url, content=b"{not json", headers={"content-type": "application/json"})
    assert (r.status_code, r.json()) == (400, {"error": "body: invalid JSON"})
    r = await client.post(url, json=["a", "list"])
    assert r.status_code == 400 and r.json()["error"].startswith("body:")
