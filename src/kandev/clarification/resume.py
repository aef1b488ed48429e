"""The reservation rows of one detached resume (reference §1.4, §3.11), as the
orchestrator's `ResumeReservation`: it runs the turn, these say what the turn serves."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.clarification import reservations
from kandev.db.engine import Database
from kandev.sessions.models import Session


@dataclass(frozen=True)
class BundleResumeReservation:
    db: Database
    pending_id: str
    clarification_turn_id: str
    message_ids: list[str]

    async def reserve(
        self, conn: AsyncConnection, turn_id: str, session: Session, now: datetime
    ) -> None:
        await reservations.reserve_resume_turn(
            conn,
            self.db,
            turn_id=turn_id,
            session_id=session.id,
            task_id=session.task_id,
            pending_id=self.pending_id,
            clarification_turn_id=self.clarification_turn_id,
            message_ids=self.message_ids,
            now=now,
        )

    async def release(self, conn: AsyncConnection, turn_id: str) -> None:
        await reservations.delete_reservation(conn, turn_id)

    async def mark_attempted(self, conn: AsyncConnection, turn_id: str, now: datetime) -> None:
        await reservations.mark_dispatch_attempted(conn, turn_id, now)

    async def publish(self, conn: AsyncConnection, turn_id: str, now: datetime) -> bool:
        return await reservations.publish_reservation(conn, turn_id, now)
