"""Durable session changes (turns, messages, states, queue) and the events they publish.

Every method is one transaction; events are published after it commits, so an SSE client
never sees a change that could still roll back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board import task_repository
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
from kandev.sessions.describe import SessionDescriber, SessionsView, ViewColumns
from kandev.sessions.models import Message, Session, Turn
from kandev.sessions.turn_hooks import AfterCommit, TurnHooks
from kandev.sessions.turns import lock_session_turns

T = TypeVar("T")


@dataclass(frozen=True)
class TurnEnd:
    waiting: bool  # the session waits for a human (a question is open)
    after: list[AfterCommit]  # what the turn-ended hooks left to do after the commit
    queued: bool  # a prompt was waiting in the session's queue


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
    async def _write(
        self, *, one_statement: bool = False
    ) -> AsyncIterator[tuple[AsyncConnection, PendingEvents]]:
        events = PendingEvents(self.bus)
        async with self.db.write(one_statement=one_statement) as conn:
            yield conn, events
        events.publish()

    # --- sessions -----------------------------------------------------------------------

    async def view(
        self,
        conn: AsyncConnection,
        session_id: str,
        *,
        task_changing_to: str | None = None,
        all_sessions: bool = False,
        columns: tuple[ViewColumns, ...] = (),
    ) -> SessionsView:
        """The session described in one statement, with its task's other sessions when the
        task's JSON may be needed: its state may change to `task_changing_to`, or
        `all_sessions` (see pending.view); `columns` read in the same statement."""
        return await self.describer.view_of_session_task(
            conn,
            session_id,
            task_changing_to=task_changing_to,
            all_sessions=all_sessions,
            columns=columns,
        )

    def _state_event(
        self, events: PendingEvents, view: SessionsView, session: Session, previous: str
    ) -> None:
        """`session` is the row the UPDATE gave back; the view describes it from there."""
        view.replace_session(session)
        events.add(
            SESSION_STATE_CHANGED,
            {
                "session_id": session.id,
                "task_id": session.task_id,
                "state": session.state,
                "previous_state": previous,
                "error_message": session.error_message,
                "session": view.session_json(session.id),
            },
            task_id=session.task_id,
            session_id=session.id,
            owner_id=view.owner_id(session.task_id),
        )

    async def _change_state(
        self,
        conn: AsyncConnection,
        events: PendingEvents,
        view: SessionsView,
        previous: Session,
        state: str,
        **extra: Any,
    ) -> Session | None:
        changed = await sessions_repo.set_state_returning(
            conn, previous.id, state, self.clock.now(), **extra
        )
        if changed is not None:
            self._state_event(events, view, changed, previous.state)
        return changed

    async def set_state(
        self, session_id: str, state: str, *, only_from: tuple[str, ...] | None = None
    ) -> bool:
        """Move a live session to `state` (optionally only from some states)."""
        async with self._write() as (conn, events):
            view = await self.view(conn, session_id)
            session = view.session(session_id)
            if session is None or session.is_terminal or session.state == state:
                return False
            if only_from is not None and session.state not in only_from:
                return False
            return await self._change_state(conn, events, view, session, state) is not None

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
        """Terminal state: open turns completed, open tool calls interrupted, queue cleared,
        agent tokens revoked.

        A FAILED session with a reason also gets it in its conversation: an `error` message
        by the `system` author, in the turn that was open (if any).
        Returns the session, or None when it was already terminal (nothing changed).
        `revoke` is the agent-token revoker (called inside the same transaction).
        """
        assert state in TERMINAL_STATES
        now = self.clock.now()
        async with self._write() as (conn, events):
            await lock_session_turns(conn, self.db, [session_id])
            view = await self.view(conn, session_id, all_sessions=True)
            session = view.session(session_id)
            if session is None or session.is_terminal:
                return None
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
                await self._message_event(
                    conn, events, SESSION_MESSAGE_ADDED, error, view.owner_id(session.task_id)
                )
            await turns_repo.complete_open_turns(conn, session_id, now)
            owner = view.owner_id(session.task_id)
            for message in await messages_repo.interrupt_open_tool_calls(conn, [session_id], now):
                await self._message_event(conn, events, SESSION_MESSAGE_UPDATED, message, owner)
            await messages_repo.clear_queue(conn, session_id)
            if revoke is not None:
                await revoke(conn, session_id)
            ended = await self._change_state(
                conn, events, view, session, state, completed_at=now, error_message=reason
            )
            await self._task_out_of_progress(conn, events, view, session)
            return ended

    async def _task_out_of_progress(
        self, conn: AsyncConnection, events: PendingEvents, view: SessionsView, ended: Session
    ) -> None:
        """A session ended: its task, if IN_PROGRESS and no other session of it is running,
        goes to REVIEW (a person looks at what happened; reference: stop_task_kandev)."""
        for other in view.sessions_of(ended.task_id):
            if other.id != ended.id and other.state in (STARTING, RUNNING):
                return
        await self._set_task_state(
            conn, events, view, ended.task_id, TASK_REVIEW, only_from=TASK_IN_PROGRESS
        )

    # --- turns --------------------------------------------------------------------------

    async def begin_turn(self, session: Session, text: str, author_id: str = "") -> Turn:
        """A new turn with the user's prompt as its first message; session → RUNNING."""
        turn, _ = await self.begin_live_turn(session, text, author_id)
        return turn

    async def begin_live_turn(
        self, session: Session, text: str, author_id: str = ""
    ) -> tuple[Turn, str]:
        """`begin_turn`, also giving the task's owner (the scope of the turn's events)."""
        now = self.clock.now()
        async with self._write() as (conn, events):
            await lock_session_turns(conn, self.db, [session.id])
            turn = await turns_repo.insert_turn(
                conn, id=self.new_id(), session_id=session.id, task_id=session.task_id, now=now
            )
            owner_id = await self._open_turn(conn, events, session, turn.id, text, author_id, {})
        return turn, owner_id

    async def begin_checked_turn(
        self,
        session_id: str,
        text: str,
        author_id: str,
        check: Callable[[AsyncConnection], Awaitable[Session]],
    ) -> tuple[Session, Turn, str]:
        """`begin_live_turn` for a session `check` reads (and authorizes) in the same
        transaction: a prompt is one write transaction from its request on. `check` must
        read the session with its turn lock (`AccessRules.authorized_session(lock_turn=
        True)`: the same statement takes it on PostgreSQL). `check` raising writes nothing.
        Returns (session, turn, the task's owner)."""
        now = self.clock.now()
        async with self._write() as (conn, events):
            session = await check(conn)
            turn = await turns_repo.insert_turn(
                conn, id=self.new_id(), session_id=session.id, task_id=session.task_id, now=now
            )
            owner_id = await self._open_turn(conn, events, session, turn.id, text, author_id, {})
        return session, turn, owner_id

    async def start_reserved_turn(
        self, session: Session, turn_id: str, text: str, publish_reservation: Any
    ) -> str:
        """Open a reserved (resume) turn: its prompt message, RUNNING, reservation cleared.
        Returns the task's owner."""
        async with self._write() as (conn, events):
            await publish_reservation(conn, turn_id, self.clock.now())
            return await self._open_turn(
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
    ) -> str:
        """The prompt message of a turn, its events, session RUNNING and task IN_PROGRESS.
        The turn is already current; returns the task's owner."""
        now = self.clock.now()
        view = await self.view(conn, session.id, task_changing_to=TASK_IN_PROGRESS)
        owner_id = view.owner_id(session.task_id)
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
        current = view.session(session.id)
        if current is not None and current.state != RUNNING and not current.is_terminal:
            await self._change_state(conn, events, view, current, RUNNING)
        await self._set_task_state(conn, events, view, session.task_id, TASK_IN_PROGRESS)
        return owner_id

    async def finish_turn(
        self,
        session_id: str,
        turn_id: str,
        stop_reason: str,
        hooks: TurnHooks | None = None,
    ) -> TurnEnd:
        """End a turn in one transaction: the `turn_ending` hooks (open questions detach,
        permission requests expire), the turn completed, IDLE (task REVIEW) — or
        WAITING_FOR_INPUT while a question is open — then the `turn_ended` hooks (deferred
        moves, turn-complete automation)."""
        now = self.clock.now()
        hooks = hooks or TurnHooks()
        after: list[AfterCommit] = []
        waiting = False
        async with self._write() as (conn, events):
            view = await self.view(
                conn, session_id, task_changing_to=TASK_REVIEW, columns=tuple(hooks.view_columns)
            )
            session = view.session(session_id)
            if session is None:
                return TurnEnd(False, [], False)
            for ending in hooks.turn_ending:
                waiting = await ending(conn, session_id, view, events) or waiting
            owner_id = view.owner_id(session.task_id)
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
            settled = session
            if session.state in (RUNNING, WAITING_FOR_INPUT, STARTING):
                if session.state != next_state:
                    settled = (
                        await self._change_state(conn, events, view, session, next_state) or session
                    )
                await self._set_task_state(conn, events, view, session.task_id, TASK_REVIEW)
            for ended in hooks.turn_ended:
                then = await ended(
                    conn, settled, stop_reason=stop_reason, waiting=waiting, view=view
                )
                if then is not None:
                    after.append(then)
        return TurnEnd(waiting, after, view.has_queued_prompt(session_id))

    async def _set_task_state(
        self,
        conn: AsyncConnection,
        events: PendingEvents,
        view: SessionsView,
        task_id: str,
        state: str,
        *,
        only_from: str | None = None,
    ) -> None:
        updated = await task_repository.change_task_state_returning(
            conn, task_id, state, self.clock.now(), only_from=only_from
        )
        if updated is None:
            return  # already in that state (or gone): nothing to announce
        events.add(
            TASK_UPDATED,
            {"task": view.task_json(updated)},
            task_id=task_id,
            owner_id=view.owner_id(task_id),
        )

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
        # One INSERT (an owner read may follow): its own transaction (db.write_one).
        async with self._write(one_statement=True) as (conn, events):
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
        async with self._write(one_statement=True) as (conn, events):  # as add_message
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

    @staticmethod
    def message_events(
        events: PendingEvents, view: SessionsView, messages: list[Message], *, added: bool = False
    ) -> None:
        """Events for rows changed by a clarification or permission transition, each with
        its session's pending_action as `view` (patched by the writer) says."""
        kind = SESSION_MESSAGE_ADDED if added else SESSION_MESSAGE_UPDATED
        for message in messages:
            events.add(
                kind,
                {
                    "message": message.to_json(),
                    "pending_action": view.pending_action(message.session_id),
                },
                task_id=message.task_id,
                session_id=message.session_id,
                owner_id=view.owner_id(message.task_id),
            )

    async def publish_messages(self, messages: list[Message], *, added: bool = False) -> None:
        """Announce rows changed by a clarification transition, with each session's
        recomputed pending_action so clients converge on it."""
        if not messages:
            return
        events = PendingEvents(self.bus)
        async with self.db.read() as conn:
            await self._gather_message_events(conn, events, messages, added=added)
        events.publish()

    async def write_messages(
        self,
        change: Callable[[AsyncConnection], Awaitable[list[Message] | None]],
        *,
        added: bool = False,
    ) -> list[Message] | None:
        """Run `change` in a write transaction and announce the rows it returns (as
        publish_messages does), their events gathered in that transaction and published
        as soon as it commits: in commit order. Announced from a later read, a row's
        "added" could reach clients after a transition committed behind it (its turn
        ended, it expired), and the later state would be overwritten by the earlier."""
        events = PendingEvents(self.bus)
        async with self.db.write() as conn:
            rows = await change(conn)
            if rows:
                await self._gather_message_events(conn, events, rows, added=added)
        events.publish()
        return rows

    async def _gather_message_events(
        self, conn: AsyncConnection, events: PendingEvents, messages: list[Message], *, added: bool
    ) -> None:
        view = await self.describer.view_of_sessions(conn, sorted({m.session_id for m in messages}))
        self.message_events(events, view, messages, added=added)

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

    async def settle_answered_live(
        self,
        session_id: str,
        delivered: Callable[[AsyncConnection, SessionsView, PendingEvents], Awaitable[T]],
        lock: Callable[[AsyncConnection], Awaitable[None]] | None = None,
    ) -> T:
        """An answer reached its blocked agent: `delivered` writes the delivered mark (and
        its events) and the session goes back to RUNNING (task IN_PROGRESS) — unless a
        question is still open on the turn — all in one transaction, described by one read.
        `lock` (PostgreSQL row locks) runs first; `delivered` raising rolls everything back."""
        async with self._write() as (conn, events):
            if lock is not None:
                await lock(conn)
            view = await self.view(conn, session_id, task_changing_to=TASK_IN_PROGRESS)
            done = await delivered(conn, view, events)
            session = view.session(session_id)
            if (
                session is not None
                and session.state == WAITING_FOR_INPUT
                and not view.has_open_question(session_id)
            ):
                await self._change_state(conn, events, view, session, RUNNING)
                await self._set_task_state(conn, events, view, session.task_id, TASK_IN_PROGRESS)
        return done

    async def _move(
        self,
        session_id: str,
        state: str,
        only_from: tuple[str, ...],
        task_state: str,
        before: Callable[[AsyncConnection], Awaitable[T]] | None = None,
        unless: Callable[[AsyncConnection], Awaitable[bool]] | None = None,
    ) -> T | None:
        done: T | None = None
        async with self._write() as (conn, events):
            if before is not None:
                done = await before(conn)
            view = await self.view(conn, session_id, task_changing_to=task_state)
            session = view.session(session_id)
            if session is None or session.state not in only_from:
                return done
            if unless is not None and await unless(conn):
                return done
            await self._change_state(conn, events, view, session, state)
            await self._set_task_state(conn, events, view, session.task_id, task_state)
        return done

    # --- queue --------------------------------------------------------------------------

    async def enqueue_prompt(self, session: Session, text: str, queued_by: str = "") -> str:
        async def given(_: AsyncConnection) -> Session:
            return session

        return (await self.enqueue_checked(text, queued_by, given))[1]

    async def enqueue_checked(
        self, text: str, queued_by: str, check: Callable[[AsyncConnection], Awaitable[Session]]
    ) -> tuple[Session, str]:
        """Queue a prompt for the session `check` reads (and authorizes) in the same
        transaction; returns (session, queued prompt id)."""
        queued_id = self.new_id()
        async with self._write() as (conn, events):
            session = await check(conn)
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
        return session, queued_id

    async def pop_prompt(self, session_id: str) -> dict[str, Any] | None:
        async with self.db.write() as conn:
            return await messages_repo.pop_next_prompt(conn, session_id)
