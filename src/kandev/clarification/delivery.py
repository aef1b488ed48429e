"""Handing a claimed answer over: to the agent waiting in its call, else in a resume turn.

`claimed: true` is returned only after the delivered mark committed. A delivery known to
have failed restores the bundle so it can be answered again; one that succeeded but could
not be recorded is never offered again.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog import messages as kinds
from kandev.clarification.claims import finalize_delivery, lock_bundle, restore_active_bundle
from kandev.clarification.resume import BundleResumeReservation
from kandev.clarification.store import (
    AlreadyResponded,
    ClarificationResponse,
    ClarificationStore,
    ConfirmationFailed,
    HandoffNotSent,
    StoreError,
    StoreNotFound,
)
from kandev.clarification.stored_bundle import Bundle
from kandev.clarification.texts import resume_prompt
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import KandevError
from kandev.events.publisher import PendingEvents
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.describe import SessionsView
from kandev.sessions.models import Message
from kandev.sessions.recorder import SessionRecorder
from kandev.sessions.turn_hooks import DispatchRejected, PromptNotSent, ResumeReservation


class DeliveryFailed(KandevError):
    """The answer was claimed but could not be handed over; the bundle was restored."""

    code = "INTERNAL_ERROR"


class _NotFinalized(Exception):
    """The delivered mark found the rows changed: roll its transaction back."""


class AgentTurns(Protocol):
    """What answering needs of the turn lifecycle (the orchestrator implements it)."""

    async def cancel_turn(self, session_id: str) -> bool: ...

    async def resume_detached(
        self, *, session_id: str, prompt: str, reservation: ResumeReservation
    ) -> None: ...


class AnswerDelivery:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        store: ClarificationStore,
        recorder: SessionRecorder,
        turns: AgentTurns,
        delivery_wait_seconds: float,
    ) -> None:
        self.db = db
        self.clock = clock
        self.store = store
        self.recorder = recorder
        self.turns = turns
        self.delivery_wait_seconds = delivery_wait_seconds

    async def deliver(
        self,
        bundle: Bundle,
        status: str,
        claimed: list[Message],
        response: ClarificationResponse,
    ) -> None:
        """The winner's answer to the live waiter, else the detached way (resume or record)."""
        claimed_ids = [m.id for m in claimed]

        async def confirm(_: ClarificationResponse) -> None:
            await self.finalize_live(bundle, status, claimed_ids)

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
            await self.finalize(bundle.pending_id, status, claimed_ids, kinds.VIA_TOOL_CALL)
            raise DeliveryFailed("response already submitted") from None
        except ConfirmationFailed as exc:
            if exc.delivered:
                # The agent has the answer: never offer it again (no restore).
                raise DeliveryFailed(
                    "clarification response was delivered, but its delivery could not be recorded"
                ) from exc
            await self.restore(bundle.pending_id, status, claimed_ids)
            raise DeliveryFailed(
                "failed to deliver clarification response; response can be retried"
            ) from exc
        except StoreError as exc:
            await self.restore(bundle.pending_id, status, claimed_ids)
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
            await self.finalize(bundle.pending_id, status, claimed_ids, kinds.VIA_RECORDED)
            return
        try:
            await self.resume(bundle, claimed_ids, response)
        except DispatchRejected as exc:
            await self.restore(bundle.pending_id, status, claimed_ids)
            raise DeliveryFailed(
                f"failed to resume clarification ({exc}); response can be retried"
            ) from exc
        except PromptNotSent as exc:
            # The turn started but the agent died first: the session failed with it.
            raise DeliveryFailed(
                f"clarification response was accepted, but the agent could not be resumed: {exc}"
            ) from exc
        await self.finalize(bundle.pending_id, status, claimed_ids, kinds.VIA_RESUME_TURN)

    async def resume(
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

    async def finalize_live(self, bundle: Bundle, status: str, claimed_ids: list[str]) -> None:
        """The delivered mark of an answer the waiting agent got, with its session back to
        RUNNING, in one transaction."""
        session_ids = sorted({m.session_id for m in bundle.messages})

        async def lock(conn: AsyncConnection) -> None:
            await lock_bundle(conn, self.db, bundle.pending_id, session_ids)

        async def delivered(
            conn: AsyncConnection, view: SessionsView, events: PendingEvents
        ) -> list[Message]:
            rows = await finalize_delivery(
                conn,
                self.db,
                bundle.pending_id,
                status,
                claimed_ids,
                kinds.VIA_TOOL_CALL,
                locked=True,
            )
            if rows is None:
                raise _NotFinalized()
            self.recorder.message_events(events, view, rows)
            return rows

        try:
            await self.recorder.settle_answered_live(bundle.session_id, delivered, lock)
        except _NotFinalized:
            raise DeliveryFailed("clarification delivery state could not be finalized") from None

    async def finalize(
        self, pending_id: str, status: str, claimed_ids: list[str], via: str
    ) -> None:
        """The delivered mark (or the record of why there is nobody to deliver to)."""
        rows = await self.recorder.write_messages(
            lambda conn: finalize_delivery(conn, self.db, pending_id, status, claimed_ids, via)
        )
        if rows is None:
            raise DeliveryFailed("clarification delivery state could not be finalized")

    async def restore(self, pending_id: str, status: str, claimed_ids: list[str]) -> None:
        """Undo the claim of a delivery known to have failed (so it can be answered again)."""
        now = self.clock.now()
        await self.recorder.write_messages(
            lambda conn: restore_active_bundle(conn, self.db, pending_id, status, claimed_ids, now)
        )
