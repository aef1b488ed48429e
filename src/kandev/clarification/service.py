"""The clarification lifecycle: agents ask, humans answer, exactly one answer wins.

The database decides (claim, finalize, restore, detach, expire in clarification.repository);
the live waiter store only speeds delivery to an agent still blocked in its tool call. The
flow follows reference clarification-baseline §2-§4:

- ask: validate → durable rows (one message per question) → session WAITING_FOR_INPUT, task
  REVIEW → wait on the store, with progress notifications → the agent's result;
- answer: claim (the one claim statement) → the live waiter hands the answer to the agent
  and, once its tool result was sent, writes the delivered mark (finalize); with no waiter
  a resume turn's prompt is written to the agent (answered) or the rejection is just
  recorded, then the mark. `claimed: true` is returned only after the mark committed. A
  delivery known to have failed restores the bundle so it can be retried; a claim whose
  delivery was never confirmed when the server died is delivered after the restart
  (`redeliver_after_restart`, docs/questions.md "Delivery guarantees").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth.identity import caller_scope, current_identity
from kandev.board.scoped import ScopedService
from kandev.catalog import messages as kinds
from kandev.catalog.states import WAITING_FOR_INPUT
from kandev.clarification import repository as repo
from kandev.clarification.outcome import validate_outcome
from kandev.clarification.questions import normalize_questions, questions_equal
from kandev.clarification.results import agent_result
from kandev.clarification.resume import BundleResumeReservation
from kandev.clarification.serialization import resolution_body, response_envelope
from kandev.clarification.store import (
    AlreadyResponded,
    ClarificationResponse,
    ClarificationStore,
    ConfirmationFailed,
    Handoff,
    HandoffNotSent,
    PendingRequest,
    StoreError,
    StoreNotFound,
)
from kandev.clarification.texts import human_answer_text, resume_prompt
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict, KandevError, NotFound, ValidationFailed
from kandev.faults import fault_point
from kandev.ids import IdFactory
from kandev.sessions import message_repository as messages_repo
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions import turn_repository as turns_repo
from kandev.sessions.access import AccessRules
from kandev.sessions.models import Message
from kandev.sessions.recorder import SessionRecorder
from kandev.sessions.turn_hooks import DispatchRejected, PromptNotSent, ResumeReservation
from kandev.sessions.turns import current_turn_id

log = logging.getLogger(__name__)
BUNDLE_NOT_FOUND = "clarification request not found"
NO_LONGER_ACTIVE = "clarification request is no longer active"
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
# Registers (on_sent, on_unsent) to run once the caller's result was (or was not) sent.
AfterSent = Callable[[Callable[[], Awaitable[None]], Callable[[str], None]], None]
REDELIVERY_BUSY_RETRIES = 300  # times REDELIVERY_BUSY_WAIT: how long a redelivery waits
REDELIVERY_BUSY_WAIT = 0.2
SHUTDOWN_ASKS_SECONDS = 1.0  # how long a stop waits for ended ask calls to return
SHUTTING_DOWN = (
    "Kandev server is shutting down; the question stays open and will be answered after restart"
)


class DeliveryFailed(KandevError):
    """The answer was claimed but could not be handed over; the bundle was restored."""

    code = "INTERNAL_ERROR"


class ServerShuttingDown(KandevError):
    """The server is stopping while an agent waits: its call ends, its question stays open."""

    code = "INTERNAL_ERROR"  # the closest tool error code (CONTRACT §5 has no UNAVAILABLE)

    def __init__(self) -> None:
        super().__init__(SHUTTING_DOWN)


class AgentTurns(Protocol):
    """What answering needs of the turn lifecycle (the orchestrator implements it)."""

    async def cancel_turn(self, session_id: str) -> bool: ...

    async def resume_detached(
        self, *, session_id: str, prompt: str, reservation: ResumeReservation
    ) -> None: ...


@dataclass(frozen=True)
class Bundle:
    """A bundle as stored: its rows (question order) and what they share."""

    pending_id: str
    session_id: str
    task_id: str
    turn_id: str | None
    questions: list[dict[str, Any]]
    context: str
    messages: list[Message]

    @classmethod
    def from_messages(cls, pending_id: str, messages: list[Message]) -> Bundle:
        ordered = sorted(messages, key=_question_order)
        first = ordered[0]
        task_id = next((m.task_id for m in ordered if m.task_id), "")
        turn_ids = {m.turn_id for m in ordered if m.turn_id}
        return cls(
            pending_id=pending_id,
            session_id=first.session_id,
            task_id=task_id,
            turn_id=turn_ids.pop() if len(turn_ids) == 1 else None,
            # The flat question_id is what the claim reads; the nested question may be missing.
            questions=[
                {**_as_dict(m.metadata.get("question")), "id": m.metadata.get("question_id") or ""}
                for m in ordered
            ],
            context=first.metadata.get("context", ""),
            messages=ordered,
        )

    def status(self) -> str:
        statuses = {m.metadata.get("status") or kinds.PENDING for m in self.messages}
        if kinds.PENDING in statuses:
            return kinds.PENDING
        return sorted(statuses)[0]


def _abort_orphaned_handoff(waiter: asyncio.Future[Any]) -> None:
    """Done callback of a waiter whose caller left: abort a handoff nobody will use."""
    if waiter.cancelled() or waiter.exception() is not None:
        return
    _, handoff = waiter.result()
    if handoff is not None:
        handoff.abort("the ask call went away")


def _carries_intent(message: Message) -> bool:
    return str(message.metadata.get(kinds.DELIVERY_PENDING_KEY)).lower() in ("true", "1")


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _question_order(message: Message) -> tuple[int, Any, str]:
    """D2: question_index (0 when missing or unparseable), then created_at, then id."""
    index = message.metadata.get("question_index", 0)
    try:
        index = int(index)
    except (TypeError, ValueError):
        index = 0
    return index, message.created_at, message.id


class ClarificationService(ScopedService):
    access: AccessRules  # sessions too, not only the board's rows

    def __init__(
        self,
        db: Database,
        clock: Clock,
        new_id: IdFactory,
        access: AccessRules,
        store: ClarificationStore,
        recorder: SessionRecorder,
        turns: AgentTurns,
        progress_seconds: float = 20.0,
        delivery_wait_seconds: float = 35.0,
    ) -> None:
        super().__init__(db, clock, new_id, access)
        self.store = store
        self.recorder = recorder
        self.progress_seconds = progress_seconds
        self.delivery_wait_seconds = delivery_wait_seconds
        self.turns = turns
        self._background: set[asyncio.Future[Any]] = set()
        self.shutting_down = False
        # One per waiting ask: the future that ends it, and the task it runs in.
        self._shutdown_signals: dict[asyncio.Future[None], asyncio.Task[Any] | None] = {}

    # --- asking -------------------------------------------------------------------------

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
            for existing in self._group(await repo.find_active_messages(conn, session_id)):
                if questions_equal(existing.questions, questions):
                    if live:
                        self._register(existing)
                    return existing.pending_id, existing.questions
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
        if not is_new:
            request = self.store.get_request(pending_id)
            return pending_id, request.questions if request else questions
        try:
            await self._insert_rows(pending_id, session_id, session.task_id, questions, text)
        except BaseException:
            self.store.cancel_request(pending_id)
            raise
        return pending_id, questions

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
        async with self.db.write() as conn:
            turn_id = await current_turn_id(conn, session_id)
            if turn_id is None:  # an agent that asks before any prompt: give it a turn
                turn_id = (
                    await turns_repo.insert_turn(
                        conn, id=self.new_id(), session_id=session_id, task_id=task_id, now=now
                    )
                ).id
            rows = await repo.insert_bundle(
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
        await self.recorder.publish_messages(rows, added=True)

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
        try:
            response, handoff = await self._wait_with_progress(pending_id, progress)
        except ServerShuttingDown:
            # Nothing is written: the question stays open (pending), and the restart settles
            # the session (settle_after_restart) so that an answer resumes the agent.
            raise
        except asyncio.CancelledError:
            # The agent's MCP call went away (client timeout, disconnect): the question stays
            # answerable; a late answer resumes the agent in a new turn.
            self._in_background(self.pause_for_input(session_id))
            raise
        except StoreError as exc:
            await self.pause_for_input(session_id)
            raise DeliveryFailed("Clarification request timed out or was cancelled") from exc
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

    async def _wait_with_progress(
        self, pending_id: str, progress: Progress | None
    ) -> tuple[ClarificationResponse, Handoff | None]:
        if self.shutting_down:
            raise ServerShuttingDown()
        waiter = asyncio.ensure_future(self.store.wait_for_handoff(pending_id))
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._shutdown_signals[stop] = asyncio.current_task()
        tick = 0
        try:
            while True:
                done, _ = await asyncio.wait(
                    {waiter, stop},
                    timeout=self.progress_seconds,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if waiter in done:
                    return waiter.result()
                if stop in done:
                    raise ServerShuttingDown()
                tick += 1
                if progress is not None:
                    # Keeps agent-side MCP clients from timing out an idle call.
                    with contextlib.suppress(Exception):
                        await progress(tick, None, "Waiting for your response in Kandev")
        finally:
            self._shutdown_signals.pop(stop, None)
            stop.cancel()
            if not waiter.done():
                waiter.cancel()
                # Defensive: a handoff taken anyway must not hold the responder up.
                waiter.add_done_callback(_abort_orphaned_handoff)

    # --- lifecycle hooks ----------------------------------------------------------------

    async def begin_shutdown(self, timeout: float = SHUTDOWN_ASKS_SECONDS) -> None:
        """The server is stopping: every waiting ask call ends with ServerShuttingDown (a
        clear tool result), and new ones end at once. The questions stay pending. Returns
        once those calls returned (bounded), so their results go out before the agents stop."""
        self.shutting_down = True
        calls = [task for task in self._shutdown_signals.values() if task is not None]
        for stop in list(self._shutdown_signals):
            if not stop.done():
                stop.set_result(None)
        if calls:
            await asyncio.wait(calls, timeout=timeout)

    async def pause_for_input(self, session_id: str) -> int:
        """No answer reached the agent in its call: detach, and stop the agent's turn."""
        detached = await self.detach_session(session_id)
        await self.turns.cancel_turn(session_id)
        return detached

    async def detach_session(self, session_id: str) -> int:
        """Turn ended / agent gone: bundles stay answerable, marked agent_disconnected."""
        self.store.cancel_session(session_id)
        async with self.db.write() as conn:
            rows = await repo.detach_active(conn, self.db, session_id, self.clock.now())
        await self.recorder.publish_messages(rows)
        return len({m.metadata.get("pending_id") for m in rows})

    async def expire_session(self, session_id: str) -> int:
        """The session reached a terminal state: its active bundles expire."""
        self.store.cancel_session(session_id)
        async with self.db.write() as conn:
            rows = await repo.expire_active_bundles(conn, self.db, session_id, self.clock.now())
        await self.recorder.publish_messages(rows)
        return len({m.metadata.get("pending_id") for m in rows})

    async def settle_after_restart(self, session_id: str) -> None:
        """After a restart the agent is gone: open questions detach, and a session with one
        waits for input (so it is listed and the task shows it) instead of idling."""
        await self.detach_session(session_id)
        async with self.db.read() as conn:
            open_question = bool(await repo.find_active_messages(conn, session_id))
        if open_question:
            await self.recorder.set_state(session_id, WAITING_FOR_INPUT)

    async def turn_ending(self, session_id: str) -> bool:
        """The turn is over: open questions stay answerable (detached); True while one is
        open (the session waits for input and turn-complete automation does not run)."""
        await self.detach_session(session_id)
        return await self.blocks_turn_complete(session_id)

    def supersede_waiters(self, session_id: str) -> None:
        """A new turn makes older bundles inert: wake any agent still waiting on them."""
        self.store.cancel_session(session_id)

    async def blocks_turn_complete(self, session_id: str) -> bool:
        """Workflow guard: turn-complete automation waits while a question is active.

        Fails closed: if the question state cannot be read, automation does not run.
        """
        try:
            async with self.db.read() as conn:
                return bool(await repo.find_active_messages(conn, session_id))
        except Exception:
            log.exception("could not read clarification state of session %s", session_id)
            return True

    # --- reading ------------------------------------------------------------------------

    @staticmethod
    def _group(messages: list[Message]) -> list[Bundle]:
        by_id: dict[str, list[Message]] = {}
        for message in messages:
            by_id.setdefault(message.metadata.get("pending_id", ""), []).append(message)
        return [Bundle.from_messages(pid, rows) for pid, rows in by_id.items() if pid]

    async def authorized_bundle(self, pending_id: str) -> Bundle:
        """The bundle, if it exists and its task is visible; else the same 404 for both."""
        async with self.db.read() as conn:
            rows = await repo.find_bundle_messages(conn, pending_id)
            if not rows:
                raise NotFound(BUNDLE_NOT_FOUND)
            bundle = Bundle.from_messages(pending_id, rows)
            # M5: the rows' task_id, else the session's. M5a: with neither, only an unscoped
            # caller may reach the bundle (a scoped one gets the same 404 as a missing id).
            task_id = bundle.task_id or await sessions_repo.session_task_id(conn, bundle.session_id)
            if not task_id:
                if caller_scope() is not None:
                    raise NotFound(BUNDLE_NOT_FOUND)
                return bundle
            try:
                await self.access.authorize_task(conn, task_id)
            except NotFound:
                raise NotFound(BUNDLE_NOT_FOUND) from None
        return bundle

    async def list_pending(
        self,
        *,
        workspace_id: str | None = None,
        created_since: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Open questions the caller can see, from the durable rows (seed L1-L16)."""
        from kandev.clarification.listing import list_pending_questions

        return await list_pending_questions(
            self.db,
            self.clock,
            workspace_id=workspace_id,
            created_since=created_since,
            cursor=cursor,
            limit=limit,
        )

    async def get_request(self, pending_id: str) -> dict[str, Any]:
        bundle = await self.authorized_bundle(pending_id)
        return {
            "pending_id": bundle.pending_id,
            "session_id": bundle.session_id,
            "task_id": bundle.task_id,
            "questions": bundle.questions,
            "context": bundle.context,
            "status": bundle.status(),
            "created_at": bundle.messages[0].to_json()["created_at"],
        }

    async def wait(self, pending_id: str, timeout: float) -> dict[str, Any] | None:
        """Wait (bounded) for the answer to a request; None on timeout.

        Joins the live entry when there is one; otherwise registers one, but only for a
        bundle that is still active. A wait that times out as the only waiter removes the
        entry again, so a later answer is not held up waiting for a waiter that left.
        """
        bundle = await self.authorized_bundle(pending_id)
        if self.store.get_request(pending_id) is None:
            async with self.db.read() as conn:
                active = {m.id for m in await repo.find_active_messages(conn, bundle.session_id)}
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
        bundle = await self.authorized_bundle(pending_id)
        if self.store.get_request(pending_id) is None:
            raise NotFound(BUNDLE_NOT_FOUND)
        if not self.store.cancel_request(pending_id):
            raise Conflict(NO_LONGER_ACTIVE)
        async with self.db.write() as conn:
            rows = await repo.cancel_bundle(conn, self.db, pending_id, self.clock.now())
        await self.recorder.publish_messages(rows)
        log.info("clarification %s of session %s cancelled", pending_id, bundle.session_id)

    # --- answering ----------------------------------------------------------------------

    async def resolve_bundle(
        self,
        pending_id: str,
        answers: list[dict[str, Any]] | None,
        rejected: bool,
        reject_reason: str,
        via: str = "",
    ) -> dict[str, Any]:
        """ResolveBundle: the one way REST and MCP answer a question (seed P1, R1-R12).

        `via` ("web", "rest", "mcp") names the surface; the winner's answer is recorded in the
        claim's transaction as one user message of the conversation (never for a loser).

        Identity and authorization (M5, A1-A8), validation and normalization (N3a, N6-N8b,
        L16), then the claim — never re-deriving activeness first (P2). The winner delivers
        through the live waiter or a resume turn; a loser is told what the winner decided
        (R2b), or 409 when nobody won (the bundle is simply no longer active).
        """
        bundle = await self.authorized_bundle(pending_id)
        outcome = validate_outcome(bundle.questions, answers, rejected, reject_reason)
        async with self.db.write() as conn:
            claimed = await repo.claim_active_bundle(
                conn,
                self.db,
                pending_id,
                outcome.status,
                outcome.responses(),
                self.clock.now(),
                reject_reason=outcome.reject_reason if outcome.rejected else "",
            )
            answer = None
            if claimed is not None:
                answer = await self._insert_answer_message(conn, bundle, claimed, outcome, via)
        if claimed is None:
            return await self._loser(pending_id)
        if answer is not None:
            await self.recorder.publish_messages([answer], added=True)
        fault_point("after_claim")
        response = ClarificationResponse(
            pending_id=pending_id,
            answers=outcome.answers,
            rejected=outcome.rejected,
            reject_reason=outcome.reject_reason,
            responded_at=claimed[0].updated_at,
        )
        await self._deliver(bundle, outcome.status, claimed, response)
        envelope = response_envelope(outcome.answers, outcome.rejected, outcome.reject_reason)
        return resolution_body(pending_id, True, outcome.status, envelope)

    async def _insert_answer_message(
        self,
        conn: AsyncConnection,
        bundle: Bundle,
        claimed: list[Message],
        outcome: Any,
        via: str,
    ) -> Message:
        """The human's side of the dialogue: one user message saying what was decided."""
        identity = current_identity()
        user_id = identity.user_id if identity is not None else ""
        content = human_answer_text(
            bundle.questions, outcome.answers, outcome.rejected, outcome.reject_reason
        )
        first = claimed[0]
        return await messages_repo.insert_message(
            conn,
            {
                "id": self.new_id(),
                "session_id": first.session_id,
                "task_id": first.task_id,
                "turn_id": bundle.turn_id or first.turn_id,
                "author_type": "user",
                "author_id": user_id,
                "type": "answer",
                "content": content,
                "metadata": {"pending_id": bundle.pending_id, "via": via, "answered_by": user_id},
                "created_at": self.clock.now(),
            },
        )

    async def _loser(self, pending_id: str) -> dict[str, Any]:
        """R2: one re-read, no retry. A terminal status means a winner exists: replay it."""
        async with self.db.read() as conn:
            rows = sorted(await repo.find_bundle_messages(conn, pending_id), key=_question_order)
        decided = [m for m in rows if m.metadata.get("status") in (kinds.ANSWERED, kinds.REJECTED)]
        if not decided:
            raise Conflict(NO_LONGER_ACTIVE)
        status = decided[0].metadata["status"]
        answers = [
            m.metadata["response"] for m in rows if isinstance(m.metadata.get("response"), dict)
        ]
        # R2b: the winner's reason is not stored, so a replay carries "".
        envelope = response_envelope(answers, status == kinds.REJECTED, "")
        return resolution_body(pending_id, False, status, envelope)

    async def _deliver(
        self,
        bundle: Bundle,
        status: str,
        claimed: list[Message],
        response: ClarificationResponse,
    ) -> None:
        claimed_ids = [m.id for m in claimed]

        async def confirm(_: ClarificationResponse) -> None:
            await self._finalize_live(bundle, status, claimed_ids)

        try:
            await self.store.respond_with_delivery_confirmation(
                bundle.pending_id, response, confirm, wait_seconds=self.delivery_wait_seconds
            )
        except (StoreNotFound, HandoffNotSent):
            # No waiter, or the agent's call ended before its result was sent (it never saw
            # the answer): delivered the detached way, like any late answer.
            await self._deliver_detached(bundle, status, claimed_ids, response)
            return
        except AlreadyResponded:
            await self._finalize(bundle.pending_id, status, claimed_ids, kinds.VIA_TOOL_CALL)
            raise DeliveryFailed("response already submitted") from None
        except ConfirmationFailed as exc:
            if exc.delivered:
                # The agent has the answer: never offer it again (no restore).
                raise DeliveryFailed(
                    "clarification response was delivered, but its delivery could not be recorded"
                ) from exc
            await self._restore(bundle.pending_id, status, claimed_ids)
            raise DeliveryFailed(
                "failed to deliver clarification response; response can be retried"
            ) from exc
        except StoreError as exc:
            await self._restore(bundle.pending_id, status, claimed_ids)
            raise DeliveryFailed(
                "failed to deliver clarification response; response can be retried"
            ) from exc

    async def _deliver_detached(
        self,
        bundle: Bundle,
        status: str,
        claimed_ids: list[str],
        response: ClarificationResponse,
    ) -> None:
        async with self.db.read() as conn:
            session = await sessions_repo.get_session(conn, bundle.session_id)
        if status == kinds.REJECTED or (session is not None and session.agent_profile_id is None):
            # Recorded without resuming: a rejection needs no new turn, and an agent Kandev
            # does not run reads the answer from the conversation.
            await self._finalize(bundle.pending_id, status, claimed_ids, kinds.VIA_RECORDED)
            return
        try:
            await self._resume(bundle, claimed_ids, response)
        except DispatchRejected as exc:
            await self._restore(bundle.pending_id, status, claimed_ids)
            raise DeliveryFailed(
                f"failed to resume clarification ({exc}); response can be retried"
            ) from exc
        except PromptNotSent as exc:
            # The turn started but the agent died first: the session failed with it.
            raise DeliveryFailed(
                f"clarification response was accepted, but the agent could not be resumed: {exc}"
            ) from exc
        await self._finalize(bundle.pending_id, status, claimed_ids, kinds.VIA_RESUME_TURN)

    async def _resume(
        self, bundle: Bundle, claimed_ids: list[str], response: ClarificationResponse
    ) -> None:
        """A resume turn whose prompt was written to the agent when this returns."""
        prompt = resume_prompt(
            bundle.questions, response.answers, response.rejected, response.reject_reason
        )
        reservation = BundleResumeReservation(
            self.db, bundle.pending_id, bundle.turn_id or "", claimed_ids
        )
        await self.turns.resume_detached(
            session_id=bundle.session_id, prompt=prompt, reservation=reservation
        )

    async def _finalize_live(self, bundle: Bundle, status: str, claimed_ids: list[str]) -> None:
        """The delivered mark of an answer the waiting agent got, with its session back to
        RUNNING, in one transaction."""

        async def delivered(conn: AsyncConnection) -> list[Message] | None:
            return await repo.finalize_delivery(
                conn, self.db, bundle.pending_id, status, claimed_ids, kinds.VIA_TOOL_CALL
            )

        async def still_waiting(conn: AsyncConnection) -> bool:
            return bool(await repo.find_active_messages(conn, bundle.session_id))

        rows = await self.recorder.mark_answered_live(bundle.session_id, delivered, still_waiting)
        if rows is None:
            raise DeliveryFailed("clarification delivery state could not be finalized")
        await self.recorder.publish_messages(rows)

    async def _finalize(
        self, pending_id: str, status: str, claimed_ids: list[str], via: str
    ) -> None:
        """The delivered mark (or the record of why there is nobody to deliver to)."""
        async with self.db.write() as conn:
            rows = await repo.finalize_delivery(conn, self.db, pending_id, status, claimed_ids, via)
        if rows is None:
            raise DeliveryFailed("clarification delivery state could not be finalized")
        await self.recorder.publish_messages(rows)

    # --- after a restart ----------------------------------------------------------------

    async def redeliver_after_restart(self, pending_ids: list[str]) -> None:
        """Deliver the claims startup recovery found undelivered, each exactly once.

        An answer, or a rejection the agent was waiting for, resumes the agent in a new
        turn (relaunched; session/load when supported); the delivered mark is written once
        the prompt is on the agent's stdin. One that cannot be delivered now keeps its
        intent and is tried again at the next start.
        """
        for pending_id in pending_ids:
            try:
                await self._redeliver(pending_id)
            except Exception:
                log.exception("could not deliver clarification %s after the restart", pending_id)

    async def _redeliver(self, pending_id: str) -> None:
        async with self.db.read() as conn:
            rows = await repo.find_bundle_messages(conn, pending_id)
        carrying = sorted((m for m in rows if _carries_intent(m)), key=_question_order)
        if not carrying or not rows:
            return  # delivered meanwhile
        bundle = Bundle.from_messages(pending_id, rows)
        status = str(carrying[0].metadata.get(kinds.STATUS_KEY))
        claimed_ids = [m.id for m in carrying]
        async with self.db.read() as conn:
            session = await sessions_repo.get_session(conn, bundle.session_id)
        if session is None or session.is_terminal:
            await self._finalize(pending_id, status, claimed_ids, kinds.VIA_RETIRED)
            return
        detached = all(m.metadata.get(kinds.AGENT_DISCONNECTED_KEY) for m in carrying)
        if session.agent_profile_id is None or (status == kinds.REJECTED and detached):
            # As when the server was up: nobody to resume (see _deliver_detached).
            await self._finalize(pending_id, status, claimed_ids, kinds.VIA_RECORDED)
            return
        response = ClarificationResponse(
            pending_id=pending_id,
            answers=[
                m.metadata[kinds.RESPONSE_KEY]
                for m in carrying
                if isinstance(m.metadata.get(kinds.RESPONSE_KEY), dict)
            ],
            rejected=status == kinds.REJECTED,
            reject_reason=str(carrying[0].metadata.get(kinds.REJECT_REASON_KEY) or ""),
        )
        for attempt in range(REDELIVERY_BUSY_RETRIES):
            try:
                await self._resume(bundle, claimed_ids, response)
                break
            except DispatchRejected as exc:
                if "busy" not in str(exc) or attempt == REDELIVERY_BUSY_RETRIES - 1:
                    raise
                await asyncio.sleep(REDELIVERY_BUSY_WAIT)  # another resume of the session runs
        await self._finalize(pending_id, status, claimed_ids, kinds.VIA_RESUME_TURN)

    async def _restore(self, pending_id: str, status: str, claimed_ids: list[str]) -> None:
        async with self.db.write() as conn:
            rows = await repo.restore_active_bundle(
                conn, self.db, pending_id, status, claimed_ids, self.clock.now()
            )
        if rows:
            await self.recorder.publish_messages(rows)

    # --- background ---------------------------------------------------------------------

    def _in_background(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
