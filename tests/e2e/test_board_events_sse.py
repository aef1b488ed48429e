"""Board events over a real uvicorn with auth on: a live board sees tasks created, edited,
moved and deleted and its workflow edited, in order; another user's stream sees none of it."""

from __future__ import annotations

import httpx

from tests.sse_client import sse_stream

PASSWORD = "correct horse battery"
BOARD_EVENTS = {"task.created", "task.updated", "task.moved", "task.deleted", "workflow.updated"}


async def test_board_events_in_order_and_only_for_the_owner(
    live_server_factory, database_url: str
) -> None:
    server = live_server_factory(database_url, auth=True)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=30) as alice,
        httpx.AsyncClient(base_url=server.url, timeout=30) as bob,
    ):
        r = await alice.post(
            "/api/v1/auth/setup", json={"email": "alice@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200
        r = await alice.post(
            "/api/v1/users", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 201
        r = await bob.post(
            "/api/v1/auth/login", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200
        ws = (await alice.post("/api/v1/workspaces", json={"name": "Alice's"})).json()
        flow = (
            await alice.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "F"})
        ).json()
        async with sse_stream(alice) as alice_events, sse_stream(bob) as bob_events:
            r = await alice.post(
                "/api/v1/tasks",
                json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": "secret"},
            )
            assert r.status_code == 201
            task = r.json()
            await alice.patch(f"/api/v1/tasks/{task['id']}", json={"title": "secret, renamed"})
            move = {"workflow_id": flow["id"], "workflow_step_id": flow["steps"][1]["id"]}
            assert (await alice.post(f"/api/v1/tasks/{task['id']}/move", json=move)).is_success
            step = flow["steps"][2]
            r = await alice.patch(
                f"/api/v1/workflows/{flow['id']}/steps/{step['id']}", json={"name": "QA"}
            )
            assert r.status_code == 200
            assert (await alice.post(f"/api/v1/tasks/{task['id']}/archive")).is_success
            assert (await alice.delete(f"/api/v1/tasks/{task['id']}")).status_code == 204

            seen = []
            while not seen or seen[-1].type != "task.deleted":
                event = await alice_events.wait_for(lambda e: e.type in BOARD_EVENTS)
                seen.append(event)
            assert [e.type for e in seen] == [
                "task.created",
                "task.updated",  # the title
                "task.updated",  # the move
                "task.moved",
                "workflow.updated",
                "task.updated",  # archived
                "task.deleted",
            ]
            created, renamed = seen[0].data["task"], seen[1].data["task"]
            assert created["id"] == task["id"] and created["title"] == "secret"
            assert renamed["title"] == "secret, renamed"
            assert set(created) == set(task)  # the task JSON as GET returns it
            assert seen[3].data["task"]["workflow_step_id"] == flow["steps"][1]["id"]
            wf = seen[4].data["workflow"]
            assert wf["id"] == flow["id"] and [s["name"] for s in wf["steps"]][2] == "QA"
            assert seen[5].data["task"]["archived_at"] is not None
            assert {k: seen[6].data[k] for k in ("task_id", "workspace_id", "workflow_id")} == {
                "task_id": task["id"],
                "workspace_id": ws["id"],
                "workflow_id": flow["id"],
            }

            # Bob's stream reaches his own new task without ever showing Alice's board.
            bob_ws = (await bob.post("/api/v1/workspaces", json={"name": "Bob's"})).json()
            bob_flow = (
                await bob.post(
                    "/api/v1/workflows", json={"workspace_id": bob_ws["id"], "name": "B"}
                )
            ).json()
            r = await bob.post(
                "/api/v1/tasks",
                json={"workspace_id": bob_ws["id"], "workflow_id": bob_flow["id"], "title": "b"},
            )
            mine = await bob_events.wait_for(lambda e: e.type == "task.created")
            assert mine.data["task"]["id"] == r.json()["id"]
            assert [e.type for e in bob_events.seen] == ["workflow.updated", "task.created"]
            assert "secret" not in str([e.data for e in bob_events.seen])
