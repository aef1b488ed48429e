"""The bare same-stack baselines: what the answer, turn and race paths cost with no Kandev.

One small app on the same stack as `kandev serve` — FastAPI on the same uvicorn (same loop
and HTTP implementation), the official MCP SDK's `MCPServer` over Streamable HTTP (stateless,
SSE responses, routed directly like src/kandev/mcp/mount.py does), the ACP SDK driving the
same trivial agent subprocess — and nothing else: no database, no auth, no projections.
The routes answer the same requests with the same shapes as Kandev's, so the benchmarks
drive it with the very clients they drive Kandev with:

- MCP tool `ask_user_question_kandev(questions, session_id)`: registers a pending question
  in memory, publishes `session.message.added` (requests_input, metadata.pending_id) on the
  SSE stream, and awaits an asyncio future;
- `POST /api/v1/clarification/{pending_id}/respond` and MCP tool `answer_question_kandev`:
  one winner per question via an in-memory claim (the first resolves the future, every
  later one gets `claimed: false` and the winner's answer);
- `POST /api/v1/clarification/request`: a pending question with no waiter (the race);
- `POST /api/v1/sessions`: spawns the trivial ACP agent (ACP SDK), initialize + new session;
  `POST /api/v1/sessions/{id}/prompt`: answers with a turn id at once, sends the prompt with
  the ACP SDK and publishes `session.turn.completed` on the SSE stream when it returns;
- `GET /api/v1/events`: the SSE stream; `GET /health`;
- MCP tool `list_pending_questions_kandev(limit, cursor)`, when `BARE_LIST_DB` (a SQLite
  file or a postgresql:// URL) and `BARE_LIST_SQL` (one statement, values inlined) are set:
  runs that statement on one connection of the bare driver and returns its rows as they
  come (the list benchmark's page over MCP on the same stack, with no Kandev);
- MCP tool `carry_page_kandev(run_sql?)`, when `BARE_LIST_PAGE` names a JSON file: returns
  the page it holds (Kandev's own first page, which the list benchmark writes there),
  structured and as compact JSON text (pydantic's encoder, as Kandev's), building nothing
  (the same page object every call). With `run_sql` it first runs the list statement on
  the bare driver (its rows fetched and dropped): the statement plus the MCP stack carrying
  the page in one call, the least any server on that stack can take to serve it.

Run (the benchmarks do it through `bench.common.bare_server`):
    .venv/bin/python -m bench.bare_apps --port 8765
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent
from pydantic_core import to_json
from starlette.routing import Route

AGENT = str(Path(__file__).with_name("trivial_agent.py"))


class Hub:
    """The SSE fan-out: one queue per follower."""

    def __init__(self) -> None:
        self.followers: set[asyncio.Queue[dict[str, Any]]] = set()

    def publish(self, event: dict[str, Any]) -> None:
        for queue in self.followers:
            queue.put_nowait(event)


class Pending:
    """One question: its answer future (the in-memory claim) and the winner's response."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.future: asyncio.Future[list[dict[str, Any]]] = (
            asyncio.get_running_loop().create_future()
        )


class _Collector:
    """The ACP client side: keeps the agent's text in memory (Kandev stores a message)."""

    def __init__(self) -> None:
        self.chunks: list[Any] = []

    async def session_update(self, **update: Any) -> None:
        self.chunks.append(update)


class _Asgi:
    """An ASGI callable as a Starlette endpoint (a bound method would be a request handler)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.handle(scope, receive, send)


def create_app() -> FastAPI:
    hub = Hub()
    pending: dict[str, Pending] = {}
    agents: dict[str, tuple[Any, str]] = {}  # session id → (ACP connection, agent session id)
    turns: set[asyncio.Task[None]] = set()
    stack = AsyncExitStack()
    mcp = MCPServer("bare", log_level="WARNING")

    def claim(pending_id: str, answers: list[dict[str, Any]]) -> dict[str, Any]:
        item = pending[pending_id]
        if item.future.done():
            return {"claimed": False, "pending_id": pending_id, "response": item.future.result()}
        item.future.set_result(answers)
        return {"claimed": True, "pending_id": pending_id, "response": answers}

    def ask(session_id: str) -> Pending:
        pending_id = uuid.uuid4().hex
        item = pending[pending_id] = Pending(session_id)
        message = {
            "session_id": session_id,
            "requests_input": True,
            "metadata": {"pending_id": pending_id},
        }
        hub.publish({"type": "session.message.added", "message": message})
        return item

    @mcp.tool()
    async def ask_user_question_kandev(
        questions: list[dict[str, Any]], session_id: str = ""
    ) -> dict[str, Any]:
        """Ask the user; returns their answers."""
        item = ask(session_id)
        return {"answers": await item.future}

    @mcp.tool()
    async def answer_question_kandev(
        pending_id: str, answers: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Answer a pending question (one winner)."""
        return claim(pending_id, answers)

    statement = _bare_statement()
    lister = _bare_lister(statement)
    if lister is not None:

        @mcp.tool()
        async def list_pending_questions_kandev(
            limit: int = 50, cursor: str = ""
        ) -> CallToolResult:
            """One page of the list benchmark's statement, rows as the driver returns them
            (structured, and as compact JSON text: what Kandev's tools return)."""
            rows = await lister()
            page = {"rows": rows, "count": len(rows), "next_cursor": ""}
            text = json.dumps(page, separators=(",", ":"))
            return CallToolResult(
                content=[TextContent(type="text", text=text)], structured_content=page
            )

    carried = os.environ.get("BARE_LIST_PAGE")
    if carried:

        @mcp.tool()
        async def carry_page_kandev(run_sql: bool = False) -> CallToolResult:
            """Kandev's page, read once from BARE_LIST_PAGE: the carriage, after running the
            list statement (its rows fetched and dropped) when run_sql is true."""
            if run_sql:
                if statement is None:
                    raise ValueError("run_sql needs BARE_LIST_DB and BARE_LIST_SQL")
                await statement()
            page = _carried_page(carried)
            # Kandev's encoder for the text copy (pydantic's, compact): the cheapest carriage.
            text = to_json(page).decode()
            return CallToolResult(
                content=[TextContent(type="text", text=text)], structured_content=page
            )

    mcp.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=False,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with stack, mcp.session_manager.run():
            yield

    app = FastAPI(lifespan=lifespan)
    endpoint = _Asgi(mcp.session_manager.handle_request)
    app.router.routes[0:0] = [Route("/mcp", endpoint=endpoint), Route("/mcp/", endpoint=endpoint)]

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/api/v1/events")
    async def events() -> StreamingResponse:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        hub.followers.add(queue)

        async def frames() -> AsyncIterator[str]:
            try:
                yield ": connected\n\n"
                while True:
                    yield f"data: {json.dumps(await queue.get())}\n\n"
            finally:
                hub.followers.discard(queue)

        return StreamingResponse(
            frames(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )

    @app.post("/api/v1/clarification/request")
    async def request_question(body: dict[str, Any]) -> dict[str, Any]:
        pending_id = uuid.uuid4().hex
        pending[pending_id] = Pending(body.get("session_id", ""))
        return {"pending_id": pending_id}

    @app.post("/api/v1/clarification/{pending_id}/respond")
    async def respond(pending_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return claim(pending_id, body["answers"])

    @app.post("/api/v1/sessions")
    async def new_session(body: dict[str, Any]) -> dict[str, Any]:
        conn, _proc = await stack.enter_async_context(
            spawn_agent_process(_Collector(), sys.executable, AGENT)
        )
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        new = await conn.new_session(cwd=tempfile.gettempdir(), mcp_servers=[])
        sid = uuid.uuid4().hex
        agents[sid] = (conn, new.session_id)
        return {"id": sid, "pid": _proc.pid}

    @app.post("/api/v1/sessions/{sid}/prompt")
    async def prompt(sid: str, body: dict[str, Any]) -> dict[str, Any]:
        conn, agent_sid = agents[sid]
        turn_id = uuid.uuid4().hex

        async def turn() -> None:
            result = await conn.prompt(session_id=agent_sid, prompt=[text_block(body["text"])])
            hub.publish(
                {
                    "type": "session.turn.completed",
                    "session_id": sid,
                    "turn_id": turn_id,
                    "stop_reason": result.stop_reason,
                }
            )

        task = asyncio.create_task(turn())
        turns.add(task)
        task.add_done_callback(turns.discard)
        return {"turn_id": turn_id}

    return app


_PAGES: dict[str, dict[str, Any]] = {}


def _carried_page(path: str) -> dict[str, Any]:
    # Read at the first call, not at start-up: the benchmark writes the file once Kandev
    # has served its first page, after both servers are up.
    if path not in _PAGES:
        _PAGES[path] = json.loads(Path(path).read_text())
    return _PAGES[path]


def _bare_statement() -> Any:
    """The list statement on one connection of the bare driver (sqlite3 or asyncpg): its
    rows as the driver returns them; None when the list benchmark did not ask for it."""
    target, sql = os.environ.get("BARE_LIST_DB"), os.environ.get("BARE_LIST_SQL")
    if not target or not sql:
        return None
    if target.startswith("postgresql"):
        import asyncpg

        conn: Any = None

        async def pg_rows() -> list[Any]:
            nonlocal conn
            if conn is None:
                conn = await asyncpg.connect(target)
            return list(await conn.fetch(sql))

        return pg_rows
    db = sqlite3.connect(target, check_same_thread=False)
    db.row_factory = sqlite3.Row

    async def sqlite_rows() -> list[Any]:
        return db.execute(sql).fetchall()

    return sqlite_rows


def _bare_lister(statement: Any) -> Any:
    """The statement's rows as JSON objects (`_plain`), or None without a statement."""
    if statement is None:
        return None

    async def rows() -> list[dict[str, Any]]:
        return [_plain(dict(r)) for r in await statement()]

    return rows


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """JSON values: timestamps as ISO text, a JSON column as the object it holds (not a
    string of JSON escaped once more)."""
    out = {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()}
    if isinstance(out.get("metadata"), str):
        out["metadata"] = json.loads(out["metadata"])
    return out


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    # Same uvicorn defaults as `kandev serve` (auto loop/http: uvloop + httptools here).
    uvicorn.run(
        create_app(),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        proxy_headers=False,
        timeout_graceful_shutdown=2,
    )


if __name__ == "__main__":
    main()
