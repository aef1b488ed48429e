"""Agents ask, humans answer — with a real ACP agent process and real HTTP (issue 4)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.e2e.board_helpers import make_task, messages, scripted_profile, start_demo
from tests.mcp.conftest import mcp_client, ok
from tests.server_process import start_serve, wait_for_health
from tests.sse_client import SseStream, of_type, sse_stream

ANSWERS = [
    {"question_id": "lang", "selected_options": ["py", "go"]},
    {"question_id": "q2", "selected_options": ["q2_opt1"], "custom_text": "after lunch"},
]


def _is_question(event) -> bool:
    return (
        event.type == "session.message.added"
        and event.data["message"]["type"] == "clarification_request"
        and event.data["message"]["requests_input"]
    )


async def _ask(client: httpx.AsyncClient, events: SseStream, task: dict, prompt: str) -> tuple:
    profile = await scripted_profile(client)
    r = await client.post(
        f"/api/v1/tasks/{task['id']}/sessions",
        json={"agent_profile_id": profile["id"], "prompt": prompt},
    )
    assert r.status_code == 201, r.text
    question = await events.wait_for(_is_question)
    return r.json()["id"], question.data["message"]["metadata"]["pending_id"]


@pytest.fixture
def server(live_server_factory, database_url):
    return live_server_factory(database_url, clarification_progress_seconds=0.2)


async def test_answer_reaches_the_blocked_agent_in_the_same_turn(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid, pending_id = await _ask(client, events, task, "ask")
            await events.wait_for(of_type("session.state_changed", state="WAITING_FOR_INPUT"))
            shown = (await client.get(f"/api/v1/tasks/{task['id']}")).json()
            assert shown["state"] == "REVIEW"
            assert shown["task_pending_action"] == "clarification"
            assert shown["primary_session_pending_action"] == "clarification"
            session = (await client.get(f"/api/v1/sessions/{sid}")).json()
            assert session["pending_action"] == "clarification"
            request = (await client.get(f"/api/v1/clarification/{pending_id}")).json()
            assert [q["id"] for q in request["questions"]] == ["lang", "q2"]

            r = await client.post(
                f"/api/v1/clarification/{pending_id}/respond", json={"answers": ANSWERS}
            )
            assert r.status_code == 200, r.text
            done = await events.wait_for(of_type("session.turn.completed"))
        history = await messages(client, sid)
        turns = {m["turn_id"] for m in history}
        assert turns == {done.data["turn_id"]}  # asked and answered within one turn
        result = json.loads(history[-1]["content"])
        assert result["pending_id"] == pending_id and result["rejected"] is False
        lang = result["answers"]["lang"]
        # Every selected option reaches the agent, with its label — not only the first.
        assert lang["selected_options"] == ["py", "go"]
        assert lang["selected_labels"] == ["Python", "Go"]
        assert result["answers"]["q2"]["custom_text"] == "after lunch"
        rows = [m for m in history if m["type"] == "clarification_request"]
        assert [m["metadata"]["status"] for m in rows] == ["answered", "answered"]
        assert not any("response_delivery_pending" in m["metadata"] for m in rows)
        after = (await client.get(f"/api/v1/tasks/{task['id']}")).json()
        assert after["task_pending_action"] is None
        # A second answer is told what won (R2), with nothing written or resumed.
        loser = [{"question_id": "lang", "selected_options": ["js"]}, ANSWERS[1]]
        again = await client.post(
            f"/api/v1/clarification/{pending_id}/respond", json={"answers": loser}
        )
        assert again.status_code == 200
        body = again.json()
        assert (body["claimed"], body["status"]) == (False, "answered")
        assert body["response"]["answers"][0]["selected_options"] == ["py", "go"]
        assert len(await messages(client, sid)) == len(history)


async def test_abandoned_call_is_resumed_in_a_new_turn(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid, pending_id = await _ask(client, events, task, "ask-abandon")
            first = await events.wait_for(of_type("session.turn.completed"))
            # The agent gave up; the question is still open and the session waits for it.
            session = (await client.get(f"/api/v1/sessions/{sid}")).json()
            assert session["state"] == "WAITING_FOR_INPUT"
            assert session["pending_action"] == "clarification"
            r = await client.post(
                f"/api/v1/clarification/{pending_id}/respond", json={"answers": ANSWERS}
            )
            assert r.status_code == 200, r.text
            second = await events.wait_for(of_type("session.turn.completed"))
        assert second.data["turn_id"] != first.data["turn_id"]
        history = await messages(client, sid)
        assert history[-1]["turn_id"] == second.data["turn_id"]
        reply = history[-1]["content"]
        assert reply.startswith("resumed with: [kandev:resume]")
        assert "Python" in reply and "Go" in reply and "after lunch" in reply
        rows = [m for m in history if m["type"] == "clarification_request"]
        assert all(m["metadata"]["agent_disconnected"] for m in rows)
        assert all(m["metadata"]["status"] == "answered" for m in rows)


async def test_rejection_without_a_waiting_agent_is_recorded_not_resumed(server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client)
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid, pending_id = await _ask(client, events, task, "ask-abandon")
            await events.wait_for(of_type("session.turn.completed"))
            r = await client.post(
                f"/api/v1/clarification/{pending_id}/respond",
                json={"rejected": True, "reason": "not now"},
            )
            assert r.status_code == 200, r.text
        history = await messages(client, sid)
        assert len({m["turn_id"] for m in history}) == 1  # no resume turn
        rows = [m for m in history if m["type"] == "clarification_request"]
        assert all(m["metadata"]["status"] == "rejected" for m in rows)
        session = (await client.get(f"/api/v1/sessions/{sid}")).json()
        assert session["pending_action"] is None


PROGRESS_ENV = {"KANDEV_CLARIFICATION_PROGRESS_SECONDS": "0.2"}


async def test_killed_server_restarts_with_the_question_open(tmp_path: Path) -> None:
    home, port = tmp_path / "home", free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_serve(home, port, env=PROGRESS_ENV)
    try:
        wait_for_health(url, proc)
        async with httpx.AsyncClient(base_url=url) as client:
            task = await make_task(client)
            async with sse_stream(client, params={"task_id": task["id"]}) as events:
                sid, pending_id = await _ask(client, events, task, "ask")
                await events.wait_for(of_type("session.state_changed", state="WAITING_FOR_INPUT"))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # no shutdown: a crash
        proc.wait(timeout=30)

    proc = start_serve(home, port, env=PROGRESS_ENV)
    try:
        wait_for_health(url, proc)
        async with httpx.AsyncClient(base_url=url) as client:
            request = (await client.get(f"/api/v1/clarification/{pending_id}")).json()
            assert request["status"] == "pending"
            session = (await client.get(f"/api/v1/sessions/{sid}")).json()
            assert session["state"] == "WAITING_FOR_INPUT"
            assert session["pending_action"] == "clarification"
            task_now = (await client.get(f"/api/v1/tasks/{task['id']}")).json()
            assert task_now["task_pending_action"] == "clarification"
            # The external list reads the durable rows: the question survived the crash.
            async with mcp_client(f"{url}/mcp") as external:
                listed = ok(await external.call_tool("list_pending_questions_kandev", {}))
            assert [b["pending_id"] for b in listed["bundles"]] == [pending_id]
            async with sse_stream(client, params={"task_id": task["id"]}) as events:
                r = await client.post(
                    f"/api/v1/clarification/{pending_id}/respond", json={"answers": ANSWERS}
                )
                assert r.status_code == 200, r.text
                await events.wait_for(of_type("session.turn.completed"))
            reply = (await messages(client, sid))[-1]["content"]
            assert reply.startswith("resumed with: [kandev:resume]")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


async def test_the_demo_agent_asks_and_quotes_the_answer(live_server_factory, sqlite_url) -> None:
    server = live_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as client:
        task = await make_task(client, "Try the demo")
        async with sse_stream(client, params={"task_id": task["id"]}) as events:
            sid = await start_demo(client, task, "tidy the README")
            question = await events.wait_for(_is_question)
            meta = question.data["message"]["metadata"]
            assert "tidy the README" in meta["question"]["prompt"]
            r = await client.post(
                f"/api/v1/clarification/{meta['pending_id']}/respond",
                json={
                    "answers": [
                        {
                            "question_id": meta["question_id"],
                            "selected_options": ["go_ahead"],
                            "custom_text": "keep it short",
                        }
                    ]
                },
            )
            assert r.status_code == 200, r.text
            await events.wait_for(of_type("session.turn.completed"))
        reply = (await messages(client, sid))[-1]["content"]
        assert '"Go ahead"' in reply and "keep it short" in reply
