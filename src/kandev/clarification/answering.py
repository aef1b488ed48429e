"""ResolveBundle: the one way REST, MCP and the web page answer a question (seed P1, R1-R12).

Validation before the claim, then the claim (the one claim statement), then delivery; a
loser is told what the winner decided.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth.identity import current_identity
from kandev.catalog import messages as kinds
from kandev.clarification.claims import attempt_claim, lock_and_read_bundle
from kandev.clarification.delivery import AnswerDelivery
from kandev.clarification.outcome import Outcome, validate_outcome
from kandev.clarification.reading import NO_LONGER_ACTIVE, BundleReader
from kandev.clarification.serialization import resolution_body, response_envelope
from kandev.clarification.store import ClarificationResponse
from kandev.clarification.stored_bundle import Bundle, question_order
from kandev.clarification.texts import human_answer_text
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import Conflict
from kandev.events.publisher import PendingEvents
from kandev.faults import fault_point
from kandev.ids import IdFactory
from kandev.keyed_locks import KeyedLocks
from kandev.log_fields import log_event
from kandev.sessions import message_repository as messages_repo
from kandev.sessions.models import Message
from kandev.sessions.recorder import SessionRecorder

log = logging.getLogger(__name__)


class ResolveBundle:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        new_id: IdFactory,
        recorder: SessionRecorder,
        reader: BundleReader,
        delivery: AnswerDelivery,
    ) -> None:
        self.db = db
        self.clock = clock
        self.new_id = new_id
        self.recorder = recorder
        self.reader = reader
        self.delivery = delivery
        self._claims = KeyedLocks()

    async def resolve(
        self,
        pending_id: str,
        answers: list[dict[str, Any]] | None,
        rejected: bool,
        reject_reason: str,
        via: str = "",
    ) -> dict[str, Any]:
        """`via` ("web", "rest", "mcp") names the surface; the winner's answer is recorded in
        the claim's transaction as one user message of the conversation (never for a loser).

        Identity and authorization (M5, A1-A8), validation and normalization (N3a, N6-N8b,
        L16), then the claim — never re-deriving activeness first (P2) — in one write
        transaction, on the bundle as read once its locks are held. The winner delivers
        through the live waiter or a resume turn; a loser is told what the winner decided
        (R2b), or 409 when nobody won (the bundle is simply no longer active).
        """
        events = PendingEvents(self.recorder.bus)
        # Claims of one bundle queue here, not on its session lock inside a transaction
        # that holds a connection slot (see KeyedLocks); the claim still decides (P2). The
        # next claim may begin once ours has run: it then waits on the bundle's database
        # locks for our commit only, so one claim's commit overlaps the next one's BEGIN.
        turn = await self._claims.acquire(pending_id)
        try:
            async with self.db.write() as conn:
                # Read once its locks are ours: a loser replays these rows, no read after.
                held = await lock_and_read_bundle(conn, self.db, pending_id)
                bundle = await self.reader.authorize(conn, pending_id, held.rows, held.task_rows)
                outcome = validate_outcome(bundle.questions, answers, rejected, reject_reason)
                attempt = await attempt_claim(
                    conn,
                    self.db,
                    pending_id,
                    outcome.status,
                    outcome.responses(),
                    self.clock.now(),
                    reject_reason=outcome.reject_reason if outcome.rejected else "",
                    held=held,
                )
                claimed = attempt.claimed
                turn.release()  # the next claim may begin (see above)
                if claimed is not None:
                    answer = await self._insert_answer_message(conn, bundle, claimed, outcome, via)
                    view = await self.recorder.view(conn, bundle.session_id)
                    self.recorder.message_events(events, view, [answer], added=True)
        finally:
            turn.release()  # a failed claim or transaction (release is idempotent)
        if claimed is None:
            assert attempt.seen is not None  # the held rows
            return self._loser(pending_id, attempt.seen)
        log_event(
            log,
            logging.INFO,
            "question answered",
            pending_id=pending_id,
            session_id=bundle.session_id,
            task_id=bundle.task_id,
            status=outcome.status,
            via=via or None,
        )
        events.publish()
        fault_point("after_claim")
        response = ClarificationResponse(
            pending_id=pending_id,
            answers=outcome.answers,
            rejected=outcome.rejected,
            reject_reason=outcome.reject_reason,
            responded_at=claimed[0].updated_at,
        )
        await self.delivery.deliver(bundle, outcome.status, claimed, response)
        envelope = response_envelope(outcome.answers, outcome.rejected, outcome.reject_reason)
        return resolution_body(pending_id, True, outcome.status, envelope)

    async def _insert_answer_message(
        self,
        conn: AsyncConnection,
        bundle: Bundle,
        claimed: list[Message],
        outcome: Outcome,
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

    @staticmethod
    def _loser(pending_id: str, seen: list[Message]) -> dict[str, Any]:
        """R2: one re-read (`seen`, after the failed claim), no retry. A terminal status means a
        winner exists: replay it."""
        rows = sorted(seen, key=question_order)
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
