"""create_task_kandev goes through the task service, so a live board sees the new task."""

from __future__ import annotations

import httpx

from tests.mcp.conftest import agent_token, board, mcp_client, ok
from tests.sse_client import sse_stream


async def test_create_task_kandev_publishes_task_created(mcp_server_factory, sqlite_url) -> None:
    server = mcp_server_factory(sqlite_url)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        b = await board(http)
        _, creds = await agent_token(http, b["task"]["id"])
        create = {"workspace_id": b["workspace"]["id"], "workflow_id": b["workflow"]["id"]}
        async with sse_stream(http) as events:
            async with mcp_client(f"{server.url}/mcp") as external:
                made = ok(await external.call_tool("create_task_kandev", {**create, "title": "e"}))
            async with mcp_client(creds["mcp_url"], creds["token"]) as agent:
                child = ok(await agent.call_tool("create_task_kandev", {**create, "title": "a"}))
            seen = [
                await events.wait_for(lambda e: e.type == "task.created"),
                await events.wait_for(lambda e: e.type == "task.created"),
            ]
    ids = [e.data["task"]["id"] for e in seen]
    assert ids == [made["task"]["id"], child["task"]["id"]]
