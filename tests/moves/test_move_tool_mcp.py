"""move_task_kandev through the official MCP client over HTTP, on both surfaces: the
same-step contract under 47 repeats, the validation matrix as tool errors, the schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import update

from kandev.board import workflow_repository
from kandev.db.engine import Database
from kandev.db.tables import pending_moves, queued_prompts, tasks
from kandev.moves.validation import LOOKUP_FAILED
from tests.e2e.board_helpers import scripted_profile
from tests.mcp.conftest import bearer_client, board, mcp_client, ok, tool_error, two_users
from tests.moves.helpers import rows, snapshot
from tests.sse_client import sse_stream

REPEATS = 47


async def _agent_session(http: httpx.AsyncClient, task_id: str, prompt: str) -> str:
    profile = await scripted_profile(http)
    r = await http.post(
        f"/api/v1/tasks/{task_id}/sessions",
        json={"agent_profile_id": profile["id"], "prompt": prompt},
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _is_agent_text(event) -> bool:  # type: ignore[no-untyped-def]
    return event.type == "session.message.added" and event.data["message"]["author_type"] == "agent"


async def test_47_same_step_requests_change_nothing(live_server_factory, database_url) -> None:
    server = live_server_factory(database_url)
    db = Database(database_url)
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            b = await board(http)
            task, flow = b["task"], b["workflow"]
            r = await http.post(
                "/api/v1/tasks",
                json={
                    "workspace_id": task["workspace_id"],
                    "workflow_id": flow["id"],
                    "title": "o",
                },
            )
            other = r.json()
            # The task's primary session is in the middle of a real agent turn.
            async with sse_stream(http, params={"task_id": task["id"]}) as events:
                session_id = await _agent_session(http, task["id"], "slow")
                await events.wait_for(_is_agent_text)
            sibling = (await http.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()
            other_session = (
                await http.post(f"/api/v1/tasks/{other['id']}/sessions", json={})
            ).json()
            r = await http.post(f"/api/v1/sessions/{session_id}/agent-token")
            creds = r.json()
            # Queued work and an unrelated deferred move that must keep identity and payload.
            now = datetime.now(UTC)
            async with db.write() as conn:
                await conn.execute(
                    update(tasks).where(tasks.c.id == task["id"]).values(metadata={"keep": [1]})
                )
                for i, text in enumerate(("queued one", "queued two")):
                    await conn.execute(
                        queued_prompts.insert().values(
                            id=f"queued-{i}",
                            session_id=session_id,
                            task_id=task["id"],
                            position=i,
                            content=text,
                            queued_by="someone",
                            queued_at=now,
                        )
                    )
                await conn.execute(
                    pending_moves.insert().values(
                        id="seeded-row",
                        move_id="seeded-move",
                        session_id=other_session["id"],
                        task_id=other["id"],
                        workflow_id=flow["id"],
                        workflow_step_id=flow["steps"][2]["id"],
                        step_position=4,
                        instructions="unrelated hand-off",
                        actor="agent",
                        sender_session_id=sibling["id"],
                        metadata={"seeded": True},
                        queued_at=now,
                    )
                )
            stored = (await http.get(f"/api/v1/tasks/{task['id']}")).json()
            before = await snapshot(db)
            seeded = await rows(db, pending_moves, id="seeded-row")
            last_event = server.services.bus.last_id

            positions = [None, 0, stored["position"], 3, 999]
            same = {"task_id": task["id"], "workflow_id": flow["id"]}
            same["workflow_step_id"] = stored["workflow_step_id"]
            async with (
                mcp_client(f"{server.url}/mcp") as external,
                mcp_client(creds["mcp_url"], creds["token"]) as agent,
            ):
                for i in range(REPEATS):
                    client = external if i % 2 == 0 else agent
                    arguments = dict(same)
                    if positions[i % len(positions)] is not None:
                        arguments["position"] = positions[i % len(positions)]
                    if i % 3 == 0:  # empty entry options count as none
                        arguments.update(instructions="", reset=False, skip=False)
                    body = ok(await client.call_tool("move_task_kandev", arguments))
                    assert body == {"disposition": "applied", "task": stored}, i

            assert await snapshot(db) == before
            assert await rows(db, pending_moves, id="seeded-row") == seeded
            assert server.services.bus.last_id == last_event
            assert server.services.orchestrator.has_live_turn(session_id)
            await http.post(f"/api/v1/sessions/{session_id}/stop", json={})
    finally:
        await db.dispose()


@pytest.fixture
async def mcp_board(live_server_factory, database_url):  # type: ignore[no-untyped-def]
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        second = (
            await http.post(
                "/api/v1/workflows",
                json={"workspace_id": b["workspace"]["id"], "name": "Second"},
            )
        ).json()
        session = (await http.post(f"/api/v1/tasks/{b['task']['id']}/sessions", json={})).json()
        creds = (await http.post(f"/api/v1/sessions/{session['id']}/agent-token")).json()
    yield server, b, second, creds


def _cases(b: dict, second: dict) -> list[tuple[str, dict, str, str]]:
    task, flow = b["task"], b["workflow"]
    here = {"task_id": task["id"], "workflow_id": flow["id"]}
    same = {**here, "workflow_step_id": task["workflow_step_id"]}
    later = {**here, "workflow_step_id": flow["steps"][1]["id"]}
    return [
        ("missing task", {**same, "task_id": "fabricated"}, "NOT_FOUND", "task not found"),
        ("missing workflow", {**same, "workflow_id": "nope"}, "VALIDATION_ERROR", "workflow_id"),
        ("missing step", {**here, "workflow_step_id": "nope"}, "VALIDATION_ERROR", "no such"),
        (
            "step of another workflow",
            {**here, "workflow_step_id": second["steps"][0]["id"]},
            "VALIDATION_ERROR",
            "workflow_step_id: no such step in the target workflow",
        ),
        ("same step + instructions", {**same, "instructions": "x"}, "VALIDATION_ERROR", "instr"),
        ("same step + prompt", {**same, "prompt": "x"}, "VALIDATION_ERROR", "instructions"),
        ("same step + reset", {**same, "reset": True}, "VALIDATION_ERROR", "reset"),
        ("same step + skip", {**same, "skip": True}, "VALIDATION_ERROR", "skip"),
        ("bad reset type", {**later, "reset": "yes"}, "VALIDATION_ERROR", "reset"),
        ("negative position", {**later, "position": -1}, "VALIDATION_ERROR", "position"),
        ("missing step id", here, "VALIDATION_ERROR", "workflow_step_id"),
    ]


@pytest.mark.parametrize("surface", ["external", "agent"])
async def test_validation_errors_on_both_surfaces(mcp_board, surface: str) -> None:
    server, b, second, creds = mcp_board
    url, token = (
        (f"{server.url}/mcp", None) if surface == "external" else (creds["mcp_url"], creds["token"])
    )
    last_event = server.services.bus.last_id
    async with mcp_client(url, token) as client:
        for name, arguments, code, text in _cases(b, second):
            error = tool_error(await client.call_tool("move_task_kandev", arguments))
            assert error["code"] == code, (name, error)
            assert text in error["message"], (name, error)
    assert server.services.bus.last_id == last_event


async def test_archived_task_is_a_conflict(mcp_board, database_url) -> None:
    _, b, _, creds = mcp_board
    db = Database(database_url)
    try:
        async with db.write() as conn:
            await conn.execute(
                update(tasks)
                .where(tasks.c.id == b["task"]["id"])
                .values(archived_at=datetime.now(UTC))
            )
    finally:
        await db.dispose()
    arguments = {
        "task_id": b["task"]["id"],
        "workflow_id": b["workflow"]["id"],
        "workflow_step_id": b["task"]["workflow_step_id"],
    }
    async with mcp_client(creds["mcp_url"], creds["token"]) as client:
        error = tool_error(await client.call_tool("move_task_kandev", arguments))
    assert error == {"code": "CONFLICT", "message": "archived tasks cannot be moved"}


async def test_lookup_failure_is_internal_without_detail(mcp_board, monkeypatch) -> None:
    server, b, _, _ = mcp_board

    async def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("relation workflow_steps: connection to 10.0.0.7 refused")

    monkeypatch.setattr(workflow_repository, "get_workflow", broken)
    arguments = {
        "task_id": b["task"]["id"],
        "workflow_id": b["workflow"]["id"],
        "workflow_step_id": b["task"]["workflow_step_id"],
    }
    async with mcp_client(f"{server.url}/mcp") as client:
        error = tool_error(await client.call_tool("move_task_kandev", arguments))
    assert error == {"code": "INTERNAL_ERROR", "message": LOOKUP_FAILED}


async def test_foreign_tasks_are_not_found_never_internal(live_server_factory, sqlite_url):
    server = live_server_factory(sqlite_url, auth=True)
    alice_pat, bob_pat = await two_users(server.url)
    async with bearer_client(server.url, alice_pat) as alice:
        b = await board(alice, "Alice")
    task, flow = b["task"], b["workflow"]
    arguments = {
        "task_id": task["id"],
        "workflow_id": flow["id"],
        "workflow_step_id": flow["steps"][1]["id"],
        "instructions": "x",
    }
    async with mcp_client(f"{server.url}/mcp", bob_pat) as bob:
        foreign = tool_error(await bob.call_tool("move_task_kandev", arguments))
        fabricated = tool_error(
            await bob.call_tool("move_task_kandev", {**arguments, "task_id": "fabricated"})
        )
    assert foreign == fabricated == {"code": "NOT_FOUND", "message": "task not found"}
    async with mcp_client(f"{server.url}/mcp", alice_pat) as alice_mcp:
        moved = ok(
            await alice_mcp.call_tool(
                "move_task_kandev", {k: v for k, v in arguments.items() if k != "instructions"}
            )
        )
    assert moved["disposition"] == "applied"
    assert moved["task"]["workflow_step_id"] == flow["steps"][1]["id"]


async def test_the_tool_is_on_both_surfaces_and_says_what_it_returns(mcp_board) -> None:
    server, _, _, creds = mcp_board
    for url, token in ((f"{server.url}/mcp", None), (creds["mcp_url"], creds["token"])):
        async with mcp_client(url, token) as client:
            tool = next(
                t for t in (await client.list_tools()).tools if t.name == "move_task_kandev"
            )
        for word in ('"applied"', '"deferred"', "move_id", "instructions", "reset", "skip"):
            assert word in tool.description, word
        schema = tool.input_schema
        assert set(schema["required"]) == {"task_id", "workflow_id", "workflow_step_id"}
        assert {"position", "prompt", "instructions", "reset", "skip"} <= set(schema["properties"])


async def test_an_immediate_move_returns_the_moved_task(mcp_board) -> None:
    server, b, _, _ = mcp_board
    task, flow = b["task"], b["workflow"]
    async with (
        httpx.AsyncClient(base_url=server.url) as http,
        sse_stream(http, params={"task_id": task["id"]}) as events,
        mcp_client(f"{server.url}/mcp") as client,
    ):
        arguments = {
            "task_id": task["id"],
            "workflow_id": flow["id"],
            "workflow_step_id": flow["steps"][2]["id"],
            "position": 0,
        }
        body = ok(await client.call_tool("move_task_kandev", arguments))
        moved = await events.wait_for(lambda e: e.type == "task.moved")
        stored = (await http.get(f"/api/v1/tasks/{task['id']}")).json()
    assert body == {"disposition": "applied", "task": stored}
    assert stored["workflow_step_id"] == flow["steps"][2]["id"] and stored["position"] == 0
    assert moved.data["from_step_id"] == task["workflow_step_id"]
    assert moved.data["to_step_id"] == flow["steps"][2]["id"]
    assert moved.data["actor"] == "mcp" and "move_id" not in moved.data
    assert json.dumps(moved.data["task"]["id"]) == json.dumps(task["id"])
