"""`pending_clarification_id` of sessions and tasks (CONTRACT §12), in batch.

The pending_id of the active question bundle a session owes an answer to: a pending
clarification row on the current turn of a session that has not ended — the same rule as
`pending_action` (pending.projection.pending_actions_for_sessions) and the same as
`GET /api/v1/clarification` lists. One query for any number of sessions; a task takes its
live sessions' oldest bundle (the oldest blocked agent first, as the list orders them) —
whatever the session's state: a session without a managed agent (BYO, IDLE) asked over REST
or MCP owes that answer too, and the list shows it, so the task must carry its id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog.messages import CLARIFICATION_TYPE as TYPE
from kandev.catalog.messages import PENDING_ID_KEY
from kandev.catalog.states import TERMINAL_STATES
from kandev.clarification.list_query import _inline
from kandev.clarification.predicates import is_pending
from kandev.db.json_sql import json_key_text
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_sessions as sessions
from kandev.sessions.turns import current_turn_id_subquery

# session id → (the bundle's first row's created_at, pending_id)
PendingBundles = Mapping[str, tuple[datetime, str]]


async def pending_bundles_for_sessions(
    conn: AsyncConnection, session_ids: Iterable[str]
) -> dict[str, tuple[datetime, str]]:
    """Per session that owes an answer, its oldest active bundle (ties: lowest pending_id)."""
    ids = sorted(set(session_ids))
    if not ids:
        return {}
    current = (
        select(
            sessions.c.id.label("session_id"),
            current_turn_id_subquery(sessions.c.id).label("turn_id"),
        )
        .where(sessions.c.id.in_(ids), sessions.c.state.not_in(TERMINAL_STATES))
        .subquery("current_turns")
    )
    pending_id = json_key_text(messages.c.metadata, PENDING_ID_KEY)
    rows = await conn.execute(
        select(
            messages.c.session_id,
            pending_id.label("pending_id"),
            func.min(messages.c.created_at).label("created_at"),
        )
        .select_from(
            messages.join(
                current,
                (messages.c.session_id == current.c.session_id)
                & (messages.c.turn_id == current.c.turn_id),
            )
        )
        .where(
            _inline(messages.c.type == TYPE),  # the partial index's WHERE (migration 0003)
            _inline(is_pending()),
            func.coalesce(pending_id, "") != "",
        )
        .group_by(messages.c.session_id, pending_id)
    )
    found: dict[str, tuple[datetime, str]] = {}
    for session_id, bundle_id, created_at in rows:
        candidate = (created_at, bundle_id)
        if session_id not in found or candidate < found[session_id]:
            found[session_id] = candidate
    return found


def session_pending_clarification_id(session_id: str | None, found: PendingBundles) -> str | None:
    bundle = found.get(session_id) if session_id is not None else None
    return bundle[1] if bundle is not None else None


def task_pending_clarification_id(
    sessions_with_states: Iterable[tuple[str, str]], found: PendingBundles
) -> str | None:
    """The oldest active bundle over the task's sessions. `found` holds only bundles the list
    shows (current turn, session not ended), so no state filter here: filtering on
    input-capable states left a BYO session's question (session IDLE) without its id."""
    bundles = [
        found[session_id] for session_id, _state in sessions_with_states if session_id in found
    ]
    return min(bundles)[1] if bundles else None
