"""The external pending-question list: every active bundle the caller may see, keyset-paged.

Seed spec L1-L16 with D1-D7 and M5/M5a; reference clarification-baseline §5.11. One query
finds the page, one follow-up reads the rows of the bundles on it:

1. `active_bundle` — the pending_ids of the bundles that are ACTIVE (D4), decided on their
   pending-ish rows with the repository's own predicates (the ones the claim uses): pending
   status, on its session's current turn (`sessions.turns.current_turn_id_subquery`), the
   session not terminal, and the bundle well formed (one type, session and turn — what the
   claim requires, so the list never offers a bundle no answer can claim). Those rows come
   from the partial index ix_task_session_messages_pending_clarification (migration 0003),
   not from a scan of all messages.
2. `bundle` — per active bundle, over ALL its rows (index ix_task_session_messages_pending_id):
   created_at = MIN (D1), the message task id, and whether any row lacks a question_id
   (L16) or carries the autopilot `parent_question` marker.
3. the page — the bundle joined to its session and, through M5's rule (message task id, else
   the session's), to its task. The task join is inner, so an unresolvable bundle is omitted
   for everyone (M5a). Visibility (L1c) is a predicate of this query — never a filter after
   LIMIT — so `limit` counts returned bundles (L1a). The workspace filter (L7/L7a), the
   created_since filter (L8) and the cursor (L9) are AND-ed; order (created_at, pending_id)
   (L6), LIMIT limit + 1 to learn whether more exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    bindparam,
    case,
    func,
    or_,
    select,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BindParameter

from kandev.clarification.repository import (
    CONTEXT_KEY,
    PARENT_QUESTION_KEY,
    PENDING,
    PENDING_ID_KEY,
    QUESTION_ID_KEY,
    QUESTION_INDEX_KEY,
    QUESTION_KEY,
    STATUS_KEY,
    TYPE,
    _is_pending,
    _on_current_turn,
    _session_is_live,
    _well_formed,
)
from kandev.clock import isoformat
from kandev.db.json_sql import json_key_text, json_truthy
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_sessions as sessions
from kandev.db.tables import tasks
from kandev.db.visibility import hangs_off_visible_workspace

PENDING_INDEX = "ix_task_session_messages_pending_clarification"
_SECOND = timedelta(seconds=1)


def _inline(clause: ColumnElement[bool]) -> ColumnElement[bool]:
    """The same predicate with its constants sent as SQL literals, not bind parameters.

    A planner can only use a partial index when it can prove the index's WHERE from the
    query's; neither SQLite nor a generic PostgreSQL plan can see through a `?` / `$1`.
    Only for clauses made of constants (never caller input).
    """

    def literal(element: Any) -> Any:
        if isinstance(element, BindParameter):
            return bindparam(
                None,
                element.value,
                type_=element.type,
                expanding=element.expanding,
                literal_execute=True,
            )
        return None

    return visitors.replacement_traverse(clause, {}, literal)


def _flag(condition: ColumnElement[bool]) -> ColumnElement[int]:
    """1 when any row of the group satisfies the condition, else 0."""
    return func.max(case((condition, 1), else_=0))


def active_bundle_ids() -> Select[Any]:
    """pending_ids of the active bundles (D4), read from the pending-ish rows only."""
    row = messages.alias("pending_row")
    pending_id = json_key_text(row.c.metadata, PENDING_ID_KEY)
    return (
        select(pending_id.label("pending_id"))
        .where(
            _inline(row.c.type == TYPE),  # these two terms are the partial index's WHERE
            _inline(_is_pending(row)),
            _on_current_turn(row),
            _session_is_live(row),
            _well_formed(pending_id, row),  # type: ignore[arg-type]  # correlated, per row
        )
        .distinct()
    )


def build_list_query(
    *,
    user_id: str | None,
    workspace_id: str | None,
    created_since: datetime | None,
    after: tuple[datetime, str] | None,
    limit: int,
) -> Select[Any]:
    """The page query: (pending_id, session_id, task_id, created_at) x at most limit + 1."""
    active = active_bundle_ids().cte("active_bundle")
    row = messages.alias("bundle_row")
    pending_id = json_key_text(row.c.metadata, PENDING_ID_KEY)
    bundle = (
        select(
            pending_id.label("pending_id"),
            func.min(row.c.session_id).label("session_id"),  # one session: well formed
            func.min(row.c.created_at).label("created_at"),  # D1
            func.max(func.nullif(row.c.task_id, "")).label("message_task_id"),
            _flag(func.coalesce(json_key_text(row.c.metadata, QUESTION_ID_KEY), "") == "").label(
                "missing_question_id"
            ),
            _flag(json_truthy(row.c.metadata, PARENT_QUESTION_KEY)).label("parent_question"),
        )
        .where(pending_id.in_(select(active.c.pending_id)))
        .group_by(pending_id)
        .cte("bundle")
    )
    session = sessions.alias("bundle_session")
    task = tasks.alias("bundle_task")
    # M5: the message's task id, else the session's; inner joins, so M5a omits the rest.
    resolved_task_id = func.coalesce(bundle.c.message_task_id, session.c.task_id)
    conditions: list[ColumnElement[bool]] = [
        bundle.c.missing_question_id == 0,  # L16
        bundle.c.parent_question == 0,
    ]
    if user_id is not None:
        # L1c: empty workspace, dangling workspace, or a workspace the caller may see. The
        # last two are visibility.py's one rule (no workspace owned by someone else).
        conditions.append(
            or_(
                task.c.workspace_id == "",
                hangs_off_visible_workspace(task.c.workspace_id, user_id),
            )
        )
    if workspace_id:  # L7a: AND-ed, so it only narrows; '' means not supplied
        conditions.append(task.c.workspace_id == workspace_id)
    if created_since is not None:  # L8
        conditions.append(bundle.c.created_at >= created_since)
    if after is not None:  # L9: strictly after the cursor under L6's order
        at, last_id = after
        conditions.append(
            or_(
                bundle.c.created_at > at,
                and_(bundle.c.created_at == at, bundle.c.pending_id > last_id),
            )
        )
    return (
        select(
            bundle.c.pending_id,
            bundle.c.session_id,
            task.c.id.label("task_id"),
            bundle.c.created_at,
        )
        .select_from(
            bundle.join(session, session.c.id == bundle.c.session_id).join(
                task, task.c.id == resolved_task_id
            )
        )
        .where(*conditions)
        .order_by(bundle.c.created_at, bundle.c.pending_id)  # L6
        .limit(limit + 1)
    )


def bundle_rows_query(pending_ids: list[str]) -> Select[Any]:
    """The rows of the given bundles (the follow-up; pending_id index)."""
    pending_id = json_key_text(messages.c.metadata, PENDING_ID_KEY)
    return select(
        pending_id.label("pending_id"),
        messages.c.id,
        messages.c.created_at,
        messages.c.metadata,
    ).where(messages.c.type == TYPE, pending_id.in_(pending_ids))


# --- shaping (L3, L4, L4a, L5, L15, D2, D3, D7) ------------------------------------------------


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _question_index(value: Any) -> int:
    """D2: JSON numbers truncate; missing or non-numeric is 0 (as upstream reads it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)


def _status(metadata: Mapping[str, Any]) -> str:
    """The row's stored status; absent, null or '' is `pending` (what admitted it, L4a)."""
    value = metadata.get(STATUS_KEY)
    if value is None or value == "":
        return PENDING
    return value if isinstance(value, str) else str(value)


def _options(question: Mapping[str, Any]) -> list[dict[str, str]]:
    raw = question.get("options")
    if not isinstance(raw, list):
        return []
    return [
        {
            "option_id": _text(option.get("option_id")),
            "label": _text(option.get("label")),
            "description": _text(option.get("description")),
        }
        for option in raw
        if isinstance(option, dict)
    ]


def _question(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """One question; a row without a parseable `question` keeps only its id (L15)."""
    question = metadata.get(QUESTION_KEY)
    if not isinstance(question, dict):
        question = {}
    return {
        "question_id": _text(metadata.get(QUESTION_ID_KEY)),
        "title": _text(question.get("title")),
        "prompt": _text(question.get("prompt")),
        "status": _status(metadata),
        "options": _options(question),
    }


def _metadata(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def shape_bundle(
    head: Mapping[str, Any], rows: Iterable[Mapping[str, Any]], now: datetime
) -> dict[str, Any]:
    """A bundle as L3/L4 describe it, with no field ever null (L4a)."""
    ordered = sorted(
        rows,
        key=lambda r: (
            _question_index(_metadata(r["metadata"]).get(QUESTION_INDEX_KEY)),
            r["created_at"],
            r["id"],
        ),
    )
    created_at: datetime = head["created_at"]
    age = max(0, (now - created_at) // _SECOND)  # D7
    return {
        "pending_id": head["pending_id"],
        "task_id": _text(head["task_id"]),
        "session_id": _text(head["session_id"]),
        "created_at": isoformat(created_at),
        "age_seconds": int(age),
        "context": _text(_metadata(ordered[0]["metadata"]).get(CONTEXT_KEY)) if ordered else "",
        "questions": [_question(_metadata(r["metadata"])) for r in ordered],
    }


async def list_active_bundles(
    conn: AsyncConnection,
    *,
    user_id: str | None,
    workspace_id: str | None,
    created_since: datetime | None,
    after: tuple[datetime, str] | None,
    limit: int,
    now: datetime,
) -> tuple[list[dict[str, Any]], bool]:
    """(bundles on this page, whether more exist). `limit` is already clamped (L10)."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    query = build_list_query(
        user_id=user_id,
        workspace_id=workspace_id,
        created_since=created_since,
        after=after,
        limit=limit,
    )
    heads = (await conn.execute(query)).mappings().all()
    has_more = len(heads) > limit
    heads = heads[:limit]
    if not heads:
        return [], has_more
    by_bundle: dict[str, list[Mapping[str, Any]]] = {h["pending_id"]: [] for h in heads}
    for row in (await conn.execute(bundle_rows_query(list(by_bundle)))).mappings():
        by_bundle[row["pending_id"]].append(row)
    bundles = [shape_bundle(h, by_bundle[h["pending_id"]], now) for h in heads]
    return bundles, has_more
