"""ask_user_question_kandev over the official MCP client, and the clarification REST
endpoints around it (request, get, wait, respond, cancel)."""

from __future__ import annotations

import asyncio

import anyio
import httpx

from tests.mcp.conftest import agent_token, board, mcp_client, ok, tool_error

QUESTIONS = [
    {
        "id": "db",
        "prompt": "Which databases?",
        "options": [
            {"option_id": "pg", "label": "PostgreSQL", "description": "server"},
            {"option_id": "lite", "label": "SQLite", "description": "embedded"},
        ],
    }
]


async def _pending_id(http: httpx.AsyncClient, session_id: str) -> str:
    """The pending id of the session's newest question, once it exists."""
    with anyio.fail_after(20):
        while True:
            r = await http.get(f"/api/v1/sessions/{session_id}/messages")
            rows = [m for m in r.json()["messages"] if m["type"] == "clarification_request"]
            if rows:
                return rows[-1]["metadata"]["pending_id"]
            with anyio.move_on_after(0.02):
                await anyio.Event().wait()  # bounded poll


async def test_bad_questions_are_validation_errors_naming_the_field(
    mcp_server_factory, sqlite_url
) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        _, creds = await agent_token(http, b["task"]["id"])
    bad = [{"prompt": "Pick", "options": [{"label": "only", "description": "one"}]}]
    async with mcp_client(creds["mcp_url"], creds["token"]) as agent:
        error = tool_error(await agent.call_tool("ask_user_question_kandev", {"questions": bad}))
        assert error["code"] == "VALIDATION_ERROR"
        assert error["message"].startswith("questions[0].options:")
        assert "question 1" in error["message"]
        error = tool_error(await agent.call_tool("ask_user_question_kandev", {}))
        assert error["code"] == "VALIDATION_ERROR" and error["message"].startswith("questions")


async def test_identical_retried_asks_share_one_bundle_and_get_every_option(
    mcp_server_factory, database_url
) -> None:
    server = mcp_server_factory(database_url, clarification_progress_seconds=0.1)
    async with httpx.AsyncClient(base_url=server.url) as http:
        b = await board(http)
        sid, creds = await agent_token(http, b["task"]["id"])
        async with (
            mcp_client(creds["mcp_url"], creds["token"]) as first,
            mcp_client(creds["mcp_url"], creds["token"]) as retry,
        ):
            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            call_one = asyncio.ensure_future(
                first.call_tool(
                    "ask_user_question_kandev",
                    {"questions": QUESTIONS},
                    progress_callback=on_progress,
                )
            )
            pending_id = await _pending_id(http, sid)
            call_two = asyncio.ensure_future(
                retry.call_tool("ask_user_question_kandev", {"questions": QUESTIONS})
            )
            session = (await http.get(f"/api/v1/sessions/{sid}")).json()
            assert session["pending_action"] == "clarification"
            # Wait until the retry is parked too, then answer once.
            with anyio.fail_after(20):
                while len(progress) < 2:
                    with anyio.move_on_after(0.02):
                        await anyio.Event().wait()
            r = await http.post(
                f"/api/v1/clarification/{pending_id}/respond",
                json={"answers": [{"question_id": "db", "selected_options": ["lite", "pg"]}]},
            )
            assert r.status_code == 200, r.text
            with anyio.fail_after(20):
                results = [ok(await call_one), ok(await call_two)]
        assert results[0] == results[1]
        assert results[0]["pending_id"] == pending_id
        answer = results[0]["answers"]["db"]
        assert answer["selected_options"] == ["pg", "lite"]  # the bundle's order
        assert answer["selected_labels"] == ["PostgreSQL", "SQLite"]
        assert answer["selected_option"] == "pg" and answer["answered"] is True
        rows = [
            m
            for m in (await http.get(f"/api/v1/sessions/{sid}/messages")).json()["messages"]
            if m["type"] == "clarification_request"
        ]
        assert len(rows) == 1  # one bundle, not two


async def test_rest_request_get_wait_respond_and_cancel(mcp_server_factory, sqlite_url) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        b = await board(http)
        sid, _ = await agent_token(http, b["task"]["id"])
        r = await http.post(
            "/api/v1/clarification/request", json={"session_id": sid, "questions": QUESTIONS}
        )
        assert r.status_code == 200, r.text
        pending_id = r.json()["pending_id"]
        got = (await http.get(f"/api/v1/clarification/{pending_id}")).json()
        assert got["status"] == "pending" and got["questions"][0]["id"] == "db"
        # The REST creation path neither blocks nor changes the session (an agent-less
        # session waits IDLE).
        assert (await http.get(f"/api/v1/sessions/{sid}")).json()["state"] == "IDLE"
        r = await http.get(f"/api/v1/clarification/{pending_id}/wait", params={"timeout": 0.2})
        assert (r.status_code, r.json()) == (504, {"error": "timed out waiting for a response"})

        waiting = asyncio.ensure_future(
            http.get(f"/api/v1/clarification/{pending_id}/wait", params={"timeout": 30})
        )
        with anyio.fail_after(20):
            while server.services.clarifications.store.get_request(pending_id) is None:
                with anyio.move_on_after(0.02):
                    await anyio.Event().wait()
        r = await http.post(
            f"/api/v1/clarification/{pending_id}/respond",
            json={"rejected": True, "reason": "out of scope"},
        )
        assert r.status_code == 200, r.text
        waited = await waiting
        assert waited.status_code == 200
        assert waited.json()["rejected"] is True
        assert waited.json()["reject_reason"] == "out of scope"
        r = await http.post(f"/api/v1/clarification/{pending_id}/respond", json={"rejected": True})
        assert r.status_code == 200
        assert (r.json()["claimed"], r.json()["status"]) == (False, "rejected")

        # Cancel needs a live request; it marks the rows cancelled.
        r = await http.post(
            "/api/v1/clarification/request",
            json={"session_id": sid, "questions": QUESTIONS, "context": "again"},
        )
        second = r.json()["pending_id"]
        assert second != pending_id
        r = await http.post(f"/api/v1/clarification/{second}/cancel")
        assert (r.status_code, r.json()) == (404, {"error": "clarification request not found"})
        waiting = asyncio.ensure_future(
            http.get(f"/api/v1/clarification/{second}/wait", params={"timeout": 30})
        )
        with anyio.fail_after(20):
            while server.services.clarifications.store.get_request(second) is None:
                with anyio.move_on_after(0.02):
                    await anyio.Event().wait()
        r = await http.post(f"/api/v1/clarification/{second}/cancel")
        assert (r.status_code, r.json()) == (200, {"success": True})
        assert (await waiting).status_code == 409
        assert (await http.get(f"/api/v1/clarification/{second}")).json()["status"] == "cancelled"
        r = await http.post(f"/api/v1/clarification/{second}/respond", json={"rejected": True})
        assert r.status_code == 409  # cancelled: not active, and nobody won

        for method, path in (
            ("GET", "/api/v1/clarification/nope"),
            ("GET", "/api/v1/clarification/nope/wait"),
            ("POST", "/api/v1/clarification/nope/respond"),
            ("POST", "/api/v1/clarification/nope/cancel"),
        ):
            r = await http.request(method, path, json={} if method == "POST" else None)
            assert (r.status_code, r.json()) == (
                404,
                {"error": "clarification request not found"},
            ), path
