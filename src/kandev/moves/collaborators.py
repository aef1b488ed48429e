"""What the move service needs from the turn lifecycle, as a protocol (the orchestrator
implements it; moves import nothing of it). A move to a task whose agent is mid-turn is
deferred to the turn's end; the turn lock keeps "is a turn running?" and the turn's own end
from racing."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from kandev.sessions.models import Session


class SessionTurns(Protocol):
    def turn_lock(self, session_id: str) -> asyncio.Lock: ...

    def has_live_turn(self, session_id: str) -> bool: ...

    async def fresh_agent_context(self, session_id: str) -> None: ...

    async def dispatch_queued(self, session_id: str) -> None: ...

    async def submit_prompt(self, session: Session, text: str, author_id: str = "") -> Any: ...
