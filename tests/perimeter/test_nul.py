"""U+0000 in input → 400 naming the field on both databases; MCP → VALIDATION_ERROR."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from tests.mcp.conftest import agent_token, board, mcp_client, tool_error
from tests.perimeter.conftest import make_board

QUESTIONS = [
    {
        "id": "pick",
        "prompt": "Pick one",
        "options": [
            {"option_id": "a", "label": "Alpha", "description": "first"},
            {"option_id": "b", "label": "Beta", "description": "second"},
        ],
    }
]


def refused(field: str) -> tuple[int, dict[str, str]]:
    return 400, {"error": f"{field}: must not contain NUL characters"}


async def test_nul_in_rest_input_is_a_400_naming_the_field(
    start: Callable[..., Any], http: Callable[[str], httpx.AsyncClient], database_url: str
) -> None:
    client = http(start(database_url).url)
    b = await make_board(client)
    ws_id, task_id = b["workspace"]["id"], b["task"]["id"]
    cases: list[tuple[str, str, Any, str]] = [
        ("POST", "/api/v1/workspaces", {"name": "a\x00b"}, "name"),
        ("POST", "/api/v1/workspaces", {"name": "W", "description": "\x00"}, "description"),
        ("POST", "/api/v1/workspaces", {"name": "W", "x\x00": 1}, "body"),  # a key
        (
            "POST",
            "/api/v1/workflows",
            {"workspace_id": ws_id, "name": "F", "steps": [{"name": "ok"}, {"name": "\x00"}]},
            "steps.1.name",
        ),
        ("PATCH", f"/api/v1/tasks/{task_id}", {"title": "T\x00"}, "title"),
        (
            "POST",
            "/api/v1/agent-profiles",
            {"name": "p", "command": ["agent"], "env": {"K": "v\x00"}},
            "env.K",
        ),
        ("POST", "/api/v1/auth/login", {"email": "a@b.c\x00", "password": "x"}, "email"),
    ]
    for method, path, body, field in cases:
        r = await client.request(method, path, json=body)
        assert (r.status_code, r.json()) == refused(field), (path, body)
    r = await client.get("/api/v1/tasks", params={"workflow_id": "x\x00"})
    assert (r.status_code, r.json()) == refused("workflow_id")
    r = await client.get("/api/v1/tasks/ab%00cd")
    assert (r.status_code, r.json()) == refused("path")
    # Nothing was written, and the escaped text "\\u0000" (no NUL in it) is just text.
    assert (await client.get("/api/v1/workspaces")).json()["total"] == 1
    assert (await client.get(f"/api/v1/tasks/{task_id}")).json()["title"] == "T"
    r = await client.post("/api/v1/workspaces", json={"name": "back\\u0000slash"})
    assert r.status_code == 201 and r.json()["name"] == "back\\u0000slash"


async def test_nul_in_mcp_arguments_is_a_validation_error(
    start: Callable[..., Any], database_url: str
) -> None:
    server = start(database_url)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        b = await board(http)
        sid, creds = await agent_token(http, b["task"]["id"])
        await http.post(f"/api/v1/sessions/{sid}/prompt", json={"text": "go"})
        r = await http.post(
            "/api/v1/clarification/request", json={"session_id": sid, "questions": QUESTIONS}
        )
        assert r.status_code == 200, r.text
        pending_id = r.json()["pending_id"]
        create = {
            "workspace_id": b["workspace"]["id"],
            "workflow_id": b["workflow"]["id"],
            "title": "evil\x00",
        }
        async with mcp_client(f"{server.url}/mcp") as external:
            result = await external.call_tool("create_task_kandev", create)
            assert tool_error(result) == {
                "code": "VALIDATION_ERROR",
                "message": "title: must not contain NUL characters",
            }
            answer = {
                "pending_id": pending_id,
                "answers": [{"question_id": "pick", "custom_text": "no\x00pe"}],
            }
            result = await external.call_tool("answer_question_kandev", answer)
            assert tool_error(result) == {
                "code": "VALIDATION_ERROR",
                "message": "answers.0.custom_text: must not contain NUL characters",
            }
            result = await external.call_tool("answer_question_kandev", {"pending_id": "\x00"})
            assert tool_error(result)["message"] == "pending_id: must not contain NUL characters"
        async with mcp_client(creds["mcp_url"], creds["token"]) as agent:
            result = await agent.call_tool("create_task_kandev", create)
            assert tool_error(result)["code"] == "VALIDATION_ERROR"
        # The question is still open and no task was created.
        r = await http.get(f"/api/v1/clarification/{pending_id}")
        assert r.json()["status"] == "pending", r.text
        r = await http.get("/api/v1/tasks", params={"workflow_id": b["workflow"]["id"]})
        assert r.json()["total"] == 1
