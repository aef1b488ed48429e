"""`AcpRuntime`: run an agent command as a subprocess and drive it over ACP on stdio.

One `AcpAgentHandle` is one agent process with one open ACP session. The process runs in
its own process group (so `stop()` also ends whatever the agent spawned), its stderr is kept
in a small ring buffer (`stderr_tail.py`, so failures can quote the last lines), and its
`session/update` notifications are reduced to `AgentUpdate`s (`acp_updates.py`) delivered to
`AgentEvents.on_agent_update` in the order the agent sent them (text chunks that queued up
behind a delivery as one update: `update_delivery.py`). The ACP client callbacks are
`acp_client.py`; permission requests are answered by the `PermissionPolicy` given to
`AcpRuntime` (`acp_permissions.py`; by default the first "allow" option, silently).

The agent never outlives the server: it is started through `process_guard.py` (the group
leader, which SIGKILLs the whole group when the server's end of its leash pipe closes, even
when the server was SIGKILLed), and its group leader is recorded in `agent_processes` while
it runs, so a restarted server kills survivors first (`kandev.agents.processes`). Every
process of the agent carries `KANDEV_SESSION_ID` in its environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
from acp.schema import (
    AcpMcpServer,
    AuthMethodAgent,
    ClientCapabilities,
    EnvVarAuthMethod,
    FileSystemCapabilities,
    HttpHeader,
    HttpMcpServer,
    Implementation,
    InitializeResponse,
    McpServerStdio,
    SseMcpServer,
    TerminalAuthMethod,
)

from kandev import __version__
from kandev.agents.acp_client import KandevAcpClient
from kandev.agents.acp_permissions import AutoAllowPolicy, PermissionPolicy
from kandev.agents.acp_updates import SessionUpdate, reduce_update
from kandev.agents.process_repository import ProcessRecord
from kandev.agents.processes import SESSION_ENV, AgentProcessLedger
from kandev.agents.runtime import AgentEvents, AgentFailed, AgentLaunch, AgentUpdate
from kandev.agents.stderr_tail import STDERR_MAX_LINE, STDERR_TAIL_LINES, StderrTail
from kandev.agents.stdio_transport import StdioTransport
from kandev.agents.update_delivery import deliver_updates
from kandev.log_fields import log_event

log = logging.getLogger(__name__)

T = TypeVar("T")

MCP_SERVER_NAME = "kandev"
EXIT_DRAIN_SECONDS = 1.0  # after the process exits, how long to wait for its pipes to drain
GUARD_SCRIPT = str(Path(__file__).with_name("process_guard.py"))
DEFAULT_START_TIMEOUT = 120.0  # seconds for spawn → initialize → (authenticate) → session/new
# An environment variable named in an auth method's name or description (adapters that
# advertise plain methods, e.g. codex-acp's "Use OPENAI_API_KEY", name their variable there).
ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")

AuthMethod = EnvVarAuthMethod | TerminalAuthMethod | AuthMethodAgent


def auth_method_env(method: AuthMethod) -> list[str]:
    """The environment variables an auth method needs (empty: not an env-var method)."""
    if isinstance(method, EnvVarAuthMethod):
        return [var.name for var in method.vars if not var.optional]
    if isinstance(method, TerminalAuthMethod):
        return []  # needs a person at a terminal
    return ENV_NAME.findall(f"{method.id} {method.name} {method.description or ''}")


def choose_auth_method(methods: list[AuthMethod], env: Mapping[str, str]) -> AuthMethod | None:
    """The first advertised method whose environment variables are all set (non-empty)."""
    for method in methods:
        needed = auth_method_env(method)
        if needed and all(env.get(name) for name in needed):
            return method
    return None


def resolve_command(command: list[str]) -> list[str]:
    """The argv to execute; `kandev …` runs this very installation (`python -m kandev …`)."""
    if not command:
        raise AgentFailed("agent command is empty")
    if command[0] == "kandev":
        return [sys.executable, "-m", "kandev", *command[1:]]
    return list(command)


def check_program(program: str, env: Mapping[str, str], cwd: Path) -> None:
    """Fail readably, before anything starts, when the agent's program cannot be run."""
    if os.sep in program:
        path = cwd / program  # relative paths are relative to the agent's cwd
        if not path.exists():
            raise AgentFailed(f"agent command not found: {program}")
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            if shutil.which(program, mode=os.F_OK, path=env.get("PATH", os.defpath)):
                raise AgentFailed(f"agent command is not executable: {program}")
            raise AgentFailed(f"agent command not found: {program}")
        path = Path(found)
    if path.is_dir() or not os.access(path, os.X_OK):
        raise AgentFailed(f"agent command is not executable: {program}")


def guarded_argv(argv: list[str], leash_fd: int) -> list[str]:
    """Run `argv` under the process guard (see process_guard.py); -I -S: fast, isolated."""
    guard = [sys.executable, "-I", "-S", GUARD_SCRIPT, str(os.getpid()), str(leash_fd)]
    return [*guard, "--", *argv]


class _ProcessEnded(Exception):
    """The agent process ended (or closed its output) while a request was outstanding."""


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, RequestError):
        text = str(exc)
        if isinstance(exc.data, Mapping):
            detail = exc.data.get("details") or exc.data.get("message")
            if detail:
                text = f"{text}: {detail}"
        elif exc.data:
            text = f"{text}: {exc.data}"
        return text
    return str(exc) or type(exc).__name__


class AcpAgentHandle:
    """A running ACP agent process with one open session (implements `AgentHandle`)."""

    def __init__(
        self,
        launch: AgentLaunch,
        events: AgentEvents,
        process: asyncio.subprocess.Process,
        *,
        stop_grace: float,
        leash_fd: int | None = None,
        ledger: AgentProcessLedger | None = None,
        permission_policy: PermissionPolicy | None = None,
    ) -> None:
        self._launch = launch
        self._events = events
        self._proc = process
        self._stop_grace = stop_grace
        self._leash_fd = leash_fd  # closing it makes the guard kill the agent's group
        self._ledger = ledger
        self._record: ProcessRecord | None = None
        self._recorded = asyncio.Event()  # record() has run (or there is nothing to record)
        if ledger is None:
            self._recorded.set()
        self._stderr = StderrTail()
        self._acp_session_id = ""
        self._auth_method = ""  # the ACP auth method used, if any
        self._auth_methods: list[AuthMethod] = []  # what the agent advertised
        self._start_deadline: float | None = None  # loop time by which start() must be done
        self._resumed = False
        self._ready = False  # start() finished: exits from now on are reported
        self._stopping = False
        self._exit_reported = False
        self._suppress_updates = False  # while session/load replays history
        self._exit_reason: str | None = None
        self._broken_reason: str | None = None
        self._exited = asyncio.Event()
        self._prompt_running = False
        self._updates: asyncio.Queue[AgentUpdate] = asyncio.Queue()
        self._stop_task: asyncio.Task[None] | None = None
        assert process.stdin is not None and process.stdout is not None
        # The SDK talks through `self._acp`; `_pump_stdout` hands it the agent's JSON lines
        # and keeps anything else (banners, stray prints) for messages.
        self._acp = StdioTransport(process.stdin, on_sent=self._sent)
        self._stray_stdout = StderrTail(keep=5)
        self._on_prompt_sent: Callable[[], None] | None = None
        client = KandevAcpClient(
            self._on_session_update, permission_policy or AutoAllowPolicy(), launch.session_id
        )
        # The SDK routes only the methods a client defines; its Client Protocol lists all.
        self._conn = connect_to_agent(client, self._acp)  # type: ignore[arg-type]
        self._stdout_task = asyncio.create_task(self._pump_stdout(), name="acp-agent-stdout")
        self._stderr_task = asyncio.create_task(self._read_stderr(), name="acp-agent-stderr")
        self._deliver_task = asyncio.create_task(self._deliver_updates(), name="acp-agent-updates")
        self._watch_task = asyncio.create_task(self._watch(), name="acp-agent-watch")

    # --- AgentHandle ---------------------------------------------------------------------

    @property
    def acp_session_id(self) -> str:
        return self._acp_session_id

    @property
    def resumed(self) -> bool:
        return self._resumed

    @property
    def alive(self) -> bool:
        return self._proc.returncode is None and not self._exited.is_set() and not self._stopping

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return self._stderr.tail(lines)

    async def prompt(self, text: str, on_sent: Callable[[], None] | None = None) -> str:
        """Run one turn; returns the stop reason once every update of it was delivered.

        `on_sent` is called once the session/prompt request was written to the agent's
        stdin and drained (so a resume can be marked delivered only then).
        """
        if not self.alive:
            if self._stopping:
                raise AgentFailed("agent was stopped")
            raise AgentFailed(self._exit_reason or "agent is not running")
        if self._prompt_running:
            raise RuntimeError("a turn is already running in this agent session")
        self._prompt_running = True
        self._on_prompt_sent = on_sent
        try:
            response = await self._call(
                self._conn.prompt(session_id=self._acp_session_id, prompt=[text_block(text)]),
                timeout_s=None,
            )
        except _ProcessEnded:
            if self._stopping:
                raise AgentFailed("agent was stopped") from None
            await self._drain_updates()  # what it said before dying lands before the failure
            raise AgentFailed(self._death_reason()) from None
        except RequestError as exc:
            hint = ""
            if exc.code == -32000:  # auth_required: e.g. an adapter that checks on first use
                hint = f" ({self._auth_hint(self._auth_methods)})"
            raise AgentFailed(f"agent failed the prompt{hint}: {_error_text(exc)}") from None
        except (ValueError, TypeError) as exc:  # a malformed answer (pydantic validation)
            message = f"agent sent an invalid answer to ACP session/prompt: {exc}"
            raise AgentFailed(message) from None
        finally:
            self._prompt_running = False
            self._on_prompt_sent = None
        await self._updates.join()
        return str(response.stop_reason)

    def _sent(self, message: dict[str, Any]) -> None:
        # Called once the message was written to the agent's stdin and drained.
        if message.get("method") == "session/prompt":
            notify, self._on_prompt_sent = self._on_prompt_sent, None
            if notify is not None:
                notify()

    async def cancel(self) -> None:
        if not self.alive:
            return
        with contextlib.suppress(ConnectionError, OSError):
            await self._conn.cancel(session_id=self._acp_session_id)

    async def stop(self) -> None:
        self._stopping = True
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._terminate(), name="acp-agent-stop")
        await asyncio.shield(self._stop_task)

    # --- start-up ------------------------------------------------------------------------

    async def _open(self, limit_s: float) -> None:
        """initialize, then session/load (when asked and supported) or session/new."""
        launch = self._launch
        try:
            init = await self._step(
                "initialize",
                self._conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                        terminal=False,
                    ),
                    client_info=Implementation(name="kandev", title="Kandev", version=__version__),
                ),
                limit_s,
            )
        except RequestError as exc:
            message = f"agent failed ACP initialize: {_error_text(exc)}"
            raise AgentFailed(self._with_stderr(message)) from None
        if init.protocol_version != PROTOCOL_VERSION:
            raise AgentFailed(
                f"agent speaks ACP protocol version {init.protocol_version}, "
                f"Kandev speaks version {PROTOCOL_VERSION}"
            )
        self._auth_methods = list(init.auth_methods or [])
        await self._authenticate(self._auth_methods, limit_s)

        mcp_servers: list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio] = [
            HttpMcpServer(
                type="http",
                name=MCP_SERVER_NAME,
                url=launch.mcp_url,
                headers=[HttpHeader(name="Authorization", value=f"Bearer {launch.mcp_token}")],
            )
        ]
        cwd = str(launch.cwd)
        resume_id = launch.resume_acp_session_id
        if resume_id and _can_load(init):
            # The agent replays the conversation while loading; Kandev already stored it, so
            # those updates are dropped as they arrive (they all precede the response).
            self._suppress_updates = True
            try:
                await self._step(
                    "session/load",
                    self._conn.load_session(cwd=cwd, session_id=resume_id, mcp_servers=mcp_servers),
                    limit_s,
                )
            except RequestError as exc:
                log.info(
                    "agent could not load ACP session %s (%s); opening a new one",
                    resume_id,
                    _error_text(exc),
                )
            else:
                self._acp_session_id = resume_id
                self._resumed = True
                return
            finally:
                self._suppress_updates = False

        try:
            new = await self._step(
                "session/new", self._conn.new_session(cwd=cwd, mcp_servers=mcp_servers), limit_s
            )
        except RequestError as exc:
            hint = ""
            if exc.code == -32000:  # auth_required
                hint = f" ({self._auth_hint(self._auth_methods)})"
            message = f"agent refused ACP session/new{hint}: {_error_text(exc)}"
            raise AgentFailed(self._with_stderr(message)) from None
        self._acp_session_id = new.session_id

    async def _authenticate(self, methods: list[AuthMethod], limit_s: float) -> None:
        """ACP authenticate with the first advertised method the agent's env satisfies."""
        # The agent's own environment (as start() builds it): Kandev's, the profile's on top.
        method = choose_auth_method(methods, {**os.environ, **self._launch.env})
        if method is None:
            return  # nothing Kandev can satisfy: the agent may be logged in already
        try:
            await self._step("authenticate", self._conn.authenticate(method_id=method.id), limit_s)
        except RequestError as exc:
            message = (
                f"agent refused ACP authenticate with method {method.id!r}: {_error_text(exc)}"
            )
            raise AgentFailed(self._with_stderr(message)) from None
        self._auth_method = method.id
        log_event(
            log,
            logging.INFO,
            "agent authenticated",
            session_id=self._launch.session_id,
            auth_method=method.id,
        )

    def _auth_hint(self, methods: list[AuthMethod]) -> str:
        envs = sorted({name for method in methods for name in auth_method_env(method)})
        if envs:
            return (
                "set "
                + " or ".join(envs)
                + " in the profile env, or log in with the agent's own command line first"
            )
        return "log in with the agent's own command line first"

    async def _step(self, what: str, request: Awaitable[T], limit_s: float) -> T:
        """One start-up request; every failure but an ACP error answer becomes AgentFailed.

        `limit_s` is the whole start's limit: each step gets what is left of it.
        """
        loop = asyncio.get_running_loop()
        if self._start_deadline is None:
            self._start_deadline = loop.time() + limit_s
        remaining = max(self._start_deadline - loop.time(), 0.0)
        try:
            return await self._call(request, timeout_s=remaining)
        except RequestError:
            raise
        except TimeoutError:
            message = (
                f"agent did not start within {limit_s:g} s (KANDEV_AGENT_START_TIMEOUT): "
                f"no answer to ACP {what}"
            )
        except _ProcessEnded:
            message = f"agent did not answer ACP {what} ({self._exit_summary()})"
        except Exception as exc:
            message = f"agent sent an invalid answer to ACP {what}: {exc}"
        raise AgentFailed(self._with_stderr(message))

    def _mark_ready(self) -> None:
        self._ready = True

    # --- requests racing the process -----------------------------------------------------

    async def _call(self, request: Awaitable[T], *, timeout_s: float | None) -> T:
        """Await an ACP request; raise _ProcessEnded if the process dies first.

        Raises TimeoutError after `timeout_s` seconds (None: no limit). The request is
        abandoned (and its pending response forgotten) in every failure case.
        """
        req = asyncio.ensure_future(request)
        ended = asyncio.ensure_future(self._exited.wait())
        try:
            done, _ = await asyncio.wait(
                {req, ended}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
            if req not in done and ended in done:
                # The answer may still sit in the pipe behind the exit: give it a moment.
                done, _ = await asyncio.wait({req}, timeout=EXIT_DRAIN_SECONDS)
            if req in done:
                exc = req.exception()
                if exc is None:
                    return req.result()
                if isinstance(exc, ConnectionError):
                    await self._after_connection_lost()
                    raise _ProcessEnded from None
                raise exc
            if ended.done():
                raise _ProcessEnded
            raise TimeoutError
        finally:
            for task in (req, ended):
                if not task.done():
                    task.cancel()

    async def _after_connection_lost(self) -> None:
        """The agent's stdout closed: wait for its exit, or end it if it lingers."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._exited.wait(), timeout=EXIT_DRAIN_SECONDS * 2)
            return
        self._broken_reason = "agent closed its output"
        self._signal_group(signal.SIGKILL)
        await self._exited.wait()

    # --- background tasks ----------------------------------------------------------------

    def _on_session_update(self, session_id: str, update: SessionUpdate) -> None:
        if self._suppress_updates or self._stopping:
            return
        if self._acp_session_id and session_id != self._acp_session_id:
            return
        try:
            reduced = reduce_update(update)
        except Exception:  # a malformed update must not break the stream
            log.exception("could not reduce an ACP session update")
            return
        if reduced is not None:
            self._updates.put_nowait(reduced)

    async def _drain_updates(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._updates.join(), timeout=EXIT_DRAIN_SECONDS * 5)

    async def _deliver_updates(self) -> None:
        session_id = self._launch.session_id
        deliver = functools.partial(self._events.on_agent_update, session_id)
        await deliver_updates(self._updates, deliver, session_id)

    async def _pump_stdout(self) -> None:
        stream = self._proc.stdout
        assert stream is not None
        parts: list[bytes] = []  # the current, unfinished line
        size = 0
        try:
            while chunk := await stream.read(65536):
                start = 0
                while (end := chunk.find(b"\n", start)) != -1:
                    parts.append(chunk[start:end])
                    self._route_stdout_line(b"".join(parts))
                    parts.clear()
                    size = 0
                    start = end + 1
                if start < len(chunk):
                    parts.append(chunk[start:])
                    size += len(chunk) - start
                    if size > DEFAULT_STDIO_BUFFER_LIMIT_BYTES:
                        log.warning("agent wrote an oversized line on stdout; dropped it")
                        parts.clear()
                        size = 0
        except (OSError, ValueError):
            pass
        finally:
            if parts:
                self._route_stdout_line(b"".join(parts))
            self._acp.feed_eof()

    def _route_stdout_line(self, line: bytes) -> None:
        stripped = line.strip()
        if stripped.startswith(b"{") and self._acp.feed_line(stripped):
            return
        if stripped:
            self._stray_stdout.feed(stripped[:STDERR_MAX_LINE] + b"\n")

    async def _read_stderr(self) -> None:
        stream = self._proc.stderr
        if stream is None:
            return
        try:
            while chunk := await stream.read(65536):
                self._stderr.feed(chunk)
        except (OSError, ValueError):
            pass
        finally:
            self._stderr.finish()

    async def _record_process(self) -> None:
        """Durable record of the group leader, written as soon as it runs."""
        assert self._ledger is not None
        try:
            self._record = await self._ledger.record(self._launch.session_id, self._proc.pid)
        except Exception:
            log.exception("could not record agent process of session %s", self._launch.session_id)
        finally:
            self._recorded.set()

    async def _forget_process(self) -> None:
        await self._recorded.wait()
        if self._ledger is None or self._record is None:
            return
        try:
            await self._ledger.forget(self._record)
        except Exception:
            log.exception("could not forget agent process of session %s", self._launch.session_id)

    def _release_leash(self) -> None:
        if self._leash_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._leash_fd)
            self._leash_fd = None

    async def _watch(self) -> None:
        returncode = await self._proc.wait()
        # Decided when the exit is seen: a later stop() does not make a crash expected.
        unexpected = self._ready and not self._stopping
        # Whatever the agent left behind in its group goes with it.
        self._signal_group(signal.SIGKILL)
        self._release_leash()
        await self._forget_process()  # before _exited: stop() returns with the record gone
        await asyncio.wait({self._stderr_task, self._stdout_task}, timeout=EXIT_DRAIN_SECONDS)
        self._exit_reason = self._with_stderr(self._broken_reason or _describe_exit(returncode))
        if self._ready:  # a failed start is logged once, as "agent start failed"
            log_event(
                log,
                logging.WARNING if unexpected else logging.INFO,
                "agent exited",
                session_id=self._launch.session_id,
                pid=self._proc.pid,
                **_exit_fields(returncode),
                expected=not unexpected,
            )
        self._exited.set()
        if not unexpected or self._exit_reported:
            return
        self._exit_reported = True
        await self._drain_updates()  # what it said before dying lands before the exit
        try:
            await self._events.on_agent_exit(self._launch.session_id, self._exit_reason)
        except Exception:
            log.exception("on_agent_exit failed for session %s", self._launch.session_id)

    # --- ending --------------------------------------------------------------------------

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    async def _terminate(self) -> None:
        if self._proc.returncode is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._proc.wait()), timeout=self._stop_grace)
            if self._proc.returncode is None:
                self._signal_group(signal.SIGKILL)
                await self._proc.wait()
        # The watcher records the exit (and may be reporting a crash that happened before
        # this stop: it is left to finish, since on_agent_exit may itself call stop()).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._exited.wait(), timeout=EXIT_DRAIN_SECONDS * 2)
        with contextlib.suppress(Exception):
            await self._conn.close()
        # Let an update being stored finish rather than cancel it half-way (bounded: stop()
        # may be called from inside on_agent_update).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._updates.join(), timeout=EXIT_DRAIN_SECONDS)
        tasks = (self._deliver_task, self._stderr_task, self._stdout_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        while not self._updates.empty():  # undelivered updates: release join() waiters
            self._updates.get_nowait()
            self._updates.task_done()
        if self._proc.stdin is not None:
            self._proc.stdin.close()

    # --- messages --------------------------------------------------------------------------

    def _exit_summary(self) -> str:
        if self._broken_reason:
            return self._broken_reason
        if self._proc.returncode is None:
            return "agent closed its output"
        return _describe_exit(self._proc.returncode)

    def _with_stderr(self, message: str) -> str:
        stray = self._stray_stdout.tail(3)
        if stray:
            message = f"{message}; it printed (not ACP): {stray}"
        tail = self._stderr.tail()
        return f"{message}; last stderr lines:\n{tail}" if tail else message

    def _death_reason(self) -> str:
        return self._exit_reason or self._with_stderr(self._exit_summary())


def _can_load(init: InitializeResponse) -> bool:
    caps = init.agent_capabilities
    return bool(caps is not None and caps.load_session)


def _exit_fields(returncode: int | None) -> dict[str, object]:
    """`code` and `signal` of an exit (a negative return code is the signal)."""
    if returncode is None:
        return {}
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return {"code": returncode, "signal": name}
    return {"code": returncode}


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"agent was killed by {name} (exit code {returncode})"
    return f"agent exited with code {returncode}"


class AcpRuntime:
    """Starts ACP agents as local subprocesses (implements `AgentRuntime`).

    The agent inherits Kandev's environment with `launch.env` on top (and `KANDEV_SESSION_ID`),
    runs in `launch.cwd`, under the process guard, which is its process-group leader. With a
    ledger, survivors of the session are killed before the launch and the new group leader is
    recorded while it runs.
    """

    def __init__(
        self,
        *,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        stop_grace: float = 5.0,
        ledger: AgentProcessLedger | None = None,
        permission_policy: PermissionPolicy | None = None,
        init_timeout: float | None = None,  # the former name of start_timeout
    ) -> None:
        # Seconds from spawning the agent to its open session (initialize, authenticate,
        # session/new or load): a cold `npx --yes` download counts against it.
        self.start_timeout = start_timeout if init_timeout is None else init_timeout
        self.stop_grace = stop_grace
        self.ledger = ledger
        self.permission_policy = permission_policy or AutoAllowPolicy()

    async def start(self, launch: AgentLaunch, events: AgentEvents) -> AcpAgentHandle:
        started = asyncio.get_running_loop().time()
        argv = resolve_command(launch.command)
        cwd = Path(launch.cwd)
        if not await asyncio.to_thread(os.path.isdir, cwd):
            raise AgentFailed(f"agent working directory does not exist: {cwd}")
        env = {**os.environ, **launch.env, SESSION_ENV: launch.session_id}
        await asyncio.to_thread(check_program, argv[0], env, cwd)
        if self.ledger is not None:
            # Never two agents for one session: an earlier one that survived goes first.
            await self.ledger.reap(launch.session_id)
        leash_read, leash_write = os.pipe()  # both ends close-on-exec in this process
        try:
            process = await asyncio.create_subprocess_exec(
                *guarded_argv(argv, leash_read),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(cwd),
                env=env,
                start_new_session=True,  # own process group: stop() ends the agent's children
                pass_fds=(leash_read,),  # only the guard gets the read end
                limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES,
            )
        except BaseException as exc:
            os.close(leash_write)  # a guard that did start sees EOF and ends its group
            if isinstance(exc, OSError):
                raise AgentFailed(f"agent command could not start: {argv[0]}: {exc}") from None
            raise
        finally:
            os.close(leash_read)

        handle = AcpAgentHandle(
            launch,
            events,
            process,
            stop_grace=self.stop_grace,
            leash_fd=leash_write,
            ledger=self.ledger,
            permission_policy=self.permission_policy,
        )
        handle._start_deadline = started + self.start_timeout
        try:
            if self.ledger is not None:
                await handle._record_process()
            await handle._open(self.start_timeout)
        except BaseException as exc:
            returncode = process.returncode  # its own exit, not the stop below
            await asyncio.shield(handle.stop())
            if isinstance(exc, AgentFailed):
                log_event(
                    log,
                    logging.WARNING,
                    "agent start failed",
                    session_id=launch.session_id,
                    pid=process.pid,
                    **_exit_fields(returncode),
                    reason=str(exc).split("; last stderr lines:", 1)[0],
                )
            raise
        handle._mark_ready()
        if not handle.alive:  # died right after answering; report it like any exit
            await asyncio.shield(handle.stop())
            raise AgentFailed(handle._death_reason())
        log_event(
            log,
            logging.INFO,
            "agent started",
            session_id=launch.session_id,
            pid=process.pid,
            command=argv[0],
            acp_session_id=handle.acp_session_id,
            resumed=handle.resumed,
            auth_method=handle._auth_method or None,
            seconds=round(asyncio.get_running_loop().time() - started, 3),
        )
        return handle
