"""A tiny MCP server (official SDK) on 127.0.0.1, served by uvicorn in a background thread.

It stands in for Kandev's agent MCP endpoint: `list_workspaces_kandev` always, and
`ask_user_question_kandev` when built with an answer (or with `hold_questions=True`, in which
case the question waits until the server stops). It records the Authorization headers and
questions it received, and the client port of each request.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

WORKSPACES = {"workspaces": [{"id": "ws-1", "name": "Demo workspace"}]}


class _Uvicorn(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self._ready.set()


class StubMcpServer:
    def __init__(
        self, *, answer: dict[str, Any] | None = None, hold_questions: bool = False
    ) -> None:
        self.authorizations: list[str | None] = []
        self.client_ports: list[int] = []  # the TCP port each request came from
        self.questions: list[list[dict[str, Any]]] = []
        self.question_received = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._release: asyncio.Event | None = None

        mcp = MCPServer("kandev-stub", log_level="WARNING")

        @mcp.tool(name="list_workspaces_kandev", description="List workspaces.")
        def list_workspaces() -> str:
            return json.dumps(WORKSPACES)

        if answer is not None or hold_questions:

            @mcp.tool(name="ask_user_question_kandev", description="Ask the user.")
            async def ask_user_question(
                questions: list[dict[str, Any]], context: str | None = None
            ) -> str:
                self.questions.append(questions)
                self.question_received.set()
                if hold_questions:
                    assert self._release is not None
                    await self._release.wait()
                return json.dumps(answer or {})

        app = mcp.streamable_http_app()

        async def recording_app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                value = headers.get(b"authorization")
                self.authorizations.append(value.decode() if value is not None else None)
                self.client_ports.append(scope["client"][1])
            await app(scope, receive, send)

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._ready = threading.Event()
        config = uvicorn.Config(
            recording_app,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
        self._server = _Uvicorn(config, self._ready)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._release = asyncio.Event()
            await self._server.serve(sockets=[self._sock])

        asyncio.run(serve())

    def start(self) -> StubMcpServer:
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise RuntimeError("stub MCP server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


def closed_port_url() -> str:
    """An MCP URL nobody listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"
