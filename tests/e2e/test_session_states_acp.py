"""Session states tell the truth (docs/agents.md "Session states"), with a real ACP agent
process over a real uvicorn: the state sequence of a session, where its task goes when the
session fails or is stopped, failures in the conversation, and the log lines."""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.e2e.board_helpers import make_task, messages, scripted_profile, start_demo
from tests.sse_client import SseStream, of_type, sse_stream

ANSWERS = [
    {"question_id": "lang", "selected_options": ["py"]},
    {"question_id": "q2", "selected_options": ["q2_opt1"]},
]


@pytest.fixture
def server(live_server_factory, sqlite_url: str):
    return live_server_factory(sqlite_url)


async def _start(client: httpx.AsyncClient, task: dict, prompt: str | None, **env: str) -> str:
    profile = await scripted_profile(client, env=env)
    body = {"agent_profile_id": profile["id"]}
    if prompt is not None:
        body["prompt"] = prompt
    r = await client.post(f"/api/v1/tasks/{task['id']}/sessions", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["state"] == "CREATED"
    return r.json()["id"]


async def _states_until(events: SseStream, last: str) -> list[str]:
    """The session states announced from now on, up to and including `last`."""
    states: list[str] = []
    while not states or states[-1] != last:
        event = await events.wait_for(of_type("session.state_changed"))
        states.append(event.data["state"])
    return states


def _is_agent_text(event) -> bool:
    return event.type == "session.message.added" and event.data["message"]["author_type"] == "agent"


async def _task_state(client: httpx.AsyncClient, task: dict) -> str:
    return (await client.get(f"/api/v1/tasks/{task['id']}")).json()["state"]


async def test_an_initial_prompt_runs_before_the_session_is_ever_idle(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            await _start(client, task, "echo hi")
            assert await _states_until(events, "IDLE") == ["STARTING", "RUNNING", "IDLE"]
        assert await _task_state(client, task) == "REVIEW"


async def test_without_a_prompt_the_started_session_is_idle(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            await _start(client, task, None)
            assert await _states_until(events, "IDLE") == ["STARTING", "IDLE"]
        assert await _task_state(client, task) == "TODO"


async def test_stopping_a_session_mid_turn_moves_its_task_to_review(server, caplog) -> None:
    caplog.set_level(logging.INFO, logger="kandev")
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid = await _start(client, task, "slow")
            await events.wait_for(_is_agent_text)
            assert await _task_state(client, task) == "IN_PROGRESS"
            r = await client.post(f"/api/v1/sessions/{sid}/stop", json={})
            assert r.json()["state"] == "CANCELLED"
            updated = await events.wait_for(of_type("task.updated"))
            assert updated.data["task"]["state"] == "REVIEW"
        assert await _task_state(client, task) == "REVIEW"
    stopped = [r for r in caplog.records if getattr(r, "kandev_event", "") == "session stopped"]
    assert [r.kandev_fields["state"] for r in stopped] == ["CANCELLED"]
    assert stopped[0].kandev_fields["session_id"] == sid


def _tool_call(status: str):
    def match(event) -> bool:
        if not event.type.startswith("session.message."):
            return False
        message = event.data["message"]
        return message["type"] == "tool_call" and message["metadata"].get("status") == status

    return match


async def test_a_tool_call_open_when_its_session_stops_is_interrupted(server) -> None:
    """The demo agent's Ask call is in progress while it waits for the answer; stopping the
    session ends it — as `interrupted`, live, not `in_progress` forever."""
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid = await start_demo(client, task, "go")
            asking = await events.wait_for(_tool_call("in_progress"))
            r = await client.post(f"/api/v1/sessions/{sid}/stop", json={})
            assert r.json()["state"] == "CANCELLED"
            ended = await events.wait_for(_tool_call("interrupted"))
        assert ended.data["message"]["id"] == asking.data["message"]["id"]
        calls = [m for m in await messages(client, sid) if m["type"] == "tool_call"]
        assert [
            c["metadata"]["status"] for c in calls if c["id"] == asking.data["message"]["id"]
        ] == ["interrupted"]
        assert all(c["metadata"]["status"] != "in_progress" for c in calls)


async def test_a_crash_mid_turn_fails_the_session_into_the_conversation(server, caplog) -> None:
    caplog.set_level(logging.INFO, logger="kandev")
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid = await _start(client, task, "crash")
            assert await _states_until(events, "FAILED") == ["STARTING", "RUNNING", "FAILED"]
        assert await _task_state(client, task) == "REVIEW"
        history = await messages(client, sid)
        error = history[-1]
        assert (error["author_type"], error["type"]) == ("system", "error")
        assert error["content"].startswith("agent exited with code 3")
        assert "scripted agent: crashing on purpose" in error["content"]
        assert error["turn_id"] == history[0]["turn_id"]  # in the turn that failed
    events_logged = [getattr(r, "kandev_event", "") for r in caplog.records]
    assert "agent started" in events_logged and "agent exited" in events_logged
    failed = next(r for r in caplog.records if getattr(r, "kandev_event", "") == "session failed")
    assert failed.kandev_fields["session_id"] == sid
    assert failed.kandev_fields["reason"] == "agent exited with code 3"
    exited = next(r for r in caplog.records if getattr(r, "kandev_event", "") == "agent exited")
    assert exited.kandev_fields["code"] == 3


async def test_a_launch_failure_is_an_error_message_of_the_conversation(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            # The agent requires authentication and its env has no key: session/new fails.
            sid = await _start(client, task, "echo hi", SCRIPTED_AGENT_AUTH="KANDEV_TEST_NO_KEY")
            assert await _states_until(events, "FAILED") == ["STARTING", "FAILED"]
        history = await messages(client, sid)
        assert [(m["author_type"], m["type"]) for m in history] == [("system", "error")]
        assert history[0]["content"].startswith("agent refused ACP session/new (set ")
        assert "KANDEV_TEST_NO_KEY" in history[0]["content"]
        assert await _task_state(client, task) == "TODO"  # it never started work


async def test_questions_asked_and_answered_are_logged(server, caplog) -> None:
    caplog.set_level(logging.INFO, logger="kandev")
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid = await _start(client, task, "ask")
            await events.wait_for(of_type("session.state_changed", state="WAITING_FOR_INPUT"))
            asked = next(
                r for r in caplog.records if getattr(r, "kandev_event", "") == "question asked"
            )
            pending_id = asked.kandev_fields["pending_id"]
            assert (asked.kandev_fields["session_id"], asked.kandev_fields["questions"]) == (sid, 2)
            r = await client.post(
                f"/api/v1/clarification/{pending_id}/respond", json={"answers": ANSWERS}
            )
            assert r.status_code == 200, r.text
            await events.wait_for(of_type("session.turn.completed"))
    answered = next(
        r for r in caplog.records if getattr(r, "kandev_event", "") == "question answered"
    )
    assert answered.kandev_fields == {
        "pending_id": pending_id,
        "session_id": sid,
        "task_id": task["id"],
        "status": "answered",
        "via": "rest",
    }
    assert answered.getMessage().startswith(f"question answered pending_id={pending_id} ")
