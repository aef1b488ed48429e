"""Both MCP surfaces over HTTP with the official client (auth off): tool lists, every tool's
happy path, and the CONTRACT §5 error shape."""

from __future__ import annotations

import httpx
import pytest

from kandev import errors
from kandev.clock import ManualClock
from tests.mcp.conftest import agent_token, board, mcp_client, ok, tool_error

BUILT_TOOLS = {
    "list_workspaces_kandev",
    "list_workflows_kandev",
    "list_workflow_steps_kandev",
    "list_tasks_kandev",
    "create_task_kandev",
    "get_task_conversation_kandev",
    "list_task_sessions_kandev",
    "move_task_kandev",
}
ANSWERING_TOOLS = {
    "answer_question_kandev",
    "list_pending_questions_kandev",
    "answer_permission_kandev",
    "list_pending_permissions_kandev",
}


async def _tool_names(client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def test_tool_lists_per_surface(mcp_server_factory, database_url: str, clock: ManualClock):
    server = mcp_server_factory(database_url, clock=clock)
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        _, creds = await agent_token(http, b["task"]["id"])
    assert creds["mcp_url"] == f"{server.url}/agent/mcp/"

    async with mcp_client(server.external_url) as external:
        names = await _tool_names(external)
        assert names == BUILT_TOOLS | ANSWERING_TOOLS
        assert "ask_user_question_kandev" not in names
        schemas = {t.name: t.input_schema for t in (await external.list_tools()).tools}
        assert set(schemas["create_task_kandev"]["required"]) == {
            "workspace_id",
            "workflow_id",
            "title",
        }
        assert "local_path" not in schemas["create_task_kandev"]["properties"]
    async with mcp_client(creds["mcp_url"], creds["token"]) as agent:
        names = await _tool_names(agent)
        assert names == BUILT_TOOLS | {"ask_user_question_kandev"}
        assert not names & ANSWERING_TOOLS


@pytest.mark.parametrize("suffix", ["", "/"])
async def test_both_url_forms_work(mcp_server_factory, sqlite_url: str, clock, suffix: str):
    server = mcp_server_factory(sqlite_url, clock=clock)
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        _, creds = await agent_token(http, b["task"]["id"])
    async with mcp_client(server.external_url + suffix) as client:
        assert len(ok(await client.call_tool("list_workspaces_kandev", {}))["workspaces"]) == 1
    async with mcp_client(server.agent_url + suffix, creds["token"]) as client:
        assert len(ok(await client.call_tool("list_workspaces_kandev", {}))["workspaces"]) == 1


async def test_board_tools(mcp_server_factory, database_url: str, clock: ManualClock):
    server = mcp_server_factory(database_url, clock=clock)
    async with httpx.AsyncClient(base_url=server.url) as http:
        a = await board(http, "A")
        b = await board(http, "B")
    ws_a, flow_a, flow_b = a["workspace"], a["workflow"], b["workflow"]

    async with mcp_client(server.external_url) as c:
        workspaces = ok(await c.call_tool("list_workspaces_kandev", {}))["workspaces"]
        assert {w["id"] for w in workspaces} == {ws_a["id"], b["workspace"]["id"]}
        assert ws_a in workspaces

        flows = ok(await c.call_tool("list_workflows_kandev", {}))["workflows"]
        assert {f["id"] for f in flows} == {flow_a["id"], flow_b["id"]}
        only_a = ok(await c.call_tool("list_workflows_kandev", {"workspace_id": ws_a["id"]}))
        assert [f["id"] for f in only_a["workflows"]] == [flow_a["id"]]

        steps = ok(await c.call_tool("list_workflow_steps_kandev", {"workflow_id": flow_a["id"]}))
        assert steps["steps"] == flow_a["steps"]
        assert [s["name"] for s in steps["steps"]] == ["Backlog", "In Progress", "Review", "Done"]

        created = ok(
            await c.call_tool(
                "create_task_kandev",
                {
                    "workspace_id": ws_a["id"],
                    "workflow_id": flow_a["id"],
                    "title": "  From MCP  ",
                    "description": "made by a tool",
                    "not_an_argument": 1,  # unknown arguments are ignored
                },
            )
        )["task"]
        assert created["title"] == "From MCP"
        assert created["description"] == "made by a tool"
        assert created["workflow_step_id"] == flow_a["steps"][0]["id"]  # the start step
        assert created["local_path"] == ""
        review = flow_a["steps"][2]["id"]
        on_review = ok(
            await c.call_tool(
                "create_task_kandev",
                {
                    "workspace_id": ws_a["id"],
                    "workflow_id": flow_a["id"],
                    "workflow_step_id": review,
                    "title": "Review me",
                },
            )
        )["task"]
        assert on_review["workflow_step_id"] == review

        by_flow = ok(await c.call_tool("list_tasks_kandev", {"workflow_id": flow_a["id"]}))
        assert {t["id"] for t in by_flow["tasks"]} == {
            a["task"]["id"],
            created["id"],
            on_review["id"],
        }
        by_ws = ok(await c.call_tool("list_tasks_kandev", {"workspace_id": b["workspace"]["id"]}))
        assert [t["id"] for t in by_ws["tasks"]] == [b["task"]["id"]]
        assert len(ok(await c.call_tool("list_tasks_kandev", {}))["tasks"]) == 4

    async with httpx.AsyncClient(base_url=server.url) as http:
        r = await http.get(f"/api/v1/tasks/{created['id']}")
        assert r.status_code == 200
        assert r.json() == created


async def http_prompt(base_url: str, session_id: str, text: str) -> None:
    async with httpx.AsyncClient(base_url=base_url) as http:
        r = await http.post(f"/api/v1/sessions/{session_id}/prompt", json={"text": text})
        assert r.status_code == 202, r.text
        assert r.json()["queued"] is False


async def test_session_tools(mcp_server_factory, database_url: str, clock: ManualClock):
    server = mcp_server_factory(database_url, clock=clock)
    async with httpx.AsyncClient(base_url=server.url) as http:
        a = await board(http, "A")
        b = await board(http, "B")
        task_id = a["task"]["id"]
        async with mcp_client(server.external_url) as c:
            assert ok(await c.call_tool("list_task_sessions_kandev", {"task_id": task_id})) == {
                "sessions": []
            }
            assert ok(await c.call_tool("get_task_conversation_kandev", {"task_id": task_id})) == {
                "task_id": task_id,
                "session_id": None,
                "messages": [],
                "has_more": False,
            }

        first = await http.post(f"/api/v1/tasks/{task_id}/sessions", json={"prompt": "first"})
        second = await http.post(f"/api/v1/tasks/{task_id}/sessions", json={"prompt": "second"})
        other = await http.post(f"/api/v1/tasks/{b['task']['id']}/sessions", json={"prompt": "b"})
        first, second, other = first.json(), second.json(), other.json()
        assert first["is_primary"] and not second["is_primary"]
        rest_messages = (await http.get(f"/api/v1/sessions/{second['id']}/messages")).json()

    async with mcp_client(server.external_url) as c:
        sessions = ok(await c.call_tool("list_task_sessions_kandev", {"task_id": task_id}))
        assert [s["id"] for s in sessions["sessions"]] == [first["id"], second["id"]]

        primary = ok(await c.call_tool("get_task_conversation_kandev", {"task_id": task_id}))
        assert primary["session_id"] == first["id"]
        assert [m["content"] for m in primary["messages"]] == ["first"]
        assert primary["has_more"] is False

        chosen = ok(
            await c.call_tool(
                "get_task_conversation_kandev", {"task_id": task_id, "session_id": second["id"]}
            )
        )
        assert chosen["session_id"] == second["id"]
        assert chosen["messages"] == rest_messages["messages"]

        # The latest `limit` messages, oldest first; has_more says older ones exist.
        for text in ("two", "three"):
            clock.advance(seconds=1)
            await http_prompt(server.url, first["id"], text)
        limited = ok(
            await c.call_tool("get_task_conversation_kandev", {"task_id": task_id, "limit": 2})
        )
        assert [m["content"] for m in limited["messages"]] == ["two", "three"]
        assert limited["has_more"] is True
        everything = ok(await c.call_tool("get_task_conversation_kandev", {"task_id": task_id}))
        assert [m["content"] for m in everything["messages"]] == ["first", "two", "three"]
        assert everything["has_more"] is False

        # A session of another task is not this task's: NOT_FOUND, like a fabricated one.
        foreign = tool_error(
            await c.call_tool(
                "get_task_conversation_kandev", {"task_id": task_id, "session_id": other["id"]}
            )
        )
        fabricated = tool_error(
            await c.call_tool(
                "get_task_conversation_kandev", {"task_id": task_id, "session_id": "fabricated"}
            )
        )
        assert foreign == fabricated
        assert foreign["code"] == "NOT_FOUND"


async def test_bad_arguments_are_validation_errors(
    mcp_server_factory, database_url: str, clock: ManualClock
):
    server = mcp_server_factory(database_url, clock=clock)
    async with httpx.AsyncClient(base_url=server.url) as http:
        a = await board(http, "A")
        b = await board(http, "B")
    base = {"workspace_id": a["workspace"]["id"], "workflow_id": a["workflow"]["id"]}

    async with mcp_client(server.external_url) as c:

        async def create_error(arguments: dict) -> dict:
            return tool_error(await c.call_tool("create_task_kandev", arguments))

        empty = await create_error({**base, "title": ""})
        assert empty == {
            "code": "VALIDATION_ERROR",
            "message": "title: String should have at least 1 character",
        }
        blank = await create_error({**base, "title": "   "})
        assert blank["code"] == "VALIDATION_ERROR"
        assert blank["message"].startswith("title: ")
        wrong_type = await create_error({**base, "title": 42})  # strict: no coercion
        assert wrong_type == {
            "code": "VALIDATION_ERROR",
            "message": "title: Input should be a valid string",
        }
        missing = await create_error({"workspace_id": base["workspace_id"], "title": "t"})
        assert missing == {"code": "VALIDATION_ERROR", "message": "workflow_id: Field required"}
        too_long = await create_error({**base, "title": "x" * 501})
        assert too_long["message"].startswith("title: ")

        # The service's own validation: a step of another workflow.
        other_step = await create_error(
            {**base, "title": "t", "workflow_step_id": b["workflow"]["steps"][0]["id"]}
        )
        assert other_step["code"] == "VALIDATION_ERROR"
        assert other_step["message"].startswith("workflow_step_id: ")
        cross = await create_error({**base, "workflow_id": b["workflow"]["id"], "title": "t"})
        assert cross["code"] == "VALIDATION_ERROR"
        assert cross["message"].startswith("workflow_id: ")

        bad_limit = tool_error(
            await c.call_tool(
                "get_task_conversation_kandev", {"task_id": a["task"]["id"], "limit": "5"}
            )
        )
        assert bad_limit == {
            "code": "VALIDATION_ERROR",
            "message": "limit: Input should be a valid integer",
        }
        zero = tool_error(
            await c.call_tool(
                "get_task_conversation_kandev", {"task_id": a["task"]["id"], "limit": 0}
            )
        )
        assert zero["message"].startswith("limit: ")


async def test_missing_rows_are_not_found(mcp_server_factory, database_url: str, clock):
    server = mcp_server_factory(database_url, clock=clock)
    async with httpx.AsyncClient(base_url=server.url) as http:
        a = await board(http, "A")
    async with mcp_client(server.external_url) as c:
        calls = [
            ("get_task_conversation_kandev", {"task_id": "fabricated"}),
            ("list_task_sessions_kandev", {"task_id": "fabricated"}),
            ("list_workflow_steps_kandev", {"workflow_id": "fabricated"}),
            ("list_workflows_kandev", {"workspace_id": "fabricated"}),
            ("list_tasks_kandev", {"workflow_id": "fabricated"}),
            (
                "create_task_kandev",
                {"workspace_id": a["workspace"]["id"], "workflow_id": "fabricated", "title": "t"},
            ),
        ]
        for name, arguments in calls:
            body = tool_error(await c.call_tool(name, arguments))
            assert body["code"] == "NOT_FOUND", (name, body)
            assert body["message"], name


async def test_unknown_tool_has_the_error_shape(mcp_server_factory, sqlite_url: str, clock):
    server = mcp_server_factory(sqlite_url, clock=clock)
    async with mcp_client(server.external_url) as c:
        for name in ("ask_user_question_kandev", "no_such_tool"):
            assert tool_error(await c.call_tool(name, {})) == {
                "code": "NOT_FOUND",
                "message": f"unknown tool: {name}",
            }


@pytest.mark.parametrize(
    ("raised", "code", "message"),
    [
        (errors.Conflict("already moved"), "CONFLICT", "already moved"),
        (errors.BadRequest("no"), "BAD_REQUEST", "no"),
        (errors.Unauthorized("who?"), "UNAUTHORIZED", "who?"),
        (errors.Forbidden("admin role required"), "UNAUTHORIZED", "admin role required"),
        (errors.RateLimited("slow down"), "BAD_REQUEST", "slow down"),
        (RuntimeError("secret internals"), "INTERNAL_ERROR", "internal error"),
    ],
)
async def test_error_mapping(
    mcp_server_factory, sqlite_url, clock, monkeypatch, raised, code, message
):
    server = mcp_server_factory(sqlite_url, clock=clock)

    async def boom():
        raise raised

    monkeypatch.setattr(server.services.workspaces, "list_workspaces", boom)
    async with mcp_client(server.external_url) as c:
        result = await c.call_tool("list_workspaces_kandev", {})
    assert tool_error(result) == {"code": code, "message": message}
    assert "secret" not in result.content[0].text
