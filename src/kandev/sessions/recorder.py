"""Durable session changes (turns, messages, states, queue) and the events they publish.

Every method is one transaction; events are published after it commits, so an SSE client
never sees a change that could still roll back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board import task_repository
from kandev.board.describe import task_json
from kandev.catalog.events import (
    SESSION_MESSAGE_ADDED,
    SESSION_MESSAGE_UPDATED,
    SESSION_PROMPT_QUEUED,
    SESSION_STATE_CHANGED,
    SESSION_TURN_COMPLETED,
    SESSION_TURN_STARTED,
    TASK_UPDATED,
)
from kandev.catalog.states import (
    FAILED,
    IDLE,
    RUNNING,
    STARTING,
    TASK_IN_PROGRESS,
    TASK_REVIEW,
    TERMINAL_STATES,
    WAITING_FOR_INPUT,
)
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.events.bus import EventBus
from kandev.events.publisher import PendingEvents, task_owner_id
from kandev.ids import IdFactory
from kandev.sessions import message_repository as messages_repo
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions import turn_repository as turns_repo
from kandev.sessions.describe import SessionDescriber
from kandev.sessions.models import Message, Session, Turn
from kandev.sessions.turns import lock_session_turns

T = TypeVar("T")


class SessionRecorder:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        new_id: IdFactory,
        bus: EventBus,
        describer: SessionDescriber,
    ) -> None:
        self.db = db
        self.clock = clock
        self.new_id = new_id
        self.bus = bus
        self.describer = describer

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[tuple[AsyncConnection, PendingEvents]]:
        events = PendingEvents(self.bus)
        async with self.db.write() as conn:
            yield conn, events
        events.publish()

    # --- sessions -----------------------------------------------------------------------

    async def session_json(self, conn: AsyncConnection, session: Session) -> dict[str, Any]:
        return (await self.describer.sessions_json(conn, [session]))[0]

    async def _state_event(
        self,
        conn: AsyncConnection,
        events: PendingEvents,
        session_id: str,
        previous: str,
        owner_id: str | None = None,
    ) -> Session:
        session = await sessions_repo.get_session(conn, session_id)
        assert session is not None
        events.add(
            SESSION_STATE_CHANGED,
            {
                "session_id": session.id,
                "task_id": session.task_id,
                "state": session.state,
                "previous_state": previous,
                "error_message": session.error_message,
                "session": await self.session_json(conn, session),
            },
            task_id=session.task_id,
            session_id=session.id,
            owner_id=owner_id
            if owner_id is not None
            else await task_owner_id(conn, session.task_id),
        )
        return session

    async def set_state(
        self, session_id: str, state: str, *, only_from: tuple[str, ...] | None = None
    ) -> bool:
        """Move a live session to `state` (optionally only from some states)."""
        async with self._write() as (conn, events):
            session = await sessions_repo.get_session(conn, session_id)
            if session is None or session.is_terminal or session.state == state:
                return False
            if only_from is not None and session.state not in only_from:
                return False
            await sessions_repo.set_state_unless_terminal(conn, session_id, state, self.clock.now())
            await self._state_event(conn, events, session_id, session.state)
            return True

    async def owner_of(self, task_id: str) -> str:
        async with self.db.read() as conn:
            return await task_owner_id(conn, task_id)

    async def save_acp_session_id(self, session_id: str, acp_session_id: str) -> None:
        async with self.db.write() as conn:
            await sessions_repo.update_session(
                conn,
                session_id,
                {"acp_session_id": acp_session_id, "updated_at": self.clock.now()},
            )

    async def end_session(
        self, session_id: str, state: str, reason: str = "", *, revoke: Any = None
    ) -> Session | None:
        """Terminal state: open turns completed, queue cleared, agent tokens revoked.

        A FAILED session with a reason also gets it in its conversation: an `error` message
        by the `system` author, in the turn that was open (if any).
        Returns the session, or None when it was already terminal (nothing changed).
        `revoke` is the agent-token revoker (called inside the same transaction).
        """
        assert state in TERMINAL_STATES
        now = self.clock.now()
        async with self._write() as (conn, events):
            session = await sessions_repo.get_session(conn, session_id)
            if session is None or session.is_terminal:
                return None
            await lock_session_turns(conn, self.db, [session_id])
            if state == FAILED and reason:
                error = await messages_repo.insert_message(
                    conn,
                    {
                        "id": self.new_id(),
                        "session_id": session_id,
                        "task_id": session.task_id,
                        "turn_id": await turns_repo.open_turn_id(conn, session_id),
                        "author_type": "system",
                        "type": "error",
                        "content": reason,
                        "created_at": now,
                    },
                )
                await self._message_event(conn, events, SESSION_MESSAGE_ADDED, error, None)
            await sessions_repo.set_state_unless_terminal(
                conn, session_id, state, now, completed_at=now, error_message=reason
            )
            await turns_repo.complete_open_turns(conn, session_id, now)
            await messages_repo.clear_queue(conn, session_id)
            if revoke is not None:
                await revoke(conn, session_id)
            ended = await self._state_event(conn, events, session_id, session.state)
            await self._task_out_of_progress(conn, events, session)
            return ended

    async def _task_out_of_progress(
        self, conn: AsyncConnection, events: PendingEvents, ended: Session
    ) -> None:
        """A session ended: its task, if IN_PROGRESS and no other session of it is running,
        goes to REVIEW (a person looks at what happened; reference: stop_task_kandev)."""
        task = await task_repository.get_task(conn, ended.task_id)
        if task is None or task.state != TASK_IN_PROGRESS:
            return
        for other in await sessions_repo.list_task_sessions(conn, ended.task_id):
            if other.id != ended.id and other.state in (STARTING, RUNNING):
                return
        owner_id = await task_owner_id(conn, ended.task_id)
        await self._set_task_state(conn, events, ended.task_id, TASK_REVIEW, owner_id)

    # --- turns --------------------------------------------------------------------------

    async def begin_turn(self, session: Session, text: str, author_id: str = "") -> Turn:
        """A new turn with the user's prompt as its first message; session → RUNNING."""
        now = self.clock.now()
        async with self._write() as (conn, events):
            await lock_session_turns(conn, self.db, [session.id])
            turn = await turns_repo.insert_turn(
                conn, id=self.new_id(), session_id=session.id, task_id=session.task_id, now=now
            )
            await self._open_turn(conn, events, session, turn.id, text, author_id, {})
            return turn

    async def start_reserved_turn(
        self, session: Session, turn_id: str, text: str, publish_reservation: Any
    ) -> None:
        """Open a reserved (resume) turn: its prompt message, RUNNING, reservation cleared."""
        async with self._write() as (conn, events):
            await publish_reservation(conn, turn_id, self.clock.now())
            await self._open_turn(
                conn, events, session, turn_id, text, "", {"clarification_resume": True}
            )

    async def _open_turn(
        self,
        conn: AsyncConnection,
        events: PendingEvents,
        session: Session,
        turn_id: str,
        text: str,
        author_id: str,
        metadata: dict[str, Any],
    ) -> None:
        """The prompt message of a turn, its events, session RUNNING and task IN_PROGRESS."""
        now = self.clock.now()
        owner_id = await task_owner_id(conn, session.task_id)
        message = await messages_repo.insert_message(
            conn,
            {
                "id": self.new_id(),
                "session_id": session.id,
                "task_id": session.task_id,
                "turn_id": turn_id,
                "author_type": "user",
                "author_id": author_id,
                "type": "message",
                "content": text,
                "metadata": metadata,
                "created_at": now,
            },
        )
        scope = {"task_id": session.task_id, "session_id": session.id, "owner_id": owner_id}
        events.add(
            SESSION_TURN_STARTED,
            {"session_id": session.id, "task_id": session.task_id, "turn_id": turn_id},
            **scope,
        )
        events.add(SESSION_MESSAGE_ADDED, {"message": message.to_json()}, **scope)
        current = await sessions_repo.get_session(conn, session.id)
        if current is not None and current.state != RUNNING and not current.is_terminal:
            await sessions_repo.set_state_unless_terminal(conn, session.id, RUNNING, now)
            await self._state_event(conn, events, session.id, current.state, owner_id)
        await self._set_task_state(conn, events, session.task_id, TASK_IN_PROGRESS, owner_id)

    async def finish_turn(
        self, session_id: str, turn_id: str, stop_reason: str, *, waiting: bool = False
    ) -> None:
        """End a turn: IDLE (task REVIEW), or WAITING_FOR_INPUT while a question is open."""
        now = self.clock.now()
        async with self._write() as (conn, events):
            session = await sessions_repo.get_session(conn, session_id)
            if session is None:
                return
            owner_id = await task_owner_id(conn, session.task_id)
            if await turns_repo.complete_turn(conn, turn_id, now):
                events.add(
                    SESSION_TURN_COMPLETED,
                    {
                        "session_id": session_id,
                        "task_id": session.task_id,
                        "turn_id": turn_id,
                        "stop_reason": stop_reason,
                    },
                    task_id=session.task_id,
                    session_id=session_id,
                    owner_id=owner_id,
                )
            next_state = WAITING_FOR_INPUT if waiting else IDLE
            if session.state in (RUNNING, WAITING_FOR_INPUT, STARTING) and (
                session.state != next_state
            ):
                await sessions_repo.set_state_unless_terminal(conn, session_id, next_state, now)
                await self._state_event(conn, events, session_id, session.state, owner_id)
            if session.state in (RUNNING, WAITING_FOR_INPUT, STARTING):
                await self._set_task_state(conn, events, session.task_id, TASK_REVIEW, owner_id)

    async def _set_task_state(
        self, conn: AsyncConnection, events: PendingEvents, task_id: str, state: str, owner_id: str
    ) -> None:
        if not await task_repository.change_task_state(conn, task_id, state, self.clock.now()):
            return  # already in that state (or gone): nothing to announce
        updated = await task_repository.get_task(conn, task_id)
        assert updated is not None
        payload = await task_json(self.describer, conn, updated)
        events.add(TASK_UPDATED, {"task": payload}, task_id=task_id, owner_id=owner_id)

    # --- messages -----------------------------------------------------------------------

    async def add_message(
        self,
        session: Session,
        turn_id: str | None,
        *,
        type: str,
        content: str,
        metadata: dict[str, Any],
        author_type: str = "agent",
        owner_id: str | None = None,
    ) -> Message:
        async with self._write() as (conn, events):
            message = await messages_repo.insert_message(
                conn,
                {
                    "id": self.new_id(),
                    "session_id": session.id,
                    "task_id": session.task_id,
                    "turn_id": turn_id,
                    "author_type": author_type,
                    "type": type,
                    "content": content,
                    "metadata": metadata,
                    "created_at": self.clock.now(),
                },
            )
            await self._message_event(conn, events, SESSION_MESSAGE_ADDED, message, owner_id)
            return message

    async def update_message(
        self,
        message: Message,
        *,
        content: str,
        metadata: dict[str, Any],
        owner_id: str | None = None,
    ) -> Message:
        now = self.clock.now()
        async with self._write() as (conn, events):
            await messages_repo.update_message(
                conn, message.id, content=content, metadata=metadata, now=now
            )
            updated = Message(
                **{**message.__dict__, "content": content, "metadata": metadata, "updated_at": now}
            )
            await self._message_event(conn, events, SESSION_MESSAGE_UPDATED, updated, owner_id)
            return updated

    async def _message_event(
        self,
        conn: AsyncConnection,
        events: PendingEvents,
        kind: str,
        message: Message,
        owner_id: str | None,
    ) -> None:
        if owner_id is None:
            owner_id = await task_owner_id(conn, message.task_id)
        events.add(
            kind,
            {"message": message.to_json()},
            task_id=message.task_id,
            session_id=message.session_id,
            owner_id=owner_id,
        )

    async def publish_messages(self, messages: list[Message], *, added: bool = False) -> None:
        """Announce rows changed by a clarification transition, with each session's
        recomputed pending_action so clients converge on it."""
        if not messages:
            return
        session_ids = sorted({m.session_id for m in messages})
        async with self.db.read() as conn:
            actions = await self.describer.pending_actions(conn, session_ids)
            owners = {
                task_id: await task_owner_id(conn, task_id)
                for task_id in {m.task_id for m in messages}
            }
        kind = SESSION_MESSAGE_ADDED if added else SESSION_MESSAGE_UPDATED
        for message in messages:
            self.bus.publish(
                kind,
                {
                    "message": message.to_json(),
                    "pending_action": actions.get(message.session_id),
                },
                task_id=message.task_id,
                session_id=message.session_id,
                owner_id=owners.get(message.task_id, ""),
            )

    async def mark_waiting(self, session_id: str) -> None:
        """An agent asked a question: session WAITING_FOR_INPUT, task REVIEW."""
        await self._move(session_id, WAITING_FOR_INPUT, (STARTING, RUNNING), TASK_REVIEW)

    async def mark_answered_live(
        self,
        session_id: str,
        delivered: Callable[[AsyncConnection], Awaitable[T]] | None = None,
        still_waiting: Callable[[AsyncConnection], Awaitable[bool]] | None = None,
    ) -> T | None:
        """The blocked agent got its answer in the same turn: back to work.

        `delivered` (the answer's delivered mark) runs first in the same transaction; its
        result is returned. `still_waiting`: the session stays WAITING_FOR_INPUT when it says
        so (the agent already asked its next question).
        """
        return await self._move(
            session_id,
            RUNNING,
            (WAITING_FOR_INPUT,),
            TASK_IN_PROGRESS,
            before=delivered,
            unless=still_waiting,
        )

    async def _move(
        self,
        session_id: str,
        state: str,
        only_from: tuple[str, ...],
        task_state: str,
        before: Callable[[AsyncConnection], Awaitable[T]] | None = None,
        unless: Callable[[AsyncConnection], Awaitable[bool]] | None = None,
    ) -> T | None:
        now = self.clock.now()
        done: T | None = None
        async with self._write() as (conn, events):
            if before is not None:
                done = await before(conn)
            session = await sessions_repo.get_session(conn, session_id)
            if session is None or session.state not in only_from:
                return done
            if unless is not None and await unless(conn):
                return done
            await sessions_repo.set_state_unless_terminal(conn, session_id, state, now)
            owner_id = await task_owner_id(conn, session.task_id)
            await self._state_event(conn, events, session_id, session.state, owner_id)
            await self._set_task_state(conn, events, session.task_id, task_state, owner_id)
        return done

    # --- queue --------------------------------------------------------------------------

    async def enqueue_prompt(self, session: Session, text: str, queued_by: str = "") -> str:
        queued_id = self.new_id()
        async with self._write() as (conn, events):
            await messages_repo.enqueue_prompt(
                conn,
                {
                    "id": queued_id,
                    "session_id": session.id,
                    "task_id": session.task_id,
                    "content": text,
                    "queued_by": queued_by,
                    "queued_at": self.clock.now(),
                },
            )
            events.add(
                SESSION_PROMPT_QUEUED,
                {
                    "session_id": session.id,
                    "task_id": session.task_id,
                    "queued_prompt_id": queued_id,
                    "queued": await messages_repo.count_queued(conn, session.id),
                },
                task_id=session.task_id,
                session_id=session.id,
                owner_id=await task_owner_id(conn, session.task_id),
            )
        return queued_id

    async def pop_prompt(self, session_id: str) -> dict[str, Any] | None:
        async with self.db.write() as conn:
            return await messages_repo.pop_next_prompt(conn, session_id)

    # --- restart ------------------------------------------------------------------------

    async def settle_after_restart(self, now: datetime | None = None) -> list[str]:
        """Sessions whose agent process died with the server: open turns end, state IDLE.

        The agent is relaunched (session/load when supported) on the session's next prompt.
        """
        now = now or self.clock.now()
        settled: list[str] = []
        async with self.db.write() as conn:
            for session in await sessions_repo.list_sessions_in_states(
                conn, (STARTING, RUNNING, WAITING_FOR_INPUT)
            ):
                await turns_repo.complete_open_turns(conn, session.id, now)
                await sessions_repo.set_state_unless_terminal(conn, session.id, IDLE, now)
                settled.append(session.id)
        return settled
