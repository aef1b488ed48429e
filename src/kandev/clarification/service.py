"""The clarification lifecycle: agents ask, humans answer, exactly one answer wins.

`ClarificationService` is the one façade the surfaces and the orchestrator call; each job
lives in its own module:

- asking.py: validate → durable rows → the agent's call waits for the answer (the live
  waiter store only speeds delivery up); the REST request, its wait, the operator cancel;
- answering.py: ResolveBundle — validation, the claim (the one claim statement, claims.py),
  delivery (delivery.py: the live waiter, else a resume turn; the delivered mark before
  `claimed: true`), the losers' replay;
- redelivery.py: after a restart, claims never confirmed delivered are delivered, and
  sessions whose agent went wait for input (docs/questions.md "Delivery guarantees");
- lifecycle.py: detach, expire and the workflow guard, as the turn lifecycle calls them;
- shutdown.py: a stopping server ends the waiting ask calls, the questions stay open.

The database decides every transition (claims.py); reference clarification-baseline §2-§4.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.scoped import ScopedService
from kandev.clarification.answering import ResolveBundle
from kandev.clarification.asking import AfterSent, Asking, Progress
from kandev.clarification.delivery import AgentTurns, AnswerDelivery
from kandev.clarification.lifecycle import SessionLifecycle, has_open_question
from kandev.clarification.reading import BundleReader
from kandev.clarification.redelivery import RestartDelivery
from kandev.clarification.shutdown import SHUTDOWN_ASKS_SECONDS, AskShutdown
from kandev.clarification.store import ClarificationStore
from kandev.clarification.stored_bundle import Bundle
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.events.publisher import PendingEvents
from kandev.ids import IdFactory
from kandev.sessions.access import AccessRules
from kandev.sessions.describe import SessionsView
from kandev.sessions.recorder import SessionRecorder


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
        self.turns = turns
        self._shutdown = AskShutdown()
        self._reader = BundleReader(db, clock, access)
        self._lifecycle = SessionLifecycle(db, clock, store, recorder, turns)
        self._asking = Asking(
            db,
            clock,
            new_id,
            access,
            store,
            recorder,
            self._reader,
            self._lifecycle,
            self._shutdown,
            progress_seconds,
        )
        delivery = AnswerDelivery(db, clock, store, recorder, turns, delivery_wait_seconds)
        self._resolve = ResolveBundle(db, clock, new_id, recorder, self._reader, delivery)
        self._restart = RestartDelivery(db, recorder, delivery)

    @property
    def shutting_down(self) -> bool:
        return self._shutdown.shutting_down

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
        """Validate and store a bundle (or find the identical one already asked)."""
        return await self._asking.create_bundle(
            session_id, raw_questions, context, context_paragraphs, live=live
        )

    async def request(self, body: Any) -> str:
        """REST creation path: authorized, non-blocking, no session/task state change."""
        return await self._asking.request(body)

    def ask(
        self,
        session_id: str,
        raw_questions: Any,
        context: Any = None,
        context_paragraphs: Any = None,
        progress: Progress | None = None,
        after_sent: AfterSent | None = None,
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """The agent's blocking ask_user_question_kandev call (to await). Asking's own
        coroutine, not one around it: a frame less per waiting agent."""
        return self._asking.ask(
            session_id, raw_questions, context, context_paragraphs, progress, after_sent
        )

    async def wait(self, pending_id: str, timeout: float) -> dict[str, Any] | None:
        """Wait (bounded) for the answer to a request; None on timeout."""
        return await self._asking.wait(pending_id, timeout)

    async def cancel(self, pending_id: str) -> None:
        """Operator cancel of a live request (not a claim)."""
        await self._asking.cancel(pending_id)

    # --- answering ----------------------------------------------------------------------

    async def resolve_bundle(
        self,
        pending_id: str,
        answers: list[dict[str, Any]] | None,
        rejected: bool,
        reject_reason: str,
        via: str = "",
    ) -> dict[str, Any]:
        """ResolveBundle: the one way REST and MCP answer a question (seed P1, R1-R12)."""
        return await self._resolve.resolve(pending_id, answers, rejected, reject_reason, via)

    # --- reading ------------------------------------------------------------------------

    async def authorized_bundle(self, pending_id: str) -> Bundle:
        """The bundle, if it exists and its task is visible; else the same 404 for both."""
        return await self._reader.authorized_bundle(pending_id)

    async def list_pending(
        self,
        *,
        workspace_id: str | None = None,
        created_since: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Open questions the caller can see, from the durable rows (seed L1-L16)."""
        return await self._reader.list_pending(
            workspace_id=workspace_id, created_since=created_since, cursor=cursor, limit=limit
        )

    async def get_request(self, pending_id: str) -> dict[str, Any]:
        return await self._reader.get_request(pending_id)

    # --- lifecycle hooks ----------------------------------------------------------------

    async def pause_for_input(self, session_id: str) -> int:
        """No answer reached the agent in its call: detach, and stop the agent's turn."""
        return await self._lifecycle.pause_for_input(session_id)

    async def detach_session(self, session_id: str) -> int:
        """Turn ended / agent gone: bundles stay answerable, marked agent_disconnected."""
        return await self._lifecycle.detach_session(session_id)

    async def expire_session(self, session_id: str) -> int:
        """The session reached a terminal state: its active bundles expire."""
        return await self._lifecycle.expire_session(session_id)

    async def turn_ending_in(
        self, conn: AsyncConnection, session_id: str, view: SessionsView, events: PendingEvents
    ) -> bool:
        """The turn is over (inside its end's transaction, a `sessions.turn_hooks.TurnEnding`):
        open questions stay answerable (detached); True while one is open."""
        return await self._lifecycle.turn_ending_in(conn, session_id, view, events)

    def supersede_waiters(self, session_id: str) -> None:
        """A new turn makes older bundles inert: wake any agent still waiting on them."""
        self._lifecycle.supersede_waiters(session_id)

    async def blocks_turn_complete(self, session_id: str) -> bool:
        """Workflow guard: turn-complete automation waits while a question is active
        (fails closed)."""
        return await has_open_question(self.db, session_id)

    # --- after a restart ----------------------------------------------------------------

    async def redeliver_after_restart(self, pending_ids: list[str]) -> None:
        """Deliver the claims startup recovery found undelivered, each exactly once."""
        await self._restart.redeliver_after_restart(pending_ids)

    # --- shutdown -----------------------------------------------------------------------

    async def begin_shutdown(self, timeout: float = SHUTDOWN_ASKS_SECONDS) -> None:
        """The server is stopping: every waiting ask call ends with ServerShuttingDown (a
        clear tool result), and new ones end at once. The questions stay pending. Returns
        once those calls returned (bounded), so their results go out before the agents stop."""
        await self._shutdown.begin(timeout)
