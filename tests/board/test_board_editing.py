"""Editing the board over REST (CONTRACT §3): PATCH / DELETE of workspaces, workflows, steps
and tasks — happy paths, 400 naming the field with nothing written, 409/400 while tasks are
in the way, and another user's ids answering 404 like fabricated ones. Both databases."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api_client import asgi_client

PASSWORD = "correct horse battery"


@pytest.fixture
async def client(tmp_path: Path, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(tmp_path, database_url) as c:
        yield c


async def board(client: httpx.AsyncClient) -> dict[str, Any]:
    ws = (await client.post("/api/v1/workspaces", json={"name": "W"})).json()
    flow = (
        await client.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
    ).json()
    r = await client.post(
        "/api/v1/tasks", json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "T"}
    )
    assert r.status_code == 201, r.text
    return {"ws": ws, "flow": flow, "task": r.json()}


async def test_workspace_rename_and_delete(client: httpx.AsyncClient) -> None:
    b = await board(client)
    ws_id = b["ws"]["id"]
    r = await client.patch(f"/api/v1/workspaces/{ws_id}", json={"name": "  Renamed  "})
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["description"]) == ("Renamed", "")
    r = await client.patch(f"/api/v1/workspaces/{ws_id}", json={"description": "about"})
    assert (r.json()["name"], r.json()["description"]) == ("Renamed", "about")
    assert (await client.get(f"/api/v1/workspaces/{ws_id}")).json()["description"] == "about"
    # Tasks in the way: refused, nothing deleted.
    r = await client.delete(f"/api/v1/workspaces/{ws_id}")
    assert (r.status_code, r.json()) == (
        409,
        {"error": "workspace has 1 task; delete or move them first"},
    )
    assert (await client.get(f"/api/v1/workflows/{b['flow']['id']}")).status_code == 200
    assert (await client.delete(f"/api/v1/tasks/{b['task']['id']}")).status_code == 204
    assert (await client.delete(f"/api/v1/workspaces/{ws_id}")).status_code == 204
    assert (await client.get(f"/api/v1/workspaces/{ws_id}")).status_code == 404
    # Its workflows went with it.
    assert (await client.get(f"/api/v1/workflows/{b['flow']['id']}")).status_code == 404
    assert (await client.delete(f"/api/v1/workspaces/{ws_id}")).status_code == 404


async def test_workflow_edit_and_delete(client: httpx.AsyncClient) -> None:
    b = await board(client)
    flow_id = b["flow"]["id"]
    r = await client.patch(
        f"/api/v1/workflows/{flow_id}", json={"name": "Release", "description": "ship it"}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["name"], body["description"]) == ("Release", "ship it")
    assert [s["name"] for s in body["steps"]] == ["Backlog", "In Progress", "Review", "Done"]
    r = await client.delete(f"/api/v1/workflows/{flow_id}")
    assert (r.status_code, r.json()) == (
        409,
        {"error": "workflow has 1 task; delete or move them first"},
    )
    # Archived tasks still sit on it.
    assert (await client.post(f"/api/v1/tasks/{b['task']['id']}/archive")).status_code == 200
    assert (await client.delete(f"/api/v1/workflows/{flow_id}")).status_code == 409
    assert (await client.delete(f"/api/v1/tasks/{b['task']['id']}")).status_code == 204
    assert (await client.delete(f"/api/v1/workflows/{flow_id}")).status_code == 204
    assert (await client.get(f"/api/v1/workflows/{flow_id}")).status_code == 404
    listed = (await client.get("/api/v1/workflows", params={"workspace_id": b["ws"]["id"]})).json()
    assert listed["total"] == 0


async def test_step_edit_start_step_and_delete(client: httpx.AsyncClient) -> None:
    b = await board(client)
    flow_id = b["flow"]["id"]
    backlog, doing, review, done = b["flow"]["steps"]
    url = f"/api/v1/workflows/{flow_id}/steps"
    events = {"on_enter": [{"type": "auto_start_agent", "config": {}}]}
    r = await client.patch(
        f"{url}/{review['id']}",
        json={"name": "QA", "prompt": "check {{task_prompt}}", "wip_limit": 2, "events": events},
    )
    assert r.status_code == 200, r.text
    step = r.json()
    assert (step["name"], step["prompt"], step["wip_limit"]) == ("QA", "check {{task_prompt}}", 2)
    assert step["events"]["on_enter"] == [{"type": "auto_start_agent", "config": {}}]
    assert step["position"] == review["position"]
    # A new start step takes over; the old one stops being it.
    r = await client.patch(f"{url}/{doing['id']}", json={"is_start_step": True, "position": 9})
    assert (r.json()["is_start_step"], r.json()["position"]) == (True, 9)
    flow = (await client.get(f"/api/v1/workflows/{flow_id}")).json()
    assert [s["id"] for s in flow["steps"] if s["is_start_step"]] == [doing["id"]]
    assert flow["steps"][-1]["id"] == doing["id"]  # ordered by position
    r = await client.patch(f"{url}/{doing['id']}", json={"is_start_step": False})
    assert r.status_code == 400 and r.json()["error"].startswith("is_start_step:")
    # A step with a task on it stays (CONTRACT: 400); an empty one goes.
    r = await client.delete(f"{url}/{backlog['id']}")
    assert r.status_code == 400 and r.json()["error"].startswith("step_id:"), r.text
    assert (await client.delete(f"{url}/{done['id']}")).status_code == 204
    # Deleting the start step hands the role to the first remaining step.
    assert (await client.delete(f"{url}/{doing['id']}")).status_code == 204
    flow = (await client.get(f"/api/v1/workflows/{flow_id}")).json()
    assert [(s["name"], s["is_start_step"]) for s in flow["steps"]] == [
        ("Backlog", True),
        ("QA", False),
    ]
    assert (await client.delete(f"{url}/{doing['id']}")).status_code == 404
    r = await client.patch(f"{url}/{done['id']}", json={"name": "x"})
    assert (r.status_code, r.json()) == (404, {"error": "step not found"})


async def test_task_edit(client: httpx.AsyncClient, tmp_path: Path) -> None:
    b = await board(client)
    task_id = b["task"]["id"]
    r = await client.patch(
        f"/api/v1/tasks/{task_id}",
        json={"title": "Better title", "description": "more", "local_path": str(tmp_path)},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["title"], body["description"], body["local_path"]) == (
        "Better title",
        "more",
        str(tmp_path),
    )
    assert body["task_pending_action"] is None and "primary_session_pending_action" in body
    r = await client.patch(f"/api/v1/tasks/{task_id}", json={"local_path": ""})
    assert (r.json()["local_path"], r.json()["title"]) == ("", "Better title")
    assert (await client.get(f"/api/v1/tasks/{task_id}")).json()["description"] == "more"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/workspaces/{ws}", {"name": ""}, "name"),
        ("/api/v1/workspaces/{ws}", {"name": 5}, "name"),
        ("/api/v1/workspaces/{ws}", {"description": "x" * 20_001}, "description"),
        ("/api/v1/workflows/{flow}", {"name": "   "}, "name"),
        ("/api/v1/workflows/{flow}", {"description": ["x"]}, "description"),
        ("/api/v1/workflows/{flow}/steps/{step}", {"name": ""}, "name"),
        ("/api/v1/workflows/{flow}/steps/{step}", {"position": -1}, "position"),
        ("/api/v1/workflows/{flow}/steps/{step}", {"wip_limit": "2"}, "wip_limit"),
        ("/api/v1/workflows/{flow}/steps/{step}", {"is_start_step": "yes"}, "is_start_step"),
        (
            "/api/v1/workflows/{flow}/steps/{step}",
            {"events": {"on_enter": [{"type": "launch_rockets"}]}},
            "events.on_enter.0.type",
        ),
        ("/api/v1/tasks/{task}", {"title": ""}, "title"),
        ("/api/v1/tasks/{task}", {"title": "x" * 501}, "title"),
        ("/api/v1/tasks/{task}", {"local_path": "relative/dir"}, "local_path"),
        ("/api/v1/tasks/{task}", {"description": "nul\u0000"}, "description"),
    ],
)
async def test_bad_input_is_400_naming_the_field_and_writes_nothing(
    client: httpx.AsyncClient, path: str, body: dict, field: str
) -> None:
    b = await board(client)
    ids = {
        "ws": b["ws"]["id"],
        "flow": b["flow"]["id"],
        "step": b["flow"]["steps"][0]["id"],
        "task": b["task"]["id"],
    }
    before = [
        (await client.get(p)).json()
        for p in (
            f"/api/v1/workspaces/{ids['ws']}",
            f"/api/v1/workflows/{ids['flow']}",
            f"/api/v1/tasks/{ids['task']}",
        )
    ]
    r = await client.patch(path.format(**ids), json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(f"{field}:"), r.json()
    after = [
        (await client.get(p)).json()
        for p in (
            f"/api/v1/workspaces/{ids['ws']}",
            f"/api/v1/workflows/{ids['flow']}",
            f"/api/v1/tasks/{ids['task']}",
        )
    ]
    assert after == before


async def test_foreign_ids_answer_like_fabricated_ones(tmp_path: Path, database_url: str) -> None:
    async with asgi_client(tmp_path, database_url, auth=True) as alice:
        r = await alice.post(
            "/api/v1/auth/setup", json={"email": "alice@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        r = await alice.post(
            "/api/v1/users", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 201, r.text
        b = await board(alice)
        step_id = b["flow"]["steps"][3]["id"]
        async with httpx.AsyncClient(
            transport=alice._transport, base_url="http://127.0.0.1"
        ) as bob:
            r = await bob.post(
                "/api/v1/auth/login", json={"email": "bob@example.com", "password": PASSWORD}
            )
            assert r.status_code == 200, r.text
            ws, flow, task = b["ws"]["id"], b["flow"]["id"], b["task"]["id"]
            cases = [
                ("PATCH", f"/api/v1/workspaces/{ws}", "/api/v1/workspaces/nope", {"name": "x"}),
                ("DELETE", f"/api/v1/workspaces/{ws}", "/api/v1/workspaces/nope", None),
                ("PATCH", f"/api/v1/workflows/{flow}", "/api/v1/workflows/nope", {"name": "x"}),
                ("DELETE", f"/api/v1/workflows/{flow}", "/api/v1/workflows/nope", None),
                (
                    "PATCH",
                    f"/api/v1/workflows/{flow}/steps/{step_id}",
                    f"/api/v1/workflows/nope/steps/{step_id}",
                    {"name": "x"},
                ),
                (
                    "DELETE",
                    f"/api/v1/workflows/{flow}/steps/{step_id}",
                    f"/api/v1/workflows/nope/steps/{step_id}",
                    None,
                ),
                ("PATCH", f"/api/v1/tasks/{task}", "/api/v1/tasks/nope", {"title": "x"}),
            ]
            for method, foreign, fabricated, body in cases:
                theirs = await bob.request(method, foreign, json=body)
                made_up = await bob.request(method, fabricated, json=body)
                assert theirs.status_code == 404, (method, foreign, theirs.text)
                assert (theirs.status_code, theirs.json()) == (
                    made_up.status_code,
                    made_up.json(),
                ), (method, foreign)
            # Nothing of Alice's changed.
            assert (await alice.get(f"/api/v1/workspaces/{ws}")).json()["name"] == "W"
            flow_now = (await alice.get(f"/api/v1/workflows/{flow}")).json()
            assert flow_now["name"] == "F" and len(flow_now["steps"]) == 4
            assert (await alice.get(f"/api/v1/tasks/{task}")).json()["title"] == "T"
            # The owner may.
            r = await alice.patch(f"/api/v1/tasks/{task}", json={"title": "mine"})
            assert r.status_code == 200
