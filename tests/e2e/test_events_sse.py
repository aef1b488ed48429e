"""GET /api/v1/events over a real uvicorn: order, Last-Event-ID replay, scoping."""

from __future__ import annotations

import httpx

from tests.e2e.board_helpers import make_task
from tests.sse_client import sse_stream

PASSWORD = "correct horse battery"


async def _session(client: httpx.AsyncClient, task_id: str) -> str:
    r = await client.post(f"/api/v1/tasks/{task_id}/sessions", json={})
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def test_reconnecting_with_last_event_id_gets_exactly_what_was_missed(
    live_server_factory, database_url: str
) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        sid = await _session(client, task["id"])
        async with sse_stream(client) as watcher:  # stays connected throughout: the truth
            async with sse_stream(client) as early:
                await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "one"})
                # A prompt to an agent-less session: turn started, user message, RUNNING,
                # and the task goes IN_PROGRESS.
                seen = await early.take(4)
            assert [e.type for e in seen] == [
                "session.turn.started",
                "session.message.added",
                "session.state_changed",
                "task.updated",
            ]
            last_seen = seen[-1].id
            # Disconnected: these happen while the client is away.
            await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "two"})
            await client.post(f"/api/v1/sessions/{sid}/stop", json={"state": "COMPLETED"})
            everything = await watcher.take(4 + 2 + 1)
            async with sse_stream(client, headers={"Last-Event-ID": str(last_seen)}) as late:
                replayed = await late.take(3)
                # Then it follows live events.
                task2 = await client.post(
                    "/api/v1/tasks",
                    json={
                        "workspace_id": task["workspace_id"],
                        "workflow_id": task["workflow_id"],
                        "title": "x",
                    },
                )
                assert task2.status_code == 201
        missed = [e for e in everything if e.id > last_seen]
        assert [(e.id, e.data) for e in replayed] == [(e.id, e.data) for e in missed]
        ids = [e.id for e in everything]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert [e.data["message"]["content"] for e in everything if "message" in e.data] == [
            "one",
            "two",
        ]
        assert everything[-1].type == "session.state_changed"
        assert everything[-1].data["state"] == "COMPLETED"


async def test_events_are_scoped_to_the_caller(live_server_factory, sqlite_url: str) -> None:
    server = live_server_factory(sqlite_url, auth=True)
    async with httpx.AsyncClient(base_url=server.url) as alice:
        r = await alice.post(
            "/api/v1/auth/setup", json={"email": "alice@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200
        r = await alice.post(
            "/api/v1/users", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 201
        async with httpx.AsyncClient(base_url=server.url) as bob:
            r = await bob.post(
                "/api/v1/auth/login", json={"email": "bob@example.com", "password": PASSWORD}
            )
            assert r.status_code == 200
            alice_task = await make_task(alice, "alice's")
            alice_sid = await _session(alice, alice_task["id"])
            r = await bob.get("/api/v1/events", params={"task_id": alice_task["id"]})
            assert (r.status_code, r.json()) == (404, {"error": "task not found"})
            async with sse_stream(bob) as bob_events, sse_stream(alice) as alice_events:
                await alice.post(f"/api/v1/sessions/{alice_sid}/prompt", json={"text": "secret"})
                bob_task = await make_task(bob, "bob's")
                bob_sid = await _session(bob, bob_task["id"])
                await bob.post(f"/api/v1/sessions/{bob_sid}/prompt", json={"text": "mine"})
                # Bob's stream reaches his own prompt without ever showing Alice's.
                seen = await bob_events.wait_for(
                    lambda e: e.data.get("message", {}).get("content") == "mine"
                )
                assert all(e.data.get("task_id") != alice_task["id"] for e in bob_events.seen)
                assert "secret" not in str([e.data for e in bob_events.seen])
                assert seen.data["message"]["session_id"] == bob_sid
                # Alice sees her own prompt (and, with no owner in common, not Bob's).
                mine = await alice_events.wait_for(
                    lambda e: e.data.get("message", {}).get("content") == "secret"
                )
                assert mine.data["message"]["session_id"] == alice_sid
        async with httpx.AsyncClient(base_url=server.url) as anonymous:
            r = await anonymous.get("/api/v1/events")
            assert r.status_code == 401
