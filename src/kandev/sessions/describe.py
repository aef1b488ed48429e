"""What sessions need to describe a session in an event or a response: its JSON with
`pending_action` / `pending_clarification_id`, computed above this package
(kandev.pending) and handed to the recorder and the session service at construction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.board.describe import TaskDescriber
from kandev.sessions.models import Session


class SessionDescriber(TaskDescriber, Protocol):
    async def sessions_json(
        self, conn: AsyncConnection, sessions: Sequence[Session]
    ) -> list[dict[str, Any]]: ...

    async def pending_actions(
        self, conn: AsyncConnection, session_ids: list[str]
    ) -> dict[str, str]: ...
