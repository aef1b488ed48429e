"""A real uvicorn serving create_app with both MCP endpoints, and MCP-client helpers.

Until app.py mounts MCP itself, the server fixture mounts it here (mount_mcp + its lifespan
around the app's); once create_app does, the app is used exactly as built.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from kandev.app import create_app
from kandev.clock import ManualClock
from kandev.mcp.mount import is_mounted, mcp_lifespan, mount_mcp
from kandev.perimeter import uvicorn_options
from kandev.services import build_services
from tests.conftest import LiveServer, free_port, make_settings

PASSWORD = "correct horse battery"


class McpLiveServer(LiveServer):
    """LiveServer whose app is guaranteed to serve /mcp and /agent/mcp."""

    def __init__(self, services: Any) -> None:
        self.services = services
        self.port = services.settings.port
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(services.settings, services=services)
        if not is_mounted(self.app):
            mount_mcp(self.app, services)
            app_lifespan = self.app.router.lifespan_context

            @asynccontextmanager
            async def lifespan(app: Any) -> AsyncIterator[None]:
                async with app_lifespan(app), mcp_lifespan(app):
                    yield

            self.app.router.lifespan_context = lifespan
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=3,
            **uvicorn_options(),  # exactly as `kandev serve` runs it (proxy headers off)
        )
        self.server = uvicorn.Server(config)

        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error = None

    @property
    def external_url(self) -> str:
        return f"{self.url}/mcp"

    @property
    def agent_url(self) -> str:
        return f"{self.url}/agent/mcp"


@pytest.fixture
def mcp_server_factory(tmp_path: Path) -> Iterator[Callable[..., McpLiveServer]]:
    started: list[McpLiveServer] = []

    def factory(
        database_url: str, *, clock: ManualClock | None = None, **settings: object
    ) -> McpLiveServer:
        settings.setdefault("port", free_port())
        built = build_services(make_settings(tmp_path, database_url, **settings), clock=clock)
        server = McpLiveServer(built)
        server.start()
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


@asynccontextmanager
async def mcp_client(
    url: str, token: str | None = None, *, mode: str = "auto", cookies: dict | None = None
) -> AsyncIterator[Client]:
    """The official MCP client over HTTP, with an optional bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, cookies=cookies, timeout=30)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


def ok(result: CallToolResult) -> dict[str, Any]:
    """A success result: the same JSON object as structuredContent and as text."""
    assert not result.is_error, result.content
    assert len(result.content) == 1
    text = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert text == result.structured_content
    return text


def tool_error(result: CallToolResult) -> dict[str, Any]:
    """A failure result: isError with text {"code", "message"}."""
    assert result.is_error, result.structured_content
    body = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert set(body) == {"code", "message"}, body
    return body


async def raw_post(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """One raw initialize POST (what any MCP client sends first)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    async with httpx.AsyncClient() as http:
        return await http.post(
            url,
            json=body,
            headers={"Accept": "application/json, text/event-stream", **(headers or {})},
        )


# --- REST setup helpers -----------------------------------------------------------------


async def board(http: httpx.AsyncClient, name: str = "WS") -> dict[str, Any]:
    """A workspace with a default workflow and one task; returns their JSON."""
    r = await http.post("/api/v1/workspaces", json={"name": name})
    assert r.status_code == 201, r.text
    ws = r.json()
    r = await http.post("/api/v1/workflows", json={"workspace_id": ws["id"], "name": "Flow"})
    assert r.status_code == 201, r.text
    flow = r.json()
    r = await http.post(
        "/api/v1/tasks",
        json={"workspace_id": ws["id"], "workflow_id": flow["id"], "title": f"{name} task"},
    )
    assert r.status_code == 201, r.text
    return {"workspace": ws, "workflow": flow, "task": r.json()}


async def agent_token(http: httpx.AsyncClient, task_id: str) -> tuple[str, dict[str, str]]:
    """A session without a managed agent on the task, and its agent MCP credentials."""
    r = await http.post(f"/api/v1/tasks/{task_id}/sessions", json={})
    assert r.status_code == 201, r.text
    session_id = r.json()["id"]
    r = await http.post(f"/api/v1/sessions/{session_id}/agent-token")
    assert r.status_code == 201, r.text
    return session_id, r.json()


async def two_users(base_url: str) -> tuple[str, str]:
    """Alice (first admin) and Bob (member) on an auth-on server; their PATs."""
    async with httpx.AsyncClient(base_url=base_url) as alice:
        r = await alice.post(
            "/api/v1/auth/setup", json={"email": "alice@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        r = await alice.post(
            "/api/v1/users", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 201, r.text
        r = await alice.post("/api/v1/auth/tokens", json={"name": "alice"})
        assert r.status_code == 201, r.text
        alice_pat = r.json()["token"]
    async with httpx.AsyncClient(base_url=base_url) as bob:
        r = await bob.post(
            "/api/v1/auth/login", json={"email": "bob@example.com", "password": PASSWORD}
        )
        assert r.status_code == 200, r.text
        r = await bob.post("/api/v1/auth/tokens", json={"name": "bob"})
        assert r.status_code == 201, r.text
        bob_pat = r.json()["token"]
    return alice_pat, bob_pat


def bearer_client(base_url: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {token}"})
