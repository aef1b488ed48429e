"""The pending-action projection (reference §1.7): one query for any number of sessions."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import exists, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog.messages import (
    ACTION_CLARIFICATION,
    ACTION_PERMISSION,
    CLARIFICATION_TYPE,
    PENDING,
    PERMISSION_TYPE,
    STATUS_KEY,
)
from kandev.catalog.states import INPUT_CAPABLE_STATES, TERMINAL_STATES
from kandev.clarification.predicates import is_pending as _is_pending
from kandev.clarification.predicates import meta as _meta
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_sessions as sessions
from kandev.sessions.turns import current_turn_id_subquery


async def pending_actions_for_sessions(
    conn: AsyncConnection, session_ids: list[str]
) -> dict[str, str]:
    """session id → "clarification" | "permission" for the sessions that owe an answer.

    One query for all sessions. Ended sessions owe nothing. A pending clarification on the
    current turn wins; else the latest current-turn permission request if it is pending.
    """
    if not session_ids:
        return {}
    current = (
        select(
            sessions.c.id.label("session_id"),
            current_turn_id_subquery(sessions.c.id).label("turn_id"),
        )
        .where(
            sessions.c.id.in_(sorted(set(session_ids))),
            sessions.c.state.not_in(TERMINAL_STATES),
        )
        .subquery("current_turns")
    )
    on_turn = (
        messages.c.session_id == current.c.session_id,
        messages.c.turn_id == current.c.turn_id,
    )
    clarification = exists().where(*on_turn, messages.c.type == CLARIFICATION_TYPE, _is_pending())
    permission_status = (
        select(func.coalesce(_meta(STATUS_KEY), ""))
        .where(*on_turn, messages.c.type == PERMISSION_TYPE)
        .order_by(messages.c.created_at.desc(), messages.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    rows = await conn.execute(
        select(
            current.c.session_id,
            clarification.label("clarification"),
            permission_status.label("permission_status"),
        )
    )
    actions: dict[str, str] = {}
    for session_id, has_clarification, permission in rows:
        if has_clarification:
            actions[session_id] = ACTION_CLARIFICATION
        elif permission is not None and permission in ("", PENDING):
            actions[session_id] = ACTION_PERMISSION
    return actions


def task_pending_action(
    sessions_with_states: list[tuple[str, str]], actions: Mapping[str, str]
) -> str | None:
    """A task's pending action over its input-capable sessions: permission anywhere wins."""
    found = {
        actions.get(session_id)
        for session_id, state in sessions_with_states
        if state in INPUT_CAPABLE_STATES
    }
    if ACTION_PERMISSION in found:
        return ACTION_PERMISSION
    if ACTION_CLARIFICATION in found:
        return ACTION_CLARIFICATION
    return None


def session_pending_action(session_id: str | None, actions: Mapping[str, str]) -> str | None:
    return actions.get(session_id) if session_id is not None else None
