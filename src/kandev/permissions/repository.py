"""SQL of permission requests: one `permission_request` message per request, keyed by
`metadata.pending_id`. Every function runs inside the caller's transaction.

Each state change is one guarded UPDATE whose WHERE carries the whole rule (still pending,
session live, current turn), so exactly one of any number of concurrent callers moves a row:
SQLite serializes writers (BEGIN IMMEDIATE); PostgreSQL re-checks the row's status after the
row lock, so a second UPDATE of the same row matches nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.access.sql import hangs_off_visible_workspace
from kandev.catalog.messages import (
    DECISION_KEY,
    EXPIRED,
    OPTIONS_KEY,
    PENDING,
    PENDING_ID_KEY,
    PERMISSION_TYPE,
    STATUS_KEY,
    TOOL_CALL_KEY,
)
from kandev.clarification.predicates import (
    is_pending,
    meta,
    of_type,
    on_current_turn,
    session_is_live,
)
from kandev.db.json_sql import json_set_keys
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import tasks
from kandev.sessions import message_repository as messages_repo
from kandev.sessions.models import Message

_ORDER = (messages.c.created_at, messages.c.id)


def of_request(pending_id: str) -> ColumnElement[bool]:
    return and_(of_type(PERMISSION_TYPE), meta(PENDING_ID_KEY) == pending_id)


def is_open() -> ColumnElement[bool]:
    """Pending, on its session's current turn, the session not ended."""
    return and_(
        of_type(PERMISSION_TYPE),
        is_pending(),
        session_is_live(),
        on_current_turn(),
    )


def _messages(result: Any) -> list[Message]:
    found = [Message.from_row(row) for row in result.mappings().all()]
    return sorted(found, key=lambda m: (m.created_at, m.id))


async def insert_request(
    conn: AsyncConnection,
    *,
    message_id: str,
    pending_id: str,
    session_id: str,
    task_id: str,
    turn_id: str,
    tool_call: dict[str, Any],
    options: list[dict[str, Any]],
    now: datetime,
    status: str = PENDING,
) -> Message:
    return await messages_repo.insert_message(
        conn,
        {
            "id": message_id,
            "session_id": session_id,
            "task_id": task_id,
            "turn_id": turn_id,
            "author_type": "agent",
            "author_id": "",
            "type": PERMISSION_TYPE,
            "content": tool_call.get("title") or "Permission requested",
            "requests_input": True,
            "metadata": {
                PENDING_ID_KEY: pending_id,
                STATUS_KEY: status,
                TOOL_CALL_KEY: tool_call,
                OPTIONS_KEY: options,
            },
            "created_at": now,
            "updated_at": now,
        },
    )


async def find_request(conn: AsyncConnection, pending_id: str) -> Message | None:
    rows = (
        (await conn.execute(select(messages).where(of_request(pending_id)).order_by(*_ORDER)))
        .mappings()
        .all()
    )
    return Message.from_row(rows[0]) if rows else None


async def has_open_requests(conn: AsyncConnection, session_id: str) -> bool:
    """The session still waits on another permission request (an agent may ask several)."""
    found = await conn.execute(
        select(messages.c.id).where(messages.c.session_id == session_id, is_open()).limit(1)
    )
    return found.first() is not None


async def claim_request(
    conn: AsyncConnection, pending_id: str, status: str, decision: dict[str, Any], now: datetime
) -> Message | None:
    """The one claim statement: the open request becomes `status` with the winner's
    `decision`; None when it was not open (decided, expired, superseded, session ended)."""
    claimed = _messages(
        await conn.execute(
            update(messages)
            .where(of_request(pending_id), is_open())
            .values(
                metadata=json_set_keys(
                    messages.c.metadata, {STATUS_KEY: status, DECISION_KEY: decision}
                ),
                updated_at=now,
            )
            .returning(*messages.c)
        )
    )
    return claimed[0] if claimed else None


async def expire_requests(
    conn: AsyncConnection, now: datetime, *, session_id: str | None = None
) -> list[Message]:
    """Pending requests (of one session, or all: startup) become expired."""
    conditions = [of_type(PERMISSION_TYPE), is_pending()]
    if session_id is not None:
        conditions.append(messages.c.session_id == session_id)
    return _messages(
        await conn.execute(
            update(messages)
            .where(*conditions)
            .values(
                metadata=json_set_keys(messages.c.metadata, {STATUS_KEY: EXPIRED}),
                updated_at=now,
            )
            .returning(*messages.c)
        )
    )


async def expire_request(conn: AsyncConnection, pending_id: str, now: datetime) -> list[Message]:
    return _messages(
        await conn.execute(
            update(messages)
            .where(of_request(pending_id), is_pending())
            .values(
                metadata=json_set_keys(messages.c.metadata, {STATUS_KEY: EXPIRED}),
                updated_at=now,
            )
            .returning(*messages.c)
        )
    )


async def list_open_requests(
    conn: AsyncConnection,
    *,
    user_id: str | None,
    workspace_id: str | None,
    after: tuple[datetime, str] | None,
    limit: int,
) -> list[tuple[Message, str]]:
    """Open requests the caller may see (through their task's workspace), oldest first,
    after the keyset position `after`; at most `limit` (message, workspace_id) pairs."""
    query = (
        select(messages, tasks.c.workspace_id.label("task_workspace_id"))
        .join(tasks, tasks.c.id == messages.c.task_id)
        .where(is_open(), hangs_off_visible_workspace(tasks.c.workspace_id, user_id))
    )
    if workspace_id:
        query = query.where(tasks.c.workspace_id == workspace_id)
    if after is not None:
        created_at, pending_id = after
        query = query.where(
            or_(
                messages.c.created_at > created_at,
                and_(messages.c.created_at == created_at, meta(PENDING_ID_KEY) > pending_id),
            )
        )
    rows = (
        (
            await conn.execute(
                query.order_by(messages.c.created_at, meta(PENDING_ID_KEY)).limit(limit)
            )
        )
        .mappings()
        .all()
    )
    return [(Message.from_row(row), row["task_workspace_id"]) for row in rows]
