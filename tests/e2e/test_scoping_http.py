"""Over a real uvicorn with auth on: another user's ids answer exactly like fabricated ids."""

from __future__ import annotations

import httpx

from kandev.clock import ManualClock

PASSWORD = "correct horse battery"


async def _pat(client: httpx.AsyncClient) -> str:
    r = await client.post("/api/v1/auth/tokens", json={"name": "test"})
    assert r.status_code == 201, r.text
    return r.json()["token"]


async def test_foreign_and_fabricated_ids_give_identical_404s(
    live_server_factory, database_url: str, clock: ManualClock
) -> None:
    server = live_server_factory(database_url, clock=clock, auth=True)
    async with httpx.AsyncClient(base_url=server.url) as alice_browser:
        r = await alice_browser.post(
            "/api/v1/auth/setup", json={"email": "alice@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        r = await alice_browser.post(
            "/api/v1/users", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 201, r.text
        alice_pat = await _pat(alice_browser)
    async with httpx.AsyncClient(base_url=server.url) as bob_browser:
        r = await bob_browser.post(
            "/api/v1/auth/login", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        bob_pat = await _pat(bob_browser)

    alice = httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {alice_pat}"})
    bob = httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {bob_pat}"})
    async with alice, bob:
        ws = (await alice.post("/api/v1/workspaces", json={"name": "Alice's"})).json()
        flow = (
            await alice.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
        ).json()
        task = (
            await alice.post(
                "/api/v1/tasks",
                json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "secret"},
            )
        ).json()
        assert ws["owner_id"] != ""
        move = {"workflow_id": flow["id"], "workflow_step_id": flow["steps"][1]["id"]}

        pairs = [
            ("GET", f"/api/v1/workspaces/{ws['id']}", "/api/v1/workspaces/fabricated", None),
            ("GET", f"/api/v1/workflows/{flow['id']}", "/api/v1/workflows/fabricated", None),
            (
                "GET",
                f"/api/v1/workflows?workspace_id={ws['id']}",
                "/api/v1/workflows?workspace_id=fabricated",
                None,
            ),
            ("GET", f"/api/v1/tasks/{task['id']}", "/api/v1/tasks/fabricated", None),
            (
                "GET",
                f"/api/v1/tasks?workflow_id={flow['id']}",
                "/api/v1/tasks?workflow_id=fabricated",
                None,
            ),
            ("POST", f"/api/v1/tasks/{task['id']}/move", "/api/v1/tasks/fabricated/move", move),
            (
                "POST",
                f"/api/v1/workflows/{flow['id']}/steps",
                "/api/v1/workflows/fabricated/steps",
                {"name": "x"},
            ),
            ("DELETE", f"/api/v1/tasks/{task['id']}", "/api/v1/tasks/fabricated", None),
        ]
        for method, foreign, fabricated, body in pairs:
            a = await bob.request(method, foreign, json=body)
            b = await bob.request(method, fabricated, json=body)
            assert a.status_code == b.status_code == 404, (foreign, a.text)
            assert a.content == b.content, (foreign, a.content, b.content)
            assert a.headers["content-length"] == b.headers["content-length"]

        # Bob's lists do not show Alice's rows; Alice still has everything, untouched.
        assert (await bob.get("/api/v1/workspaces")).json()["total"] == 0
        assert (await bob.get("/api/v1/tasks")).json()["total"] == 0
        r = await alice.get(f"/api/v1/tasks/{task['id']}")
        assert r.status_code == 200
        assert r.json()["workflow_step_id"] == task["workflow_step_id"]
        assert (await alice.get("/api/v1/workflows/" + flow["id"])).json()["steps"] == flow["steps"]
