"""Asking: an agent's question becomes durable rows, and its call waits for the answer.

validate → durable rows (one message per question) → session WAITING_FOR_INPUT, task
REVIEW → wait on the live waiter store, with progress notifications → the agent's result.
The REST creation path and its bounded wait, and the operator's cancel of a live request,
are here too: they are the same live entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.clarification.bundles import find_active_messages, insert_bundle
from kandev.clarification.claims import cancel_bundle
from kandev.clarification.delivery import DeliveryFailed
from kandev.clarification.lifecycle import SessionLifecycle
from kandev.clarification.questions import normalize_questions, questions_equal
from kandev.clarification.reading import BUNDLE_NOT_FOUND, NO_LONGER_ACTIVE, BundleReader
from kandev.clarification.results import agent_result
from kandev.clarification.shutdown import AskShutdown, ServerShuttingDown
from kandev.clarification.store import (
    ClarificationStore,
    PendingRequest,
    StoreError,
    WaitStopped,
)
from kandev.clarification.stored_bundle import Bundle, group_bundles
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict, NotFound, ValidationFailed
from kandev.ids import IdFactory
from kandev.log_fields import log_event
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.access import AccessRules
from kandev.sessions.models import Message
from kandev.sessions.recorder import SessionRecorder
from kandev.sessions.turns import asking_turn

log = logging.getLogger(__name__)
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
# Registers (on_sent, on_unsent) to run once the caller's result was (or was not) sent.
AfterSent = Callable[[Callable[[], Awaitable[None]], Callable[[str], None]], None]


class _ProgressTicks:
    """What a waiting ask does at every tick: tell the agent it is still waiting (keeps
    agent-side MCP clients from timing out an idle call). A slotted object rather than a
    closure and its cells: one per waiting agent, for as long as it waits."""

    __slots__ = ("progress", "ticks")

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.ticks = 0

    async def __call__(self) -> None:
        self.ticks += 1
        with contextlib.suppress(Exception):
            await self.progress(self.ticks, None, "Waiting for your response in Kandev")


class Asking:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        new_id: IdFactory,
        access: AccessRules,
        store: ClarificationStore,
        recorder: SessionRecorder,
        reader: BundleReader,
        lifecycle: SessionLifecycle,
        shutdown: AskShutdown,
        progress_seconds: float,
    ) -> None:
        self.db = db
        self.clock = clock
        self.new_id = new_id
        self.access = access
        self.store = store
        self.recorder = recorder
        self.reader = reader
        self.lifecycle = lifecycle
        self.shutdown = shutdown
        self.progress_seconds = progress_seconds
        self._background: set[asyncio.Future[Any]] = set()

    async def create_bundle(
        self,
        session_id: str,
        raw_questions: Any,
        context: Any,
        context_paragraphs: Any = None,
        *,
        live: bool = True,
    ) -> tuple[str, list[dict[str, Any]]]:
        """Validate and store a bundle (or find the identical one already asked).

        `live` registers a waiter entry for a caller that will block on the answer.
        """
        questions, text = normalize_questions(raw_questions, context, context_paragraphs)
        async with self.db.read() as conn:
            session = await sessions_repo.get_session(conn, session_id)
            if session is None:
                raise NotFound("session not found")
            if session.is_terminal:
                raise Conflict(f"session is {session.state}")
            # An identical retried ask (same session, same questions) gets the same bundle,
            # also after its waiter went away (a timed-out MCP call, a restart).
            for existing in group_bundles(await find_active_messages(conn, session_id)):
                if questions_equal(existing.questions, questions):
                    if not live:
                        return existing.pending_id, existing.questions
                    self._register(existing)
                    return existing.pending_id, self._held(existing.pending_id, questions)
        if not live:
            pending_id = self.new_id()
            await self._insert_rows(pending_id, session_id, session.task_id, questions, text)
            return pending_id, questions
        pending_id, is_new = self.store.create_request(
            PendingRequest(
                pending_id=self.new_id(),
                session_id=session_id,
                task_id=session.task_id,
                questions=questions,
                context=text,
                created_at=self.clock.now(),
            )
        )
        questions = self._held(pending_id, questions)
        if not is_new:
            return pending_id, questions
        try:
            await self._insert_rows(pending_id, session_id, session.task_id, questions, text)
        except BaseException:
            self.store.cancel_request(pending_id)
            raise
        return pending_id, questions

    def _held(self, pending_id: str, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The store's list of the request's questions (else `questions`): a waiting call
        keeps that one, not a second normalized copy (a waiting agent's memory)."""
        request = self.store.get_request(pending_id)
        return request.questions if request is not None else questions

    def _register(self, bundle: Bundle) -> None:
        """A live waiter entry for an existing bundle (idempotent per pending id)."""
        if self.store.get_request(bundle.pending_id) is None:
            self.store.create_request(
                PendingRequest(
                    pending_id=bundle.pending_id,
                    session_id=bundle.session_id,
                    task_id=bundle.task_id,
                    questions=bundle.questions,
                    context=bundle.context,
                    created_at=bundle.messages[0].created_at,
                )
            )

    async def _insert_rows(
        self,
        pending_id: str,
        session_id: str,
        task_id: str,
        questions: list[dict[str, Any]],
        context: str,
    ) -> None:
        now = self.clock.now()

        async def insert(conn: AsyncConnection) -> list[Message]:
            turn_id = (await asking_turn(conn, session_id, task_id, self.new_id, now)).id
            return await insert_bundle(
                conn,
                pending_id=pending_id,
                session_id=session_id,
                task_id=task_id,
                turn_id=turn_id,
                questions=questions,
                context=context,
                now=now,
                new_id=self.new_id,
            )

        rows = await self.recorder.write_messages(insert, added=True) or []
        log_event(
            log,
            logging.INFO,
            "question asked",
            pending_id=pending_id,
            session_id=session_id,
            task_id=task_id,
            turn_id=rows[0].turn_id if rows else None,
            questions=len(questions),
        )

    async def request(self, body: Any) -> str:
        """REST creation path: authorized, non-blocking, no session/task state change."""
        async with self.db.read() as conn:
            task_id = await self.access.authorize_session(conn, body.session_id)
        if body.task_id is not None and body.task_id != task_id:
            raise ValidationFailed("task_id", "does not match the session's task")
        pending_id, _ = await self.create_bundle(
            body.session_id, body.questions, body.context, body.context_paragraphs, live=False
        )
        return pending_id

    async def ask(
        self,
        session_id: str,
        raw_questions: Any,
        context: Any = None,
        context_paragraphs: Any = None,
        progress: Progress | None = None,
        after_sent: AfterSent | None = None,
    ) -> dict[str, Any]:
        """The agent's blocking ask_user_question_kandev call.

        `after_sent` (the MCP request's receipt) defers the delivered mark until the result
        was actually sent to the agent; without it the answer is marked delivered before
        this returns (in-process callers).
        """
        pending_id, questions = await self.create_bundle(
            session_id, raw_questions, context, context_paragraphs
        )
        await self.recorder.mark_waiting(session_id)
        # The wait parks in this task (no helper task): one future and one timer per agent.
        call = self.shutdown.enter()
        try:
            if self.shutdown.shutting_down:
                raise WaitStopped("the server is stopping", pending_id)
            response, handoff = await self.store.wait_for_handoff(
                pending_id,
                stop=self.shutdown.stopping,
                tick_seconds=self.progress_seconds,
                on_tick=_ProgressTicks(progress) if progress is not None else None,
            )
        except WaitStopped:
            # Nothing is written: the question stays open (pending), and the restart settles
            # the session (settle_sessions_on_startup) so that an answer resumes the agent.
            raise ServerShuttingDown() from None
        except asyncio.CancelledError:
            # The agent's MCP call went away (client timeout, disconnect): the question stays
            # answerable; a late answer resumes the agent in a new turn.
            self._in_background(self.lifecycle.pause_for_input(session_id))
            raise
        except StoreError as exc:
            await self.lifecycle.pause_for_input(session_id)
            raise DeliveryFailed("Clarification request timed out or was cancelled") from exc
        finally:
            self.shutdown.leave(call)
        try:
            result = agent_result(pending_id, questions, response)
            if handoff is None:  # another waiter confirmed it (REST wait): just back to work
                await self.recorder.mark_answered_live(session_id)
            elif after_sent is None:
                await handoff.confirm()
            else:
                # The responder's confirmation (the delivered mark, and the session back to
                # RUNNING in the same transaction) runs once the result was sent.
                after_sent(handoff.confirm, handoff.abort)
        except BaseException:
            if handoff is not None:
                handoff.abort("the ask call failed before returning the answer")
            raise
        return result

    async def wait(self, pending_id: str, timeout: float) -> dict[str, Any] | None:
        """Wait (bounded) for the answer to a request; None on timeout.

        Joins the live entry when there is one; otherwise registers one, but only for a
        bundle that is still active. A wait that times out as the only waiter removes the
        entry again, so a later answer is not held up waiting for a waiter that left.
        """
        bundle = await self.reader.authorized_bundle(pending_id)
        if self.store.get_request(pending_id) is None:
            async with self.db.read() as conn:
                active = {m.id for m in await find_active_messages(conn, bundle.session_id)}
            if not active.intersection(m.id for m in bundle.messages):
                raise Conflict(NO_LONGER_ACTIVE)
            self._register(bundle)
        try:
            response = await asyncio.wait_for(self.store.wait_for_response(pending_id), timeout)
        except TimeoutError:
            if self.store.waiter_count(pending_id) == 0:
                self.store.cancel_request(pending_id)
            return None
        except StoreError:
            raise Conflict(NO_LONGER_ACTIVE) from None
        return agent_result(pending_id, bundle.questions, response)

    async def cancel(self, pending_id: str) -> None:
        """Operator cancel of a live request (not a claim)."""
        bundle = await self.reader.authorized_bundle(pending_id)
        if self.store.get_request(pending_id) is None:
            raise NotFound(BUNDLE_NOT_FOUND)
        if not self.store.cancel_request(pending_id):
            raise Conflict(NO_LONGER_ACTIVE)
        now = self.clock.now()
        await self.recorder.write_messages(
            lambda conn: cancel_bundle(conn, self.db, pending_id, now)
        )
        log.info("clarification %s of session %s cancelled", pending_id, bundle.session_id)

    def _in_background(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
