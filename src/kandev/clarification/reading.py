"""Reading bundles on behalf of a caller: the one visibility rule for a single bundle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.auth.identity import caller_scope
from kandev.clarification.bundles import find_bundle_authorizable
from kandev.clarification.listing import list_pending_questions
from kandev.clarification.stored_bundle import Bundle
from kandev.clock import Clock
from kandev.db.engine import Database
from kandev.errors import NotFound
from kandev.sessions import session_repository as sessions_repo
from kandev.sessions.access import AccessRules
from kandev.sessions.models import Message

BUNDLE_NOT_FOUND = "clarification request not found"
NO_LONGER_ACTIVE = "clarification request is no longer active"


class BundleReader:
    def __init__(self, db: Database, clock: Clock, access: AccessRules) -> None:
        self.db = db
        self.clock = clock
        self.access = access

    async def authorized_bundle(self, pending_id: str) -> Bundle:
        """The bundle, if it exists and its task is visible; else the same 404 for both."""
        async with self.db.read() as conn:
            rows, task_rows = await find_bundle_authorizable(conn, pending_id)
            return await self.authorize(conn, pending_id, rows, task_rows)

    async def authorize(
        self,
        conn: AsyncConnection,
        pending_id: str,
        rows: list[Message],
        task_rows: Mapping[str, Mapping[Any, Any]],
    ) -> Bundle:
        """`authorized_bundle` for rows already read (`find_bundle_authorizable`, or the
        claim's `lock_and_read_bundle`), with per task the row that authorizes it."""
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
            if task_id in task_rows:  # read along with the bundle's rows
                self.access.authorize_task_row(task_rows[task_id])
            else:
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
