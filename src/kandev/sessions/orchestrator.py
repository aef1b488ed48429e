"""The orchestrator: live agent processes and the turn lifecycle of each session.

It owns what is only in memory (running agent handles, the open text message of a turn)
and asks the SessionRecorder to make every durable change. One asyncio lock per session
orders the decisions "start a turn now" versus "queue the prompt".
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.agents.runtime import AgentFailed, AgentHandle, AgentLaunch, AgentRuntime, AgentUpdate
from kandev.auth.agent_tokens import AgentTokenService
from kandev.board import agent_profile_repository, task_repository
from kandev.board.models import Task
from kandev.catalog import messages as kinds
from kandev.catalog.states import CANCELLED, FAILED, IDLE, STARTING
from kandev.config import Settings
from kandev.db.engine import Database
from kandev.faults import fault_point
from kandev.log_fields import log_event
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.models import Message, Session
from kandev.sessions.recorder import SessionRecorder
from kandev.sessions.turn_hooks import (
    DispatchRejected,
    PromptNotSent,
    ResumeReservation,
    TurnHooks,
    Workdirs,
)

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_SECONDS = 5.0
# How long a resume waits for its prompt to be written to the agent's stdin.
RESUME_SEND_SECONDS = 30.0

# How a streamed update kind is stored as a message type.
MESSAGE_TYPE_BY_UPDATE = {
    "agent_text": "message",
    "agent_thought": "thinking",
    "tool_call": kinds.TOOL_CALL_TYPE,
    "tool_call_update": kinds.TOOL_CALL_TYPE,
    "plan": "agent_plan",
}


@dataclass
class LiveSession:
    handle: AgentHandle | None = None
    launching: bool = False
    turn_id: str | None = None
    stopping: bool = False
    text_message: Message | None = None  # the open run of agent text / thought chunks
    keyed_messages: dict[str, Message] = field(default_factory=dict)  # tool calls, plan
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Read once per turn so streamed updates cost one write each, no lookups.
    session: Session | None = None
    owner_id: str = ""


@dataclass(frozen=True)
class PromptResult:
    session_id: str
    turn_id: str | None
    queued: bool
    queued_prompt_id: str | None = None


class Orchestrator:
    def __init__(
        self,
        db: Database,
        recorder: SessionRecorder,
        runtime: AgentRuntime,
        agent_tokens: AgentTokenService,
        settings: Settings,
        workdirs: Workdirs | None = None,
    ) -> None:
        self.db = db
        self.recorder = recorder
        self.runtime = runtime
        self.agent_tokens = agent_tokens
        self.settings = settings
        self.workdirs = workdirs  # None: tasks on repositories are not supported here
        self.hooks = TurnHooks()  # the layers above register here (see turn_hooks)
        self._live: dict[str, LiveSession] = {}
        self._background: set[asyncio.Task[Any]] = set()

    def live(self, session_id: str) -> LiveSession:
        return self._live.setdefault(session_id, LiveSession())

    def turn_lock(self, session_id: str) -> asyncio.Lock:
        """Held while a turn of the session starts or ends: a move that must see whether a
        turn is running (and not race its end) holds it too."""
        return self.live(session_id).lock

    def is_agent_running(self, session_id: str) -> bool:
        live = self._live.get(session_id)
        return bool(live and live.handle and live.handle.alive)

    def has_live_turn(self, session_id: str) -> bool:
        """An agent turn of this session is running now (moves to its task are deferred)."""
        live = self._live.get(session_id)
        return live is not None and live.turn_id is not None

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def run_in_background(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Background work that must end with the server (shutdown cancels it)."""
        self._spawn(coro)

    # --- launching ----------------------------------------------------------------------

    async def start_session(self, session: Session) -> None:
        """Start the agent of a new managed session in the background; drain its queue."""
        live = self.live(session.id)
        live.launching = True
        self._spawn(self._launch_then_drain(session.id))

    async def _launch_then_drain(self, session_id: str) -> None:
        live = self.live(session_id)
        try:
            await self._ensure_agent(session_id)
        except AgentFailed as exc:
            live.launching = False
            await self._fail(session_id, str(exc))
            return
        except Exception as exc:  # a launch must never leave the session hanging in CREATED
            log.exception("launching the agent of session %s failed", session_id)
            live.launching = False
            await self._fail(session_id, f"the agent could not be started: {exc}")
            return
        await self._first_turn_or_idle(session_id)

    async def _first_turn_or_idle(self, session_id: str) -> None:
        """The agent is up: a queued prompt (the session's initial one) starts its turn at
        once, STARTING → RUNNING, so the session never reports IDLE before its first turn;
        with nothing queued it is IDLE."""
        live = self.live(session_id)
        async with live.lock:
            live.launching = False
            started = None if live.stopping else await self._start_next_queued(live, session_id)
            if started is None:
                await self.recorder.set_state(session_id, IDLE, only_from=(STARTING,))
        if started is not None:
            self._spawn(self._run_turn(session_id, *started))

    async def _ensure_agent(self, session_id: str) -> AgentHandle:
        live = self.live(session_id)
        if live.handle is not None and live.handle.alive:
            return live.handle
        async with self.db.read() as conn:
            session = await sessions_repo.get_session(conn, session_id)
            if session is None or session.agent_profile_id is None:
                raise AgentFailed("session has no agent profile")
            profile = await agent_profile_repository.get_profile(conn, session.agent_profile_id)
            task = await task_repository.get_task(conn, session.task_id)
        if profile is None:
            raise AgentFailed("the session's agent profile no longer exists")
        if task is None:
            raise AgentFailed("the session's task no longer exists")
        if task.repository_id and self.workdirs is not None:
            # A task on a repository runs in its own worktree (created on first use).
            cwd = await self.workdirs.ensure_worktree(task, session)
        else:
            cwd = await asyncio.to_thread(self._agent_cwd, task)
        await self.recorder.set_state(session_id, STARTING, only_from=("CREATED", IDLE))
        async with self.db.write() as conn:
            # One live token per process: a relaunch revokes what the last process held.
            await self.agent_tokens.revoke_for_session(conn, session_id)
            token = await self.agent_tokens.mint(conn, session_id, session.task_id)
        launch = AgentLaunch(
            session_id=session_id,
            command=list(profile.command),
            env={**os.environ, **profile.env},
            cwd=cwd,
            mcp_url=self.agent_mcp_url(),
            mcp_token=token,
            resume_acp_session_id=session.acp_session_id or None,
        )
        live.handle = await self.runtime.start(launch, self)
        if live.handle.acp_session_id != session.acp_session_id:
            await self.recorder.save_acp_session_id(session_id, live.handle.acp_session_id)
        return live.handle

    def _task_folder(self, task_id: str) -> Path:
        return self.settings.data_dir / "tasks" / task_id

    def _agent_cwd(self, task: Task) -> Path:
        """Where the agent runs: the task's `local_path`, which must be an existing directory
        (Kandev never creates directories at a user-given path), else the per-task folder in
        the data dir (created)."""
        if task.local_path:
            path = Path(task.local_path)
            if not path.is_absolute():
                raise AgentFailed(f"local_path must be an absolute path: {task.local_path}")
            if not path.is_dir():
                raise AgentFailed(f"local_path is not an existing directory: {task.local_path}")
            return path
        folder = self._task_folder(task.id)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise AgentFailed(f"could not create the task folder {folder}: {exc}") from None
        return folder

    def agent_mcp_url(self) -> str:
        return f"{self.settings.public_base_url()}/agent/mcp/"

    # --- turns --------------------------------------------------------------------------

    async def submit_prompt(self, session: Session, text: str, author_id: str = "") -> PromptResult:
        """Start a turn now, or queue the prompt when a turn is running or the agent starts."""
        live = self.live(session.id)
        async with live.lock:
            if session.agent_profile_id is None:
                # Bring-your-own agent: the prompt is recorded; the agent reads it over MCP.
                self._supersede(session.id)
                turn = await self.recorder.begin_turn(session, text, author_id)
                return PromptResult(session.id, turn.id, False)
            if live.launching or live.turn_id is not None:
                queued_id = await self.recorder.enqueue_prompt(session, text, author_id)
                return PromptResult(session.id, None, True, queued_id)
            self._supersede(session.id)
            turn, owner_id = await self.recorder.begin_live_turn(session, text, author_id)
            self._begin_live_turn(live, session, turn.id, owner_id)
        self._spawn(self._run_turn(session.id, turn.id, text))
        return PromptResult(session.id, turn.id, False)

    async def prompt_session(
        self,
        session_id: str,
        text: str,
        author_id: str,
        check: Callable[[AsyncConnection], Awaitable[Session]],
    ) -> PromptResult:
        """`submit_prompt` for a session `check` reads and authorizes inside the prompt's
        own write transaction (one transaction per prompt). `check` raising writes nothing."""
        fresh = session_id not in self._live
        live = self.live(session_id)
        try:
            async with live.lock:
                if live.launching or live.turn_id is not None:
                    _, queued_id = await self.recorder.enqueue_checked(text, author_id, check)
                    return PromptResult(session_id, None, True, queued_id)
                session, turn, owner_id = await self.recorder.begin_checked_turn(
                    session_id, text, author_id, check
                )
                # The new turn is committed: live ask calls of the old one end.
                self._supersede(session_id)
                if session.agent_profile_id is None:
                    # Bring-your-own agent: the prompt is recorded; the agent reads it over MCP.
                    return PromptResult(session_id, turn.id, False)
                self._begin_live_turn(live, session, turn.id, owner_id)
        except BaseException:
            if fresh and live.handle is None and live.turn_id is None and not live.launching:
                self._live.pop(session_id, None)  # no entry for a session nobody may prompt
            raise
        self._spawn(self._run_turn(session_id, turn.id, text))
        return PromptResult(session_id, turn.id, False)

    @staticmethod
    def _begin_live_turn(live: LiveSession, session: Session, turn_id: str, owner_id: str) -> None:
        live.turn_id = turn_id
        live.text_message = None
        live.keyed_messages.clear()
        live.session = session
        live.owner_id = owner_id

    async def _run_turn(
        self,
        session_id: str,
        turn_id: str,
        text: str,
        sent: asyncio.Future[None] | None = None,
    ) -> None:
        """One turn. `sent` (a resume) resolves once the prompt was written to the agent,
        or fails when the turn ended before that."""

        def prompt_sent() -> None:
            if sent is not None and not sent.done():
                sent.set_result(None)

        def prompt_not_sent(exc: BaseException) -> None:
            if sent is not None and not sent.done():
                sent.set_exception(AgentFailed(f"the prompt was not sent: {exc}"))

        live = self.live(session_id)
        try:
            handle = await self._ensure_agent(session_id)
            stop_reason = await handle.prompt(text, on_sent=prompt_sent)
        except Exception as exc:
            prompt_not_sent(exc)
            await self._turn_failed(session_id, turn_id, exc)
            return
        except BaseException as exc:  # cancelled: the server is shutting down
            prompt_not_sent(exc)
            raise
        prompt_sent()  # a turn that ended was sent, whether or not the runtime said so
        if live.stopping:
            return
        await self._turn_done(session_id, turn_id, stop_reason)

    async def _turn_failed(self, session_id: str, turn_id: str, exc: Exception) -> None:
        live = self.live(session_id)
        if isinstance(exc, AgentFailed):
            if not live.stopping:
                await self._fail(session_id, str(exc))
            return
        # an unexpected runtime bug must not strand the session
        log.error("turn %s of session %s failed", turn_id, session_id, exc_info=exc)
        if not live.stopping:
            await self._fail(session_id, f"internal error: {exc}")

    async def _turn_done(self, session_id: str, turn_id: str, stop_reason: str) -> None:
        live = self.live(session_id)
        async with live.lock:
            live.turn_id = None
            live.text_message = None
            # The turn is over: open questions stay answerable (detached); while one is open
            # the session waits for input and turn-complete automation does not run.
            # One transaction: the turn-ending hooks, the turn's end, then a deferred move
            # lands or turn-complete automation runs (not while `waiting`); step-entry
            # prompts they queue are dispatched just below.
            ended = await self.recorder.finish_turn(session_id, turn_id, stop_reason, self.hooks)
            for then in ended.after:
                await then()
        if ended.queued or ended.after:  # nothing queued and no hook acted: nothing to pop
            await self.dispatch_queued(session_id)

    async def dispatch_queued(self, session_id: str) -> None:
        """Start the next queued prompt, if the session is free and has one (else it waits)."""
        live = self.live(session_id)
        async with live.lock:
            if live.turn_id is not None or live.stopping or live.launching:
                return
            started = await self._start_next_queued(live, session_id)
        if started is not None:
            self._spawn(self._run_turn(session_id, *started))

    async def _start_next_queued(
        self, live: LiveSession, session_id: str
    ) -> tuple[str, str] | None:
        """Under the session's lock: the next queued prompt becomes the running turn;
        returns (turn id, prompt) for _run_turn, or None when nothing was started."""
        queued = await self.recorder.pop_prompt(session_id)
        if queued is None:
            return None
        async with self.db.read() as conn:
            session = await sessions_repo.get_session(conn, session_id)
        if session is None or session.is_terminal:
            return None
        self._supersede(session_id)
        turn, owner_id = await self.recorder.begin_live_turn(
            session, queued["content"], queued["queued_by"]
        )
        self._begin_live_turn(live, session, turn.id, owner_id)
        return turn.id, queued["content"]

    def _supersede(self, session_id: str) -> None:
        for superseded in self.hooks.superseded:
            superseded(session_id)

    async def resume_detached(
        self,
        *,
        session_id: str,
        prompt: str,
        reservation: ResumeReservation,
    ) -> None:
        """Hand a late answer to the agent as a new turn; returns once the prompt was
        written to the agent's stdin (so the caller may then mark it delivered).

        A reservation turn is written first (not authoritative while empty and unattempted,
        so the question's own turn stays current and a failure can restore the bundle), then
        marked attempted right before the prompt goes to the agent: from that point the answer
        is never restored. Raises DispatchRejected when nothing was sent, and PromptNotSent
        when the turn started but its prompt could not be written (the agent died first).
        """
        live = self.live(session_id)
        async with live.lock:
            async with self.db.read() as conn:
                session = await sessions_repo.get_session(conn, session_id)
            if session is None or session.is_terminal:
                raise DispatchRejected("the session has ended")
            if session.agent_profile_id is None:
                raise DispatchRejected("the session has no managed agent to resume")
            if live.launching or live.turn_id is not None:
                raise DispatchRejected("the agent is busy with another turn")
            turn_id = self.recorder.new_id()
            async with self.db.write() as conn:
                await reservation.reserve(conn, turn_id, session, self.recorder.clock.now())
            live.stopping = False
            try:
                await self._ensure_agent(session_id)
            except AgentFailed as exc:
                async with self.db.write() as conn:
                    await reservation.release(conn, turn_id)
                raise DispatchRejected(f"the agent could not be started: {exc}") from exc
            async with self.db.write() as conn:
                await reservation.mark_attempted(conn, turn_id, self.recorder.clock.now())
            owner_id = await self.recorder.start_reserved_turn(
                session, turn_id, prompt, reservation.publish
            )
            self._begin_live_turn(live, session, turn_id, owner_id)
            sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._spawn(self._run_turn(session_id, turn_id, prompt, sent))
        try:
            async with asyncio.timeout(RESUME_SEND_SECONDS):
                await asyncio.shield(sent)
        except (AgentFailed, TimeoutError) as exc:
            raise PromptNotSent(str(exc) or "the prompt was not written in time") from exc
        fault_point("after_resume_sent")

    async def cancel_turn(self, session_id: str) -> bool:
        live = self._live.get(session_id)
        if live is None or live.turn_id is None or live.handle is None:
            return False
        await live.handle.cancel()
        return True

    async def fresh_agent_context(self, session_id: str) -> None:
        """Between turns: end the agent process so the next prompt starts a new one with a
        new ACP session (the caller cleared the stored acp_session_id). Takes no lock."""
        live = self._live.get(session_id)
        if live is None or live.handle is None or live.turn_id is not None:
            return
        handle, live.handle = live.handle, None
        await handle.stop()

    # --- ending -------------------------------------------------------------------------

    async def stop_session(self, session_id: str, state: str = CANCELLED) -> None:
        live = self.live(session_id)
        live.stopping = True
        if live.handle is not None:
            await live.handle.stop()
        ended = await self.recorder.end_session(
            session_id, state, revoke=self.agent_tokens.revoke_for_session
        )
        if ended is not None:
            log_event(
                log,
                logging.INFO,
                "session stopped",
                session_id=session_id,
                task_id=ended.task_id,
                state=state,
                turn_id=live.turn_id,
            )
        await self._session_ended(session_id)
        self._live.pop(session_id, None)

    async def _session_ended(self, session_id: str) -> None:
        for ended in self.hooks.session_ended:
            await ended(session_id)

    async def _fail(self, session_id: str, reason: str) -> None:
        live = self.live(session_id)
        live.stopping = True
        if live.handle is not None:
            await live.handle.stop()
        ended = await self.recorder.end_session(
            session_id, FAILED, reason, revoke=self.agent_tokens.revoke_for_session
        )
        if ended is not None:
            log_event(
                log,
                logging.WARNING,
                "session failed",
                session_id=session_id,
                task_id=ended.task_id,
                turn_id=live.turn_id,
                reason=reason.split("; last stderr lines:", 1)[0],
            )
        await self._session_ended(session_id)
        self._live.pop(session_id, None)

    async def shutdown(self) -> None:
        """Server exit: stop every agent process; sessions resume on their next prompt."""
        for live in list(self._live.values()):
            live.stopping = True
        # In parallel: each stop may wait out its agent's grace period.
        handles = [live.handle for live in self._live.values() if live.handle is not None]
        await asyncio.gather(*(handle.stop() for handle in handles), return_exceptions=True)
        pending = list(self._background)
        for task in pending:
            task.cancel()
        if pending:
            # Let cancelled work unwind (roll back, return its connection) before the engine
            # is disposed; bounded, so a stuck task cannot hold the shutdown.
            await asyncio.wait(pending, timeout=SHUTDOWN_GRACE_SECONDS)
        self._live.clear()

    # --- AgentEvents --------------------------------------------------------------------

    async def on_agent_exit(self, session_id: str, reason: str) -> None:
        live = self._live.get(session_id)
        if live is None or live.stopping:
            return
        await self._fail(session_id, reason)

    async def on_agent_update(self, session_id: str, update: AgentUpdate) -> None:
        live = self._live.get(session_id)
        if live is None or live.turn_id is None or live.session is None:
            return  # e.g. history replayed by session/load: already stored
        session = live.session
        message_type = MESSAGE_TYPE_BY_UPDATE[update.kind]
        if update.kind in ("agent_text", "agent_thought"):
            await self._append_text(live, session, message_type, update.content)
            return
        live.text_message = None  # anything else ends the current run of text
        key = update.key or update.kind
        metadata = {**update.metadata, "stream_key": key}
        existing = live.keyed_messages.get(key)
        if existing is None:
            live.keyed_messages[key] = await self.recorder.add_message(
                session,
                live.turn_id,
                type=message_type,
                content=update.content,
                metadata=metadata,
                owner_id=live.owner_id,
            )
        else:
            live.keyed_messages[key] = await self.recorder.update_message(
                existing,
                content=update.content or existing.content,
                metadata={**existing.metadata, **metadata},
                owner_id=live.owner_id,
            )

    async def _append_text(
        self, live: LiveSession, session: Session, message_type: str, chunk: str
    ) -> None:
        current = live.text_message
        if current is not None and current.type == message_type:
            live.text_message = await self.recorder.update_message(
                current,
                content=current.content + chunk,
                metadata=current.metadata,
                owner_id=live.owner_id,
            )
        else:
            assert live.turn_id is not None
            live.text_message = await self.recorder.add_message(
                session,
                live.turn_id,
                type=message_type,
                content=chunk,
                metadata={},
                owner_id=live.owner_id,
            )
