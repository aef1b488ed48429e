"""`kandev demo-agent`: a small real ACP agent (stdio) for trying Kandev without an API key.

On a prompt it connects to the "kandev" MCP server it was given in `session/new` (Streamable
HTTP, with the headers it was given), lists the tools, and:

- when `ask_user_question_kandev` is offered, asks the user how to proceed, waits for the
  answer and writes a reply quoting it (every selected option and the custom text);
- otherwise replies with what it was told and which Kandev tools it can reach.

A prompt that resumes it after a late answer ("You were waiting…", or one carrying
`RESUME_MARKER`) is simply acknowledged: it says what it was told. When the MCP server cannot
be reached it still replies (saying so) and ends the turn. `session/cancel` ends the running
turn with stop reason `cancelled`. It keeps no state on disk, so `session/load` accepts any id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp import (
    PROTOCOL_VERSION,
    run_agent,
    start_tool_call,
    stdio_streams,
    text_block,
    tool_content,
    update_agent_message_text,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptResponse,
    StopReason,
    TextContentBlock,
)

from kandev import __version__

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger("kandev.demo_agent")

MCP_SERVER_NAME = "kandev"
ASK_TOOL = "ask_user_question_kandev"
RESUME_PREFIX = "You were waiting"
RESUME_MARKER = "[kandev:resume]"  # placeholder until the orchestrator defines its marker
MCP_CONNECT_SECONDS = 10.0  # TCP connect to the MCP server
MCP_REQUEST_SECONDS = 30.0  # any MCP request but the question
QUESTION_WAIT_SECONDS = 7 * 24 * 3600.0  # the question waits for a human

QUESTION_ID = "next_step"
OPTIONS = (
    ("go_ahead", "Go ahead", "Carry on with the task as described."),
    ("stop_and_wait", "Stop and wait", "Do nothing more until told otherwise."),
)


@dataclass
class _Session:
    cwd: str
    mcp_servers: list[Any]
    turn: asyncio.Task[StopReason] | None = None
    cancelled: bool = False
    tool_calls: int = field(default=0)

    def next_tool_call_id(self, name: str) -> str:
        self.tool_calls += 1
        return f"{name}-{self.tool_calls}"


def prompt_text(blocks: list[Any]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextContentBlock))


def is_resume(text: str) -> bool:
    return text.lstrip().startswith(RESUME_PREFIX) or RESUME_MARKER in text


def question_for(text: str) -> dict[str, Any]:
    subject = " ".join(text.split())[:80]
    return {
        "id": QUESTION_ID,
        "title": "Demo agent",
        "prompt": f"How should I proceed with: {subject}?",
        "options": [
            {"option_id": option_id, "label": label, "description": description}
            for option_id, label, description in OPTIONS
        ],
    }


def describe_answer(result: dict[str, Any]) -> str:
    """Quote an `ask_user_question_kandev` result: every selected label and the custom text."""
    if result.get("rejected"):
        reason = result.get("reject_reason") or "no reason given"
        return f"You declined to answer ({reason}), so I will stop here."
    answers = result.get("answers") or {}
    answer = answers.get(QUESTION_ID) or next(iter(answers.values()), None) or {}
    labels = [str(label) for label in answer.get("selected_labels") or []]
    if not labels:
        labels = [str(option) for option in answer.get("selected_options") or []]
    custom = (answer.get("custom_text") or "").strip()
    parts = []
    if labels:
        parts.append("you chose " + ", ".join(f'"{label}"' for label in labels))
    if custom:
        parts.append(f'you wrote "{custom}"')
    if not parts:
        return "You answered without choosing anything."
    said = " and ".join(parts)
    return f"Thanks: {said}. That is what I will do."


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_error_text(inner) for inner in exc.exceptions)
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    return str(exc) or type(exc).__name__


def _result_payload(result: Any) -> dict[str, Any] | None:
    """The JSON object of a tool result: its text content, else its structured content."""
    with contextlib.suppress(ValueError):
        data = json.loads(_result_text(result))
        if isinstance(data, dict):
            return data
    structured = getattr(result, "structured_content", None)
    return structured if isinstance(structured, dict) else None


def _result_text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in getattr(result, "content", None) or [])


class DemoAgent:
    """The ACP agent side (methods are called by the SDK's router)."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._sessions: dict[str, _Session] = {}
        # One HTTP client per MCP server and headers for the whole process, reused by every
        # turn: making one costs 20-50 ms (a connection pool, an SSL context), a turn ~1 ms.
        self._http: dict[tuple[str, tuple[tuple[str, str], ...]], httpx2.AsyncClient] = {}

    def _http_client(self, server: HttpMcpServer) -> httpx2.AsyncClient:
        import httpx2

        from kandev.agents.http_tls import tls_verify_for

        headers = tuple((h.name, h.value) for h in server.headers)
        key = (server.url, headers)
        if key not in self._http:
            # Timeouts: HTTP reads are unbounded (the question streams progress while a
            # human thinks); every MCP request is bounded by the session's read timeout.
            self._http[key] = httpx2.AsyncClient(
                headers=dict(headers),
                timeout=httpx2.Timeout(MCP_CONNECT_SECONDS, read=None),
                verify=tls_verify_for(server.url),  # no CA bundle loaded for http://
            )
        return self._http[key]

    async def aclose(self) -> None:
        """Close the HTTP clients (the agent is going away)."""
        clients, self._http = list(self._http.values()), {}
        for client in clients:
            await client.aclose()

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True, mcp_capabilities=McpCapabilities(http=True)
            ),
            agent_info=Implementation(
                name="kandev-demo-agent", title="Kandev demo agent", version=__version__
            ),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = f"demo-{uuid.uuid4().hex}"
        self._sessions[session_id] = _Session(cwd=cwd, mcp_servers=list(mcp_servers or []))
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        # Nothing to restore: take the (possibly new) cwd and MCP credentials.
        self._sessions[session_id] = _Session(cwd=cwd, mcp_servers=list(mcp_servers or []))
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.turn is not None and not session.turn.done():
            session.cancelled = True
            session.turn.cancel()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._sessions.get(session_id)
        if session is None:  # a client that skipped session/new: serve it anyway
            session = self._sessions[session_id] = _Session(cwd=".", mcp_servers=[])
        session.cancelled = False
        session.turn = asyncio.create_task(self._turn(session_id, session, prompt_text(prompt)))
        try:
            return PromptResponse(stop_reason=await session.turn)
        except asyncio.CancelledError:
            if session.cancelled:  # session/cancel, not the connection going away
                return PromptResponse(stop_reason="cancelled")
            raise
        finally:
            session.turn = None

    # --- one turn -------------------------------------------------------------------------

    async def _turn(self, session_id: str, session: _Session, text: str) -> StopReason:
        if is_resume(text):
            await self._say(session_id, f"Demo agent here, picking up where I left off. {text}")
            return "end_turn"
        server = next(
            (
                s
                for s in session.mcp_servers
                if isinstance(s, HttpMcpServer) and s.name == MCP_SERVER_NAME
            ),
            None,
        )
        if server is None:
            await self._say(
                session_id,
                f"Demo agent here. You said: {text}. I was given no Kandev MCP server "
                "(HTTP, named kandev), so I cannot reach Kandev.",
            )
            return "end_turn"
        await self._work_with_kandev(session_id, session, server, text)
        return "end_turn"

    async def _work_with_kandev(
        self, session_id: str, session: _Session, server: HttpMcpServer, text: str
    ) -> None:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        list_id = session.next_tool_call_id("list-tools")
        await self._tool_start(
            session_id, list_id, "List Kandev MCP tools", "fetch", {"url": server.url}
        )
        try:
            async with Client(
                streamable_http_client(server.url, http_client=self._http_client(server)),
                read_timeout_seconds=MCP_REQUEST_SECONDS,
            ) as client:
                listing = await client.list_tools()
                names = [tool.name for tool in listing.tools]
                await self._tool_done(
                    session_id, list_id, f"{len(names)} tools: {', '.join(names)}"
                )
                if ASK_TOOL in names:
                    await self._ask(session_id, session, client, text)
                else:
                    await self._say(
                        session_id,
                        f"Demo agent here. You said: {text}. I can reach Kandev "
                        f"({len(names)} tools: {', '.join(names)}).",
                    )
        except Exception as exc:
            reason = _error_text(exc)
            log.warning("Kandev MCP server at %s failed: %s", server.url, reason)
            await self._tool_failed(session_id, list_id, reason)
            await self._say(
                session_id,
                f"Demo agent here. You said: {text}. I could not reach Kandev at "
                f"{server.url}: {reason}",
            )

    async def _ask(self, session_id: str, session: _Session, client: Any, text: str) -> None:
        question = question_for(text)
        ask_id = session.next_tool_call_id("ask")
        arguments = {"questions": [question]}
        await self._tool_start(session_id, ask_id, f"Ask: {question['prompt']}", "other", arguments)
        try:
            result = await client.call_tool(
                ASK_TOOL, arguments, read_timeout_seconds=QUESTION_WAIT_SECONDS
            )
        except Exception as exc:
            reason = _error_text(exc)
            await self._tool_failed(session_id, ask_id, reason)
            await self._say(session_id, f"Demo agent here. I tried to ask you, but: {reason}")
            return
        if getattr(result, "is_error", False):
            problem = _result_text(result)
            await self._tool_failed(session_id, ask_id, problem)
            await self._say(session_id, f"Kandev could not take my question: {problem}")
            return
        payload = _result_payload(result) or {}
        await self._tool_done(session_id, ask_id, _result_text(result) or json.dumps(payload))
        answer = describe_answer(payload)
        await self._say(session_id, f"Demo agent here. I asked how to proceed. {answer}")

    # --- ACP updates ----------------------------------------------------------------------

    async def _say(self, session_id: str, text: str) -> None:
        # Stream the reply in a few pieces, as a real agent would.
        words = text.split(" ")
        step = max(1, len(words) // 3 + (len(words) % 3 > 0))
        for i in range(0, len(words), step):
            piece = " ".join(words[i : i + step])
            if i + step < len(words):
                piece += " "
            await self._conn.session_update(
                session_id=session_id, update=update_agent_message_text(piece)
            )

    async def _tool_start(
        self, session_id: str, call_id: str, title: str, kind: Any, raw_input: Any
    ) -> None:
        await self._conn.session_update(
            session_id=session_id,
            update=start_tool_call(
                call_id, title, kind=kind, status="in_progress", raw_input=raw_input
            ),
        )

    async def _tool_done(self, session_id: str, call_id: str, text: str) -> None:
        await self._conn.session_update(
            session_id=session_id,
            update=update_tool_call(
                call_id, status="completed", content=[tool_content(text_block(text))]
            ),
        )

    async def _tool_failed(self, session_id: str, call_id: str, text: str) -> None:
        await self._conn.session_update(
            session_id=session_id,
            update=update_tool_call(
                call_id, status="failed", content=[tool_content(text_block(text))]
            ),
        )


async def _serve() -> None:
    reader, writer = await stdio_streams()
    # stdout now belongs to ACP: anything printed by mistake goes to stderr instead.
    sys.stdout = sys.stderr
    # The SDK routes only the methods an agent defines; its Agent Protocol lists all of them.
    agent = DemoAgent()
    try:
        await run_agent(agent, writer, reader)  # type: ignore[arg-type]
    finally:
        await agent.aclose()


def main() -> None:
    """Run the demo agent on stdin/stdout until the client goes away."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="demo-agent: %(levelname)s %(message)s"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve())


if __name__ == "__main__":
    main()
