"""A small ACP agent for tests, driven by the prompt text. Run it as a script.

Prompts (the first word picks the behaviour):

- ``echo X``     streams X back in several chunks, ends ``end_turn``.
- ``slow``       sends "working", then waits for session/cancel and ends ``cancelled``.
- ``crash``      sends "about to crash", writes a line to stderr, exits with code 3.
- ``tool``       sends a tool_call, its tool_call_update (completed) and a plan.
- ``permission [KIND [COMMAND]]`` asks session/request_permission (tool kind KIND, raw input
                 ``{"command": COMMAND}``) and replies ``permission: <option id>`` (or
                 ``permission: cancelled``).
- ``permission-detached [KIND]`` asks the same without waiting and ends its turn at once
                 (replies ``asked``); ``permission-result`` waits for that request's outcome and
                 replies with it like ``permission``.
- ``mcp``        calls ``list_workspaces_kandev`` on the "kandev" MCP server it was given
                 and replies with the raw text of the result.
- ``move JSON``  calls ``move_task_kandev`` with the JSON object as arguments on that
                 server and replies with the raw text of the result.
- ``ignore-term`` ignores SIGTERM from now on (stop() must escalate to SIGKILL).
- ``spawn FIFO`` starts a child that opens FIFO for writing and lives on; replies its pid.
- ``sleeper``    starts a child that sleeps until killed; replies ``spawned <pid>``.
- ``gitinfo``    replies with JSON ``{"cwd", "branch"}``: its session cwd and the git branch
                 checked out there (``git rev-parse --abbrev-ref HEAD``).
- ``write PATH TEXT`` writes TEXT (plus a newline) to PATH relative to its session cwd;
                 replies ``wrote PATH``.
- ``auth-required`` fails the prompt with ACP "Authentication required" (-32000).
- ``whoami``     replies with JSON: how the session was opened (new/load), its id, cwd,
                 the MCP servers it was given (with their headers) and $SCRIPTED_AGENT_PROBE.

Anything else gets ``unknown command: <first word>`` and, on the next line,
``received: <the whole prompt>`` (so tests can see exactly what reached the agent).

SCRIPTED_AGENT_RECORD=FILE makes it append one JSON line per answer it receives to FILE —
``{"via": "tool_call", "pid", "text"}`` for the result of its ask call, ``{"via": "resume",
"pid", "text"}`` for a resume prompt — written before it replies (fault tests count them).

SCRIPTED_AGENT_NO_LOAD=1 makes it not advertise loadSession. On session/load it first
replays one message ("replayed history"), as real agents replay the conversation; loading
an id that starts with "missing-" fails (resource not found).
SCRIPTED_AGENT_AUTH=VAR makes it advertise authMethods — a terminal login, then an env-var
method ``env-key`` needing VAR, then a plain method ``legacy-key`` whose description names
``SCRIPTED_LEGACY_KEY`` — and refuse session/new and session/load ("Authentication
required") until ``authenticate`` was called with a method whose variables are set in its
own environment; ``whoami`` then reports ``auth_method``.
SCRIPTED_AGENT_HANG=session/new makes it write ``scripted agent: hanging`` to stderr and
never answer session/new (start-timeout tests).
Nothing else is written to disk (but by ``write``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    RequestError,
    plan_entry,
    run_agent,
    start_tool_call,
    stdio_streams,
    text_block,
    tool_content,
    update_agent_message_text,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    AuthEnvVar,
    AuthMethodAgent,
    EnvVarAuthMethod,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    TerminalAuthMethod,
    TextContentBlock,
)

CRASH_STDERR_LINE = "scripted agent: crashing on purpose"
RESUME_MARKER = "[kandev:resume]"
# What the "ask" modes ask: two questions, the first with three options.
ASK_QUESTIONS = [
    {
        "id": "lang",
        "prompt": "Which languages should the fix cover?",
        "options": [
            {"option_id": "py", "label": "Python", "description": "the backend"},
            {"option_id": "js", "label": "JavaScript", "description": "the web UI"},
            {"option_id": "go", "label": "Go", "description": "the old CLI"},
        ],
    },
    {
        "prompt": "Ship it today?",
        "options": [
            {"label": "Yes", "description": "merge now"},
            {"label": "No", "description": "wait for review"},
        ],
    },
]
# A child that holds a FIFO open for writing until it dies (the test waits for EOF).
CHILD = (
    "import signal, sys\n"
    "fifo = open(sys.argv[1], 'w')\n"
    "fifo.write('alive')\n"
    "fifo.flush()\n"
    "signal.pause()\n"  # stays alive until killed
)


def _record(via: str, text: str) -> None:
    """Append what reached the agent to $SCRIPTED_AGENT_RECORD (one write, O_APPEND)."""
    path = os.environ.get("SCRIPTED_AGENT_RECORD")
    if not path:
        return
    line = json.dumps({"via": via, "pid": os.getpid(), "text": text}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _write_file(target: str, content: str) -> None:
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    with open(target, "w") as handle:
        handle.write(content + "\n")


class _Session:
    def __init__(self, opened_with: str, cwd: str, mcp_servers: list[Any]) -> None:
        self.opened_with = opened_with
        self.cwd = cwd
        self.mcp_servers = mcp_servers
        self.cancelled = asyncio.Event()


class ScriptedAgent:
    def __init__(self) -> None:
        self._conn: Any = None
        self._sessions: dict[str, _Session] = {}
        self._children: list[asyncio.subprocess.Process] = []
        self._detached: asyncio.Future[str] | None = None  # permission-detached's request
        self.asking: set[asyncio.Future[None]] = set()  # ask calls not yet over (see _main)
        self._auth_var = os.environ.get("SCRIPTED_AGENT_AUTH", "")
        self._auth_method: str | None = None

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=os.environ.get("SCRIPTED_AGENT_NO_LOAD") != "1",
                mcp_capabilities=McpCapabilities(http=True),
            ),
            agent_info=Implementation(name="scripted-agent", version="1"),
            auth_methods=self._auth_methods(),
        )

    def _auth_methods(self) -> list[Any]:
        if not self._auth_var:
            return []
        return [
            TerminalAuthMethod(type="terminal", id="login", name="Log in", args=["login"]),
            EnvVarAuthMethod(
                type="env_var", id="env-key", name="API key", vars=[AuthEnvVar(name=self._auth_var)]
            ),
            AuthMethodAgent(
                id="legacy-key",
                name="Legacy key",
                description="Requires setting the `SCRIPTED_LEGACY_KEY` environment variable.",
            ),
        ]

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        needs = {"env-key": self._auth_var, "legacy-key": "SCRIPTED_LEGACY_KEY"}.get(method_id)
        if not needs or not os.environ.get(needs):
            raise RequestError.invalid_params({"method_id": method_id, "reason": "not set up"})
        self._auth_method = method_id
        return AuthenticateResponse()

    def _check_auth(self) -> None:
        if self._auth_var and self._auth_method is None:
            raise RequestError.auth_required({"details": "call authenticate first"})

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        self._check_auth()
        if os.environ.get("SCRIPTED_AGENT_HANG") == "session/new":
            sys.stderr.write("scripted agent: hanging\n")
            sys.stderr.flush()
            await asyncio.Event().wait()
        session_id = f"scripted-{uuid.uuid4().hex[:12]}"
        self._sessions[session_id] = _Session("new", cwd, list(mcp_servers or []))
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        self._check_auth()
        if session_id.startswith("missing-"):
            raise RequestError.resource_not_found(session_id)
        self._sessions[session_id] = _Session("load", cwd, list(mcp_servers or []))
        await self._say(session_id, "replayed history")
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.cancelled.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._sessions[session_id]
        session.cancelled = asyncio.Event()
        text = "".join(b.text for b in prompt if isinstance(b, TextContentBlock)).strip()
        command, _, rest = text.partition(" ")

        if text.startswith(RESUME_MARKER):
            _record("resume", text)
            await self._say(session_id, "resumed with: " + text)
        elif command in ("ask", "ask-abandon"):
            await self._say(session_id, await self._ask(session, abandon=command == "ask-abandon"))
        elif command == "echo":
            for i in range(0, len(rest), 4):
                await self._say(session_id, rest[i : i + 4])
        elif command == "slow":
            await self._say(session_id, "working")
            await session.cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        elif command == "crash":
            await self._say(session_id, "about to crash")
            sys.stderr.write(CRASH_STDERR_LINE + "\n")
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(3)
        elif command == "tool":
            await self._tool(session_id)
        elif command == "permission":
            await self._say(session_id, await self._permission(session_id, rest))
        elif command == "permission-detached":
            self._detached = asyncio.ensure_future(self._permission(session_id, rest))
            await self._say(session_id, "asked")
        elif command == "permission-result":
            assert self._detached is not None, "permission-detached first"
            await self._say(session_id, await self._detached)
        elif command == "mcp":
            await self._say(session_id, await self._call_mcp(session))
        elif command == "move":
            await self._say(session_id, await self._call_mcp(session, "move_task_kandev", rest))
        elif command == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            await self._say(session_id, "ignoring SIGTERM")
        elif command == "spawn":
            child = await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD, rest)
            self._children.append(child)
            await self._say(session_id, f"spawned {child.pid}")
        elif command == "sleeper":
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", "import signal; signal.pause()"
            )
            self._children.append(child)
            await self._say(session_id, f"spawned {child.pid}")
        elif command == "gitinfo":
            await self._say(session_id, await self._gitinfo(session))
        elif command == "write":
            relative, _, content = rest.partition(" ")
            await asyncio.to_thread(_write_file, os.path.join(session.cwd, relative), content)
            await self._say(session_id, f"wrote {relative}")
        elif command == "auth-required":  # an adapter that checks its login on first use
            raise RequestError.auth_required()
        elif command == "whoami":
            await self._say(session_id, self._whoami(session_id, session))
        else:
            await self._say(session_id, f"unknown command: {command}\nreceived: {text}")
        return PromptResponse(stop_reason="end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        update = update_agent_message_text(text)
        await self._conn.session_update(session_id=session_id, update=update)

    async def _tool(self, session_id: str) -> None:
        await self._conn.session_update(
            session_id=session_id,
            update=start_tool_call(
                "call-1",
                "Read README.md",
                kind="read",
                status="pending",
                raw_input={"path": "README.md"},
            ),
        )
        await self._conn.session_update(
            session_id=session_id,
            update=update_tool_call(
                "call-1", status="completed", content=[tool_content(text_block("42 lines"))]
            ),
        )
        await self._conn.session_update(
            session_id=session_id,
            update=update_plan(
                [
                    plan_entry("Read the code", status="completed"),
                    plan_entry("Write the fix", status="in_progress"),
                ]
            ),
        )

    async def _permission(self, session_id: str, rest: str = "") -> str:
        kind, _, command = rest.partition(" ")
        extra: dict[str, Any] = {}
        if kind:
            extra["kind"] = kind
        if command:
            extra["raw_input"] = {"command": command}
        response = await self._conn.request_permission(
            session_id=session_id,
            tool_call=update_tool_call("call-p", title="Edit a file", status="pending", **extra),
            options=[
                PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            ],
        )
        outcome = response.outcome
        result = f"permission: {getattr(outcome, 'option_id', outcome.outcome)}"
        _record("permission", result)
        return result

    async def _gitinfo(self, session: _Session) -> str:
        proc = await asyncio.create_subprocess_exec(
            "git",
            "-C",
            session.cwd,
            "rev-parse",
            "--abbrev-ref",
            "HEAD",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await proc.communicate()
        return json.dumps({"cwd": session.cwd, "branch": out.decode().strip()})

    def _whoami(self, session_id: str, session: _Session) -> str:
        servers = []
        for server in session.mcp_servers:
            entry: dict[str, Any] = {"name": server.name, "type": getattr(server, "type", "stdio")}
            if isinstance(server, HttpMcpServer):
                entry["url"] = server.url
                entry["headers"] = {h.name: h.value for h in server.headers}
            servers.append(entry)
        return json.dumps(
            {
                "opened_with": session.opened_with,
                "session_id": session_id,
                "cwd": session.cwd,
                "mcp_servers": servers,
                "probe": os.environ.get("SCRIPTED_AGENT_PROBE"),
                "auth_method": self._auth_method,
            }
        )

    async def _call_mcp(
        self, session: _Session, tool: str = "list_workspaces_kandev", arguments: str = "{}"
    ) -> str:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        server = next(
            (s for s in session.mcp_servers if isinstance(s, HttpMcpServer) and s.name == "kandev"),
            None,
        )
        if server is None:
            return "no kandev MCP server"
        headers = {h.name: h.value for h in server.headers}
        try:
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(server.url, http_client=http)) as client,
            ):
                result = await client.call_tool(tool, json.loads(arguments))
        except Exception as exc:
            return f"mcp error: {exc!r}"
        return "".join(getattr(block, "text", "") for block in result.content)

    async def _ask(self, session: _Session, *, abandon: bool) -> str:
        """Call ask_user_question_kandev. `abandon`: give up at the first progress
        notification (the question exists by then) and end the turn."""
        over: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.asking.add(over)
        try:
            return await self._ask_call(session, abandon=abandon)
        finally:
            over.set_result(None)
            self.asking.discard(over)

    async def _ask_call(self, session: _Session, *, abandon: bool) -> str:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        server = next(s for s in session.mcp_servers if getattr(s, "name", "") == "kandev")
        headers = {h.name: h.value for h in server.headers}
        args = {"questions": ASK_QUESTIONS, "context": "scripted agent asking"}
        progressed = asyncio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            progressed.set()

        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=None)) as http,
            Client(streamable_http_client(server.url, http_client=http)) as client,
        ):
            # Tools first, as agents do: a call to a tool the client has not listed lists
            # them after the result came (to check it against the output schema), and a
            # server that died right after answering fails the call with its answer in hand.
            await client.list_tools()
            call = asyncio.ensure_future(
                client.call_tool(
                    "ask_user_question_kandev",
                    args,
                    progress_callback=on_progress,
                    read_timeout_seconds=3600,
                )
            )
            if abandon:
                waiter = asyncio.ensure_future(progressed.wait())
                await asyncio.wait({call, waiter}, return_when=asyncio.FIRST_COMPLETED)
                if not call.done():
                    call.cancel()
                    waiter.cancel()
                    return "gave up waiting"
                waiter.cancel()
            result = await call
            # Record before leaving the client: its exit talks to the server again (session
            # DELETE), which fails when the server was killed right after answering, and the
            # answer had reached this agent by then.
            text = "".join(getattr(block, "text", "") for block in result.content)
            _record("tool_call", text)
        return text


async def _main() -> None:
    stdin, writer = await stdio_streams()
    agent = ScriptedAgent()
    # The connection to the server ends when stdin does, taking the prompt being served
    # with it. A tool result the server sent just before it died is still in this agent's
    # socket then: the relay ends the connection only once the ask call in flight has
    # read it (or failed), as an agent whose tool call outlives its client would.
    reader = asyncio.StreamReader(limit=stdin._limit)

    async def relay() -> None:
        while chunk := await stdin.read(65536):
            reader.feed_data(chunk)
        if agent.asking:
            await asyncio.wait(agent.asking, timeout=10)
        reader.feed_eof()

    relaying = asyncio.ensure_future(relay())
    try:
        await run_agent(agent, writer, reader)
    finally:
        relaying.cancel()


if __name__ == "__main__":
    asyncio.run(_main())
