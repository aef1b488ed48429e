"""`pending_clarification_id` of sessions and tasks (CONTRACT §12), in batch.

The pending_id of the active question bundle a session owes an answer to: a pending
clarification row on the current turn of a session that has not ended — the same rule as
`pending_action` (pending.view, pending.projection) and the same as
`GET /api/v1/clarification` lists (read by pending.view's one statement); a task takes its
live sessions' oldest bundle (the oldest blocked agent first, as the list orders them) —
whatever the session's state: a session without a managed agent (BYO, IDLE) asked over REST
or MCP owes that answer too, and the list shows it, so the task must carry its id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

# session id → (the bundle's first row's created_at, pending_id)
PendingBundles = Mapping[str, tuple[datetime, str]]


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
