"""What the turn lifecycle tells clarification: a turn ended, an agent went, a session ended.

Bundles stay answerable when their agent goes (detached); they expire only with their
session. `has_open_question` is the workflow guard's read.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.clarification.bundles import find_active_messages
from kandev.clarification.claims import detach_active, expire_active_bundles
from kandev.clarification.delivery import AgentTurns
from kandev.clarification.store import ClarificationStore
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.events.publisher import PendingEvents
from kandev.sessions.describe import SessionsView
from kandev.sessions.recorder import SessionRecorder

log = logging.getLogger(__name__)


async def has_open_question(db: Database, session_id: str) -> bool:
    """Workflow guard: turn-complete automation waits while a question is active.

    Fails closed: if the question state cannot be read, automation does not run.
    """
    try:
        async with db.read() as conn:
            return bool(await find_active_messages(conn, session_id))
    except Exception:
        log.exception("could not read clarification state of session %s", session_id)
        return True


class SessionLifecycle:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        store: ClarificationStore,
        recorder: SessionRecorder,
        turns: AgentTurns,
    ) -> None:
        self.db = db
        self.clock = clock
        self.store = store
        self.recorder = recorder
        self.turns = turns

    async def pause_for_input(self, session_id: str) -> int:
        """No answer reached the agent in its call: detach, and stop the agent's turn."""
        detached = await self.detach_session(session_id)
        await self.turns.cancel_turn(session_id)
        return detached

    async def detach_session(self, session_id: str) -> int:
        """Turn ended / agent gone: bundles stay answerable, marked agent_disconnected."""
        self.store.cancel_session(session_id)
        now = self.clock.now()
        rows = await self.recorder.write_messages(
            lambda conn: detach_active(conn, self.db, session_id, now)
        )
        return len({m.metadata.get("pending_id") for m in rows or []})

    async def expire_session(self, session_id: str) -> int:
        """The session reached a terminal state: its active bundles expire."""
        self.store.cancel_session(session_id)
        now = self.clock.now()
        rows = await self.recorder.write_messages(
            lambda conn: expire_active_bundles(conn, self.db, session_id, now)
        )
        return len({m.metadata.get("pending_id") for m in rows or []})

    async def turn_ending_in(
        self, conn: AsyncConnection, session_id: str, view: SessionsView, events: PendingEvents
    ) -> bool:
        """The turn is over: open questions stay answerable (detached); True while one is
        open (the session waits for input and turn-complete automation does not run).
        Inside the turn-end transaction: the view already says whether a question is open,
        so a turn without one writes (and reads) nothing here."""
        self.store.cancel_session(session_id)
        if not view.has_open_question(session_id):
            return False
        rows = await detach_active(conn, self.db, session_id, self.clock.now())
        self.recorder.message_events(events, view, rows)
        return True

    def supersede_waiters(self, session_id: str) -> None:
        """A new turn makes older bundles inert: wake any agent still waiting on them."""
        self.store.cancel_session(session_id)
