"""Reservation turns for a detached resume (reference §1.4, §3.11).

A reservation is the successor turn a late answer resumes the agent in; its metadata says
which claim it serves, so startup recovery can keep or undo it. Every function runs inside
the caller's transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, exists, not_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog.messages import (
    DISPATCH_ATTEMPTED_KEY,
    DISPATCH_KEYS,
    DISPATCH_MESSAGE_IDS_KEY,
    DISPATCH_PENDING_ID_KEY,
    DISPATCH_PENDING_KEY,
    DISPATCH_TURN_ID_KEY,
)
from kandev.clarification.claims import check_claimed_ids
from kandev.db.engine import Database
from kandev.db.json_sql import json_remove_keys, json_set_keys, json_truthy
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_session_turns as turns
from kandev.sessions import turn_repository
from kandev.sessions.turns import lock_session_turns


async def reserve_resume_turn(
    conn: AsyncConnection,
    db: Database,
    *,
    turn_id: str,
    session_id: str,
    task_id: str,
    pending_id: str,
    clarification_turn_id: str,
    message_ids: list[str],
    now: datetime,
) -> None:
    """A successor turn that stays non-authoritative while empty and unattempted, carrying
    what startup recovery needs to undo or keep the claim it serves.

    Incomplete identity raises ValueError here rather than leaving a reservation that
    startup recovery would have to refuse.
    """
    if not pending_id or not clarification_turn_id:
        raise ValueError("a resume reservation needs the pending_id and the question's turn")
    check_claimed_ids(message_ids)
    await lock_session_turns(conn, db, [session_id])
    await turn_repository.insert_turn(
        conn,
        id=turn_id,
        session_id=session_id,
        task_id=task_id,
        now=now,
        metadata={
            DISPATCH_PENDING_KEY: True,
            DISPATCH_PENDING_ID_KEY: pending_id,
            DISPATCH_TURN_ID_KEY: clarification_turn_id,
            DISPATCH_MESSAGE_IDS_KEY: list(message_ids),
        },
    )


async def mark_dispatch_attempted(conn: AsyncConnection, turn_id: str, now: datetime) -> bool:
    """The at-most-once boundary: from here on the reservation is the current turn."""
    result = await conn.execute(
        update(turns)
        .where(turns.c.id == turn_id)
        .values(
            metadata=json_set_keys(turns.c.metadata, {DISPATCH_ATTEMPTED_KEY: True}),
            updated_at=now,
        )
    )
    return bool(result.rowcount)


async def publish_reservation(conn: AsyncConnection, turn_id: str, now: datetime) -> bool:
    """The agent accepted the prompt: the reservation becomes an ordinary turn."""
    result = await conn.execute(
        update(turns)
        .where(turns.c.id == turn_id)
        .values(metadata=json_remove_keys(turns.c.metadata, list(DISPATCH_KEYS)), updated_at=now)
    )
    return bool(result.rowcount)


async def delete_reservation(conn: AsyncConnection, turn_id: str) -> bool:
    """Drop a reservation that nothing was sent on: still pending, unattempted, empty."""
    result = await conn.execute(
        delete(turns).where(
            turns.c.id == turn_id,
            json_truthy(turns.c.metadata, DISPATCH_PENDING_KEY),
            not_(json_truthy(turns.c.metadata, DISPATCH_ATTEMPTED_KEY)),
            not_(exists().where(messages.c.turn_id == turns.c.id)),
        )
    )
    return bool(result.rowcount)
