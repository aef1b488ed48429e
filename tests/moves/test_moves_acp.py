"""Moves with a real ACP agent process behind a real uvicorn (tests/agents/scripted_agent.py):
deferred during a turn and applied at its end, step entry prompts reaching the agent,
replacement without orphans, a restart in between, human moves while the agent runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from kandev.db.engine import Database
from kandev.db.tables import applied_moves, pending_moves, queued_prompts
from kandev.moves.step_events import INSTRUCTIONS_PREFIX
from tests.e2e.board_helpers import messages, scripted_profile
from tests.mcp.conftest import mcp_client, ok
from tests.moves.helpers import rows
from tests.sse_client import SseEvent, SseStream, of_type, sse_stream

DESCRIPTION = "the task description"
ENTRY_PROMPT = (
    "## Workflow instructions\n\nWF-RULES\n\n"
    f"STEP-PROMPT for {DESCRIPTION}\n\n{INSTRUCTIONS_PREFIX}"
)
STEPS = [
    {"name": "Backlog"},
    {
        "name": "Work",
        "prompt": "STEP-PROMPT for {{task_prompt}}",
        "events": {
            "on_enter": [{"type": "auto_start_agent"}],
            "on_turn_complete": [{"type": "move_to_next"}],
        },
    },
    {"name": "Review"},
    {"name": "Done"},
]


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """The server's database, opened from the test's own event loop for inspection."""
    database = Database(database_url)
    yield database
    await database.dispose()


async def _board(http: httpx.AsyncClient, title: str = "Task") -> tuple[dict, dict]:
    ws = (await http.post("/api/v1/workspaces", json={"name": "W"})).json()
    r = await http.post(
        "/api/v1/workflows",
        json={"workspace_id": ws["id"], "name": "F", "prompt": "WF-RULES", "steps": STEPS},
    )
    assert r.status_code == 201, r.text
    flow = r.json()
    r = await http.post(
        "/api/v1/tasks",
        json={
            "workspace_id": ws["id"],
            "workflow_id": flow["id"],
            "title": title,
            "description": DESCRIPTION,
        },
    )
    assert r.status_code == 201, r.text
    return flow, r.json()


def _step(flow: dict, name: str) -> str:
    return next(s["id"] for s in flow["steps"] if s["name"] == name)


def _move_args(flow: dict, task: dict, step: str, **options: Any) -> dict[str, Any]:
    return {
        "task_id": task["id"],
        "workflow_id": flow["id"],
        "workflow_step_id": _step(flow, step),
        **options,
    }


async def _start(http: httpx.AsyncClient, task: dict, prompt: str) -> str:
    listed = (await http.get("/api/v1/agent-profiles")).json()["agent_profiles"]
    profile = next((p for p in listed if p["name"] == "scripted"), None)
    if profile is None:
        profile = await scripted_profile(http)
    r = await http.post(
        f"/api/v1/tasks/{task['id']}/sessions",
        json={"agent_profile_id": profile["id"], "prompt": prompt},
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _agent_said(text: str):  # type: ignore[no-untyped-def]
    def match(event: SseEvent) -> bool:
        message = event.data.get("message") or {}
        return (
            event.type in ("session.message.added", "session.message.updated")
            and message.get("author_type") == "agent"
            and text in message.get("content", "")
        )

    return match


async def _slow_turn(http: httpx.AsyncClient, events: SseStream, task: dict) -> str:
    session_id = await _start(http, task, "slow")
    await events.wait_for(_agent_said("working"))  # the turn is running
    return session_id


async def _task(http: httpx.AsyncClient, task_id: str) -> dict:
    return (await http.get(f"/api/v1/tasks/{task_id}")).json()


async def test_an_agent_moves_its_own_task_the_move_lands_when_its_turn_ends(
    live_server_factory, database_url, db
) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        flow, task = await _board(http)
        args = _move_args(flow, task, "Work", instructions="INSTR-A", position=0)
        async with sse_stream(http, params={"task_id": task["id"]}) as events:
            session_id = await _start(http, task, "move " + json.dumps(args))
            first_turn = await events.wait_for(of_type("session.turn.completed"))
            applied = await events.wait_for(of_type("task.moved"))
            automated = await events.wait_for(of_type("task.moved"))
        history = await messages(http, session_id)
        stored = await _task(http, task["id"])

    # The tool call happened during the agent's own turn: deferred, task not moved yet.
    reply = json.loads(history[1]["content"])
    assert history[1]["turn_id"] == first_turn.data["turn_id"]
    assert reply["disposition"] == "deferred" and reply["move_id"]
    assert reply["task"]["workflow_step_id"] == _step(flow, "Backlog")
    # Applied once the turn ended, then the step's on_enter prompted the agent.
    assert applied.data["move_id"] == reply["move_id"] and applied.data["actor"] == "agent"
    assert applied.data["to_step_id"] == _step(flow, "Work")
    assert applied.id > first_turn.id
    entry, answer = history[2], history[3]
    assert (entry["author_type"], entry["content"]) == ("user", ENTRY_PROMPT + "INSTR-A")
    assert answer["author_type"] == "agent"
    assert answer["content"] == f"unknown command: ##\nreceived: {ENTRY_PROMPT}INSTR-A"
    # That turn completed in Work: on_turn_complete moved the task on.
    assert automated.data["actor"] == "workflow" and "move_id" not in automated.data
    assert automated.data["to_step_id"] == _step(flow, "Review")
    assert stored["workflow_step_id"] == _step(flow, "Review")
    assert await rows(db, pending_moves) == []
    assert await rows(db, queued_prompts) == []
    assert [r["move_id"] for r in await rows(db, applied_moves)] == [reply["move_id"]]


async def test_a_replaced_deferred_move_leaves_no_orphan_prompt(
    live_server_factory, database_url, db
) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        flow, task = await _board(http)
        async with (
            sse_stream(http, params={"task_id": task["id"]}) as events,
            mcp_client(f"{server.url}/mcp") as mcp,
        ):
            session_id = await _slow_turn(http, events, task)
            old = ok(
                await mcp.call_tool(
                    "move_task_kandev", _move_args(flow, task, "Review", instructions="OLD-HANDOFF")
                )
            )
            new = ok(
                await mcp.call_tool(
                    "move_task_kandev", _move_args(flow, task, "Work", instructions="NEW-HANDOFF")
                )
            )
            assert old["disposition"] == new["disposition"] == "deferred"
            assert old["task"] == new["task"] == await _task(http, task["id"])  # not moved yet
            dropped = await events.wait_for(of_type("task.move_dropped"))
            assert dropped.data["move_id"] == old["move_id"]
            assert dropped.data["reason"] == "replaced"
            [pending] = await rows(db, pending_moves)
            assert (pending["move_id"], pending["session_id"]) == (new["move_id"], session_id)
            assert (pending["actor"], pending["sender_session_id"]) == ("mcp", "")
            assert await rows(db, queued_prompts) == []

            r = await http.post(f"/api/v1/sessions/{session_id}/cancel")
            assert r.json() == {"cancelled": True}
            applied = await events.wait_for(of_type("task.moved"))
            await events.wait_for(of_type("task.moved"))  # the entry turn ended in Work
        history = await messages(http, session_id)

    assert applied.data["move_id"] == new["move_id"]
    assert [m["content"] for m in history if m["author_type"] == "user"] == [
        "slow",
        ENTRY_PROMPT + "NEW-HANDOFF",
    ]
    assert not any("OLD-HANDOFF" in m["content"] for m in history)
    assert await rows(db, pending_moves) == [] and await rows(db, queued_prompts) == []
    assert {r["move_id"] for r in await rows(db, applied_moves)} == {
        old["move_id"],
        new["move_id"],
    }


async def test_the_target_tasks_session_decides_and_the_caller_is_the_sender(
    live_server_factory, database_url, db
) -> None:
    """Agent X moves task Y while Y's agent is mid-turn: the move waits for Y's turn, stored
    on Y's session with X's session as sender; Y's session ending drops it, visibly."""
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        flow, task_x = await _board(http, "X")
        r = await http.post(
            "/api/v1/tasks",
            json={"workspace_id": task_x["workspace_id"], "workflow_id": flow["id"], "title": "Y"},
        )
        task_y = r.json()
        async with sse_stream(http) as events:
            session_y = await _slow_turn(http, events, task_y)
            args = _move_args(flow, task_y, "Review")
            session_x = await _start(http, task_x, "move " + json.dumps(args))
            done = await events.wait_for(of_type("session.turn.completed", session_id=session_x))
            reply = json.loads((await messages(http, session_x))[-1]["content"])
            assert done.data["stop_reason"] == "end_turn"
            assert reply["disposition"] == "deferred"
            [pending] = await rows(db, pending_moves)
            assert (pending["session_id"], pending["sender_session_id"]) == (session_y, session_x)
            assert pending["actor"] == "agent"

            await http.post(f"/api/v1/sessions/{session_y}/stop", json={})
            dropped = await events.wait_for(of_type("task.move_dropped"))
        assert dropped.data["reason"] == "session_ended"
        assert dropped.data["move_id"] == reply["move_id"]
        assert (await _task(http, task_y["id"]))["workflow_step_id"] == _step(flow, "Backlog")
        assert await rows(db, pending_moves) == []


async def test_a_restart_between_defer_and_turn_end_applies_the_move_once(
    live_server_factory, database_url, db
) -> None:
    first = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=first.url) as http:
        flow, task = await _board(http)
        async with (
            sse_stream(http, params={"task_id": task["id"]}) as events,
            mcp_client(f"{first.url}/mcp") as mcp,
        ):
            session_id = await _slow_turn(http, events, task)
            deferred = ok(
                await mcp.call_tool(
                    "move_task_kandev", _move_args(flow, task, "Work", instructions="AFTER-RESTART")
                )
            )
    assert deferred["disposition"] == "deferred"
    first.stop()  # the turn dies with the server; the pending move is on disk
    [pending] = await rows(db, pending_moves)
    assert pending["move_id"] == deferred["move_id"]

    second = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=second.url) as http:
        assert (await http.get(f"/api/v1/sessions/{session_id}")).json()["state"] == "IDLE"
        assert (await _task(http, task["id"]))["workflow_step_id"] == _step(flow, "Backlog")
        async with sse_stream(http, params={"task_id": task["id"]}) as events:
            r = await http.post(f"/api/v1/sessions/{session_id}/prompt", json={"text": "echo hi"})
            assert r.json()["queued"] is False
            applied = await events.wait_for(of_type("task.moved"))
            await events.wait_for(of_type("task.moved"))  # the entry turn ended in Work
            r = await http.post(
                f"/api/v1/sessions/{session_id}/prompt", json={"text": "echo once more"}
            )
            last = await events.wait_for(of_type("session.turn.completed"))
            assert last.data["turn_id"] == r.json()["turn_id"]
            moved = [e for e in events.seen if e.type == "task.moved"]
        history = await messages(http, session_id)

    assert applied.data["move_id"] == deferred["move_id"]
    assert [e.data.get("move_id") for e in moved] == [deferred["move_id"], None]
    user_prompts = [m["content"] for m in history if m["author_type"] == "user"]
    assert user_prompts == ["slow", "echo hi", ENTRY_PROMPT + "AFTER-RESTART", "echo once more"]
    assert await rows(db, pending_moves) == []
    assert [r["move_id"] for r in await rows(db, applied_moves)] == [deferred["move_id"]]


async def test_a_human_move_while_the_agent_runs_applies_now_and_enters_the_step(
    live_server_factory, database_url, db
) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        flow, task = await _board(http)
        async with sse_stream(http, params={"task_id": task["id"]}) as events:
            session_id = await _slow_turn(http, events, task)
            r = await http.post(
                f"/api/v1/tasks/{task['id']}/move",
                json={"workflow_id": flow["id"], "workflow_step_id": _step(flow, "Work")},
            )
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["disposition"] == "applied"
            assert body["task"]["workflow_step_id"] == _step(flow, "Work")
            assert body["workflow_step"]["id"] == _step(flow, "Work")
            moved = await events.wait_for(of_type("task.moved"))
            assert moved.data["actor"] == "user"
            assert server.services.orchestrator.has_live_turn(session_id)
            [queued] = await rows(db, queued_prompts)  # the step prompt waits for the turn
            assert queued["content"] == ENTRY_PROMPT.removesuffix(f"\n\n{INSTRUCTIONS_PREFIX}")

            await http.post(f"/api/v1/sessions/{session_id}/cancel")
            entered = await events.wait_for(_agent_said("received: ## Workflow instructions"))
            automated = await events.wait_for(of_type("task.moved"))
        stored = await _task(http, task["id"])
    assert "STEP-PROMPT for the task description" in entered.data["message"]["content"]
    # The cancelled turn began in Backlog: no automation; the entry turn's end moved it on.
    assert automated.data["actor"] == "workflow"
    assert automated.data["from_step_id"] == _step(flow, "Work")
    assert stored["workflow_step_id"] == _step(flow, "Review")


async def test_an_idle_agent_is_prompted_on_entry_and_reset_gives_a_fresh_context(
    live_server_factory, database_url
) -> None:
    server = live_server_factory(database_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        flow, task = await _board(http)
        async with (
            sse_stream(http, params={"task_id": task["id"]}) as events,
            mcp_client(f"{server.url}/mcp") as mcp,
        ):
            session_id = await _start(http, task, "whoami")
            await events.wait_for(of_type("session.turn.completed"))
            before = json.loads((await messages(http, session_id))[-1]["content"])

            # Idle session: applied now, and on_enter starts a turn with the step prompt.
            body = ok(await mcp.call_tool("move_task_kandev", _move_args(flow, task, "Work")))
            assert body["disposition"] == "applied" and "move_id" not in body
            assert body["task"]["workflow_step_id"] == _step(flow, "Work")
            await events.wait_for(_agent_said("received: ## Workflow instructions"))
            await events.wait_for(of_type("task.moved", **{"actor": "workflow"}))

            # A fresh context, automation skipped: no prompt; the next one opens a new session.
            body = ok(
                await mcp.call_tool(
                    "move_task_kandev", _move_args(flow, task, "Work", reset=True, skip=True)
                )
            )
            assert body["disposition"] == "applied"
            r = await http.post(f"/api/v1/sessions/{session_id}/prompt", json={"text": "whoami"})
            assert r.json()["queued"] is False
            await events.wait_for(of_type("session.turn.completed", turn_id=r.json()["turn_id"]))
        after = json.loads((await messages(http, session_id))[-1]["content"])
        user_prompts = [m["content"] for m in await messages(http, session_id)]
    assert before["opened_with"] == "new"
    assert after["opened_with"] == "new" and after["session_id"] != before["session_id"]
    assert sum(p.startswith("## Workflow") for p in user_prompts) == 1  # skip: no new prompt
