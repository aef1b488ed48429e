"""Lifecycle hooks through the public API: supersession, expiry, the workflow guard."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from kandev.clarification.service import ClarificationService
from tests.api_client import asgi_client
from tests.e2e.board_helpers import make_task

QUESTIONS = [
    {
        "prompt": "Proceed?",
        "options": [
            {"label": "Yes", "description": "go on"},
            {"label": "No", "description": "stop"},
        ],
    }
]
ANSWER = {"answers": [{"question_id": "q1", "selected_options": ["q1_opt1"]}]}


@pytest.fixture
async def client(tmp_path: Path, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(tmp_path, database_url) as c:
        yield c


@asynccontextmanager
async def _question(client: httpx.AsyncClient):
    task = await make_task(client)
    sid = (await client.post(f"/api/v1/tasks/{task['id']}/sessions", json={})).json()["id"]
    await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "start"})
    r = await client.post(
        "/api/v1/clarification/request", json={"session_id": sid, "questions": QUESTIONS}
    )
    assert r.status_code == 200, r.text
    yield task, sid, r.json()["pending_id"]


async def test_a_new_turn_supersedes_the_open_question(client: httpx.AsyncClient) -> None:
    async with _question(client) as (task, sid, pending_id):
        shown = (await client.get(f"/api/v1/tasks/{task['id']}")).json()
        assert shown["primary_session_pending_action"] == "clarification"
        await client.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "never mind"})
        r = await client.post(f"/api/v1/clarification/{pending_id}/respond", json=ANSWER)
        assert (r.status_code, r.json()) == (
            409,
            {"error": "clarification request is no longer active"},
        )
        # Superseded, not rewritten: the rows still say pending, but nothing projects them.
        assert (await client.get(f"/api/v1/clarification/{pending_id}")).json()["status"] == (
            "pending"
        )
        session = (await client.get(f"/api/v1/sessions/{sid}")).json()
        assert session["pending_action"] is None


async def test_a_terminal_session_expires_its_questions(client: httpx.AsyncClient) -> None:
    async with _question(client) as (task, sid, pending_id):
        r = await client.post(f"/api/v1/sessions/{sid}/stop", json={"state": "COMPLETED"})
        assert r.status_code == 200
        assert (await client.get(f"/api/v1/clarification/{pending_id}")).json()["status"] == (
            "expired"
        )
        r = await client.post(f"/api/v1/clarification/{pending_id}/respond", json=ANSWER)
        assert r.status_code == 409
        shown = (await client.get(f"/api/v1/tasks/{task['id']}")).json()
        assert shown["task_pending_action"] is None
        assert shown["primary_session_pending_action"] is None


async def test_an_answer_with_no_managed_agent_is_recorded(client: httpx.AsyncClient) -> None:
    async with _question(client) as (_, sid, pending_id):
        r = await client.post(f"/api/v1/clarification/{pending_id}/respond", json=ANSWER)
        assert r.status_code == 200, r.text
        rows = [
            m
            for m in (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["messages"]
            if m["type"] == "clarification_request"
        ]
        assert rows[0]["metadata"]["status"] == "answered"
        assert rows[0]["metadata"]["response"]["selected_options"] == ["q1_opt1"]


async def test_the_workflow_guard_sees_open_questions_and_fails_closed(
    client: httpx.AsyncClient,
) -> None:
    service: ClarificationService = client.services.clarifications  # type: ignore[attr-defined]
    async with _question(client) as (_, sid, pending_id):
        assert await service.blocks_turn_complete(sid) is True
        r = await client.post(f"/api/v1/clarification/{pending_id}/respond", json=ANSWER)
        assert r.status_code == 200
        assert await service.blocks_turn_complete(sid) is False

    class BrokenDatabase:
        def read(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("database unavailable")

    broken = ClarificationService.__new__(ClarificationService)
    broken.db = BrokenDatabase()  # type: ignore[assignment]
    assert await broken.blocks_turn_complete(sid) is True  # unknown → automation waits
