"""Issue 14.3: the human's answer is one user message of the conversation, naming its surface."""

from __future__ import annotations

from typing import Any

import httpx

from tests.mcp.conftest import board, mcp_client, ok
from tests.mcp.test_answering_http import _question

ALPHA = {"answers": [{"question_id": "pick", "selected_options": ["a"]}]}


async def _answers(http: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await http.get(f"/api/v1/sessions/{sid}/messages", params={"limit": 500})
    assert r.status_code == 200, r.text
    return [m for m in r.json()["messages"] if m["author_type"] == "user" and m["type"] == "answer"]


async def test_rest_answer_is_one_user_message_and_a_loser_adds_none(
    mcp_server_factory, sqlite_url
) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        sid, pending_id = await _question(http)
        url = f"/api/v1/clarification/{pending_id}/respond"
        assert (await http.post(url, json=ALPHA)).json()["claimed"] is True
        beta = {"answers": [{"question_id": "pick", "selected_options": ["b"]}]}
        assert (await http.post(url, json=beta)).json()["claimed"] is False
        (message,) = await _answers(http, sid)
        assert message["content"] == 'You answered: "Alpha" (a)'
        assert message["metadata"]["pending_id"] == pending_id
        assert message["metadata"]["via"] == "rest"
        assert isinstance(message["metadata"]["answered_by"], str)
        # The task page shows it as the human's side of the dialogue.
        task_id = message["task_id"]
        page = await http.get(f"/tasks/{task_id}")
        assert page.status_code == 200
        assert "You answered: &#34;Alpha&#34; (a)" in page.text or (
            'You answered: "Alpha" (a)' in page.text
        )


async def test_mcp_answer_and_rejection_messages(mcp_server_factory, sqlite_url) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        task_id = (await board(http))["task"]["id"]
        async with mcp_client(server.external_url) as external:
            sid, pending_id = await _question(http, task_id)
            args = {
                "pending_id": pending_id,
                "answers": [
                    {"question_id": "pick", "selected_options": ["b"], "custom_text": "both"}
                ],
            }
            assert ok(await external.call_tool("answer_question_kandev", args))["claimed"]
            (message,) = await _answers(http, sid)
            assert message["content"] == 'You answered: "Beta" (b) — both'
            assert message["metadata"]["via"] == "mcp"

            sid, pending_id = await _question(http, task_id)
            skip = {"pending_id": pending_id, "rejected": True, "reject_reason": "not now"}
            assert ok(await external.call_tool("answer_question_kandev", skip))["claimed"]
            (message,) = await _answers(http, sid)
            assert message["content"] == "You skipped the questions: not now"
            assert message["metadata"]["via"] == "mcp"


async def test_inbox_answer_is_recorded_via_web(mcp_server_factory, sqlite_url) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        sid, pending_id = await _question(http)
        r = await http.post(
            f"/inbox/{pending_id}/answer", data={"question_id": "pick", "option.pick": "a"}
        )
        assert r.status_code == 303, r.text
        (message,) = await _answers(http, sid)
        assert message["metadata"]["via"] == "web"
