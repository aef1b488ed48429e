"""Delivery after a restart: the claims startup recovery found undelivered
(docs/questions.md "Delivery guarantees"). The sessions whose agent the restart took away
are settled before, all at once (kandev.clarification.recovery.settle_sessions_on_startup)."""

from __future__ import annotations

import asyncio
import logging

from kandev.catalog import messages as kinds
from kandev.clarification.bundles import find_bundle_messages
from kandev.clarification.delivery import AnswerDelivery
from kandev.clarification.store import ClarificationResponse
from kandev.clarification.stored_bundle import Bundle, carries_intent, question_order
from kandev.db.engine import Database
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.recorder import SessionRecorder
from kandev.sessions.turn_hooks import DispatchRejected

log = logging.getLogger(__name__)
REDELIVERY_BUSY_RETRIES = 300  # times REDELIVERY_BUSY_WAIT: how long a redelivery waits
REDELIVERY_BUSY_WAIT = 0.2


class RestartDelivery:
    def __init__(
        self,
        db: Database,
        recorder: SessionRecorder,
        delivery: AnswerDelivery,
    ) -> None:
        self.db = db
        self.recorder = recorder
        self.delivery = delivery

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
            rows = await find_bundle_messages(conn, pending_id)
        carrying = sorted((m for m in rows if carries_intent(m)), key=question_order)
        if not carrying or not rows:
            return  # delivered meanwhile
        bundle = Bundle.from_messages(pending_id, rows)
        status = str(carrying[0].metadata.get(kinds.STATUS_KEY))
        claimed_ids = [m.id for m in carrying]
        async with self.db.read() as conn:
            session = await sessions_repo.get_session(conn, bundle.session_id)
        if session is None or session.is_terminal:
            await self.delivery.finalize(pending_id, status, claimed_ids, kinds.VIA_RETIRED)
            return
        detached = all(m.metadata.get(kinds.AGENT_DISCONNECTED_KEY) for m in carrying)
        if session.agent_profile_id is None or (status == kinds.REJECTED and detached):
            # As when the server was up: nobody to resume (see AnswerDelivery's detached way).
            await self.delivery.finalize(pending_id, status, claimed_ids, kinds.VIA_RECORDED)
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
                await self.delivery.resume(bundle, claimed_ids, response)
                break
            except DispatchRejected as exc:
                if "busy" not in str(exc) or attempt == REDELIVERY_BUSY_RETRIES - 1:
                    raise
                await asyncio.sleep(REDELIVERY_BUSY_WAIT)  # another resume of the session runs
        await self.delivery.finalize(pending_id, status, claimed_ids, kinds.VIA_RESUME_TURN)
