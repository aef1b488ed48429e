"""The external pending-question list: every active bundle the caller may see, keyset-paged.

Seed spec L1-L16 with D1-D7 and M5/M5a; reference clarification-baseline §5.11. One query
finds the page, one follow-up reads the rows of the bundles on it. The page query:

1. `visible_pending` (materialized) - the pending-ish clarification rows, read from the
   partial index ix_task_session_messages_pending_clarification (migration 0003) rather
   than from all messages, joined to their session and, by M5's rule (the message's task
   id, else the session's), to their task. The task join is inner, so an unresolvable row
   drops out for everyone (M5a). Visibility (L1c) and the workspace filter (L7/L7a, AND-ed)
   are predicates here - never a filter after LIMIT - so `limit` counts returned bundles
   (L1a), and everything below only touches what the caller may see.
2. `active_bundle` - D4 with the shared predicates (predicates.py), the ones the claim uses: the
   row is on its session's current turn (`sessions.turns.current_turn_id_subquery`), the
   session is not terminal, and the bundle is well formed (one type, session and turn; the
   claim refuses anything else, so listing it would advertise a bundle no answer can take).
3. `bundle` - per active bundle, over ALL its rows (index ix_task_session_messages_pending_id):
   created_at = MIN (D1); flags for a row without question_id (L16), the autopilot
   `parent_question` marker, and rows that resolve to another task than the bundle.
4. the page - created_since (L8) and the cursor (L9) on the bundle's created_at, ordered by
   (created_at, pending_id) (L6), LIMIT limit + 1 to learn whether more exist.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    case,
    func,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.types import NullType

from kandev.access.sql import hangs_off_visible_workspace
from kandev.catalog.messages import CLARIFICATION_TYPE as TYPE
from kandev.catalog.messages import (
    CONTEXT_KEY,
    PARENT_QUESTION_KEY,
    PENDING,
    PENDING_ID_KEY,
    QUESTION_ID_KEY,
    QUESTION_INDEX_KEY,
    QUESTION_KEY,
    STATUS_KEY,
)
from kandev.clarification.predicates import (
    is_pending,
    of_type,
    on_current_turn,
    session_is_live,
    well_formed,
)
from kandev.clock import isoformat
from kandev.db.direct import DirectStatement
from kandev.db.json_sql import json_key_text, json_truthy
from kandev.db.sql_literals import constant
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_sessions as sessions
from kandev.db.tables import tasks

PENDING_INDEX = "ix_task_session_messages_pending_clarification"
_SECOND = timedelta(seconds=1)


def _flag(condition: ColumnElement[bool]) -> ColumnElement[int]:
    """1 when any row of the group satisfies the condition, else 0."""
    return func.max(case((condition, 1), else_=0))


def _visibility(task: Any, user_id: Any) -> list[ColumnElement[bool]]:
    """L1c over the M5-resolved task: empty workspace, dangling workspace, or a workspace
    the caller may see. The last two are visibility.py's one rule (the workspace is not
    owned by someone else). `user_id` is None (unscoped: no predicate) or a bind."""
    if user_id is None:
        return []
    return [
        or_(
            task.c.workspace_id == "",
            hangs_off_visible_workspace(task.c.workspace_id, user_id),
        )
    ]


def _visible_pending_rows(scoped: bool, by_workspace: bool) -> Select[Any]:
    """Pending-ish clarification rows whose task (M5, per row) the caller may see.

    Read from the partial index (it also carries session_id, turn_id and task_id, so a row
    the caller may not see is dropped without reading it). The task join is inner, so an
    unresolvable row drops out (M5a). The workspace filter is AND-ed with visibility, so it
    can only narrow (L7a).
    """
    row = messages.alias("pending_row")
    session = sessions.alias("pending_session")
    task = tasks.alias("pending_task")
    resolved_task_id = func.coalesce(func.nullif(row.c.task_id, constant("")), session.c.task_id)
    conditions = [
        of_type(TYPE, row),  # these two terms are the partial index's WHERE
        is_pending(row),
        *_visibility(task, bindparam("user_id", type_=Text()) if scoped else None),
    ]
    if by_workspace:
        conditions.append(task.c.workspace_id == bindparam("workspace_id", type_=Text()))
    return (
        select(
            json_key_text(row.c.metadata, PENDING_ID_KEY).label("pending_id"),
            row.c.session_id,
            row.c.turn_id,
            session.c.task_id.label("session_task_id"),
            task.c.id.label("task_id"),
        )
        .select_from(
            row.join(session, session.c.id == row.c.session_id).join(
                task, task.c.id == resolved_task_id
            )
        )
        .where(*conditions)
    )


@functools.cache
def _list_statement(
    scoped: bool, by_workspace: bool, since: bool, after: bool
) -> DirectStatement[Select[Any]]:
    """The statement for one combination of arguments; values are binds (built once).

    Binds: user_id, workspace_id, created_since, after_created_at, after_pending_id,
    page_size (limit + 1). One row per message of each bundle on the page.
    """
    # Materialized: the cheap visibility cut runs first, so the per-bundle work below is
    # proportional to what the caller may see, not to every pending bundle.
    visible = (
        _visible_pending_rows(scoped, by_workspace)
        .cte("visible_pending")
        .prefix_with("MATERIALIZED")
    )
    # D4 with the shared predicates (predicates.py), plus the claim's well-formed guard.
    active = (
        select(
            visible.c.pending_id,
            visible.c.session_id,
            visible.c.session_task_id,
            visible.c.task_id,
        )
        .where(
            visible.c.pending_id != "",
            on_current_turn(visible),
            session_is_live(visible),
            well_formed(visible.c.pending_id, visible),
        )
        .distinct()
        .cte("active_bundle")
    )
    # Over ALL rows of each active bundle (well formed: one session, one turn, one type).
    row = messages.alias("bundle_row")
    meta = row.c.metadata
    row_task_id = func.coalesce(func.nullif(row.c.task_id, constant("")), active.c.session_task_id)
    empty = constant("")
    no_question_id = func.coalesce(json_key_text(meta, QUESTION_ID_KEY), empty) == empty
    bundle = (
        select(
            active.c.pending_id,
            active.c.session_id,
            active.c.task_id,
            func.min(row.c.created_at).label("created_at"),  # D1
            # Rows that resolve to different tasks (only hand-edited data): no one task.
            _flag(row_task_id != active.c.task_id).label("task_mismatch"),
            _flag(no_question_id).label(
                "missing_question_id"  # L16
            ),
            _flag(json_truthy(meta, PARENT_QUESTION_KEY)).label("parent_question"),
        )
        .select_from(active.join(row, json_key_text(meta, PENDING_ID_KEY) == active.c.pending_id))
        .group_by(active.c.pending_id, active.c.session_id, active.c.task_id)
        .cte("bundle")
    )
    conditions: list[ColumnElement[bool]] = [
        bundle.c.task_mismatch == 0,
        bundle.c.missing_question_id == 0,
        bundle.c.parent_question == 0,
    ]
    if since:  # L8
        conditions.append(bundle.c.created_at >= bindparam("created_since"))
    if after:  # L9: strictly after the cursor under L6's order
        at: BindParameter[datetime] = bindparam("after_created_at")
        conditions.append(
            or_(
                bundle.c.created_at > at,
                and_(
                    bundle.c.created_at == at,
                    bundle.c.pending_id > bindparam("after_pending_id", type_=Text()),
                ),
            )
        )
    page = (
        select(bundle.c.pending_id, bundle.c.session_id, bundle.c.task_id, bundle.c.created_at)
        .where(*conditions)
        .order_by(bundle.c.created_at, bundle.c.pending_id)  # L6
        .limit(bindparam("page_size", type_=Integer()))
        .cte("page")
    )
    # The page's rows in the same statement (no second round trip).
    # The timestamps come back as the driver gives them (no per-row type processing): the
    # bundle's is repeated on each of its rows and parsed once (`_utc`); a row's only orders
    # the rows of its bundle, which the driver's value does on both databases (SQLite's
    # fixed-width text sorts as time does).
    page_row = messages.alias("page_row")
    return DirectStatement(
        select(
            page.c.pending_id,
            page.c.session_id,
            page.c.task_id,
            type_coerce(page.c.created_at, NullType()).label("created_at"),
            page_row.c.id.label("row_id"),
            type_coerce(page_row.c.created_at, NullType()).label("row_created_at"),
            page_row.c.metadata,
        )
        .select_from(
            page.join(
                page_row,
                json_key_text(page_row.c.metadata, PENDING_ID_KEY) == page.c.pending_id,
            )
        )
        .order_by(page.c.created_at, page.c.pending_id)
    )


def _arguments(
    *,
    user_id: str | None,
    workspace_id: str | None,
    created_since: datetime | None,
    after: tuple[datetime, str] | None,
    limit: int,
) -> tuple[DirectStatement[Select[Any]], dict[str, Any]]:
    values: dict[str, Any] = {"page_size": limit + 1}
    if user_id is not None:
        values["user_id"] = user_id
    if workspace_id:  # '' means not supplied (L7a)
        values["workspace_id"] = workspace_id
    if created_since is not None:
        values["created_since"] = created_since
    if after is not None:
        values["after_created_at"], values["after_pending_id"] = after
    statement = _list_statement(
        user_id is not None, bool(workspace_id), created_since is not None, after is not None
    )
    return statement, values


def build_list_query(
    *,
    user_id: str | None,
    workspace_id: str | None,
    created_since: datetime | None,
    after: tuple[datetime, str] | None,
    limit: int,
) -> Select[Any]:
    """The list statement with these values bound (for EXPLAIN and the benchmark's floor)."""
    statement, values = _arguments(
        user_id=user_id,
        workspace_id=workspace_id,
        created_since=created_since,
        after=after,
        limit=limit,
    )
    return statement.statement.params(values)


# --- shaping (L3, L4, L4a, L5, L15, D2, D3, D7) ------------------------------------------------


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _utc(value: datetime | str) -> datetime:
    """A timestamp as the driver returned it (SQLite: UTCDateTime's naive UTC text;
    PostgreSQL: an aware datetime), aware UTC."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)


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
    if raw.__class__ is not list:  # JSON gives plain lists, dicts and strs, never subclasses
        return []
    shaped = []
    for option in raw:
        if option.__class__ is dict:
            # (`x if x.__class__ is str else ""` is _text, inline: the list's inner loop)
            option_id = option.get("option_id")
            label = option.get("label")
            description = option.get("description")
            shaped.append(
                {
                    "option_id": option_id if option_id.__class__ is str else "",
                    "label": label if label.__class__ is str else "",
                    "description": description if description.__class__ is str else "",
                }
            )
    return shaped


def _question(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """One question; a row without a parseable `question` keeps only its id (L15)."""
    question = metadata.get(QUESTION_KEY)
    if question.__class__ is not dict:
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


# A bundle's row as shaping reads it: (id, created_at as the driver gave it, metadata).
BundleRow = tuple[str, Any, Mapping[str, Any]]


def _row_order(row: BundleRow) -> tuple[int, Any, str]:
    return (_question_index(row[2].get(QUESTION_INDEX_KEY)), row[1], row[0])


def shape_bundle(head: Mapping[str, Any], rows: list[BundleRow], now: datetime) -> dict[str, Any]:
    """A bundle as L3/L4 describe it, with no field ever null (L4a)."""
    ordered = sorted(rows, key=_row_order) if len(rows) > 1 else rows
    created_at = _utc(head["created_at"])
    age = max(0, (now - created_at) // _SECOND)  # D7
    return {
        "pending_id": head["pending_id"],
        "task_id": _text(head["task_id"]),
        "session_id": _text(head["session_id"]),
        "created_at": isoformat(created_at),
        "age_seconds": int(age),
        "context": _text(ordered[0][2].get(CONTEXT_KEY)) if ordered else "",
        "questions": [_question(metadata) for _, _, metadata in ordered],
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
    statement, values = _arguments(
        user_id=user_id,
        workspace_id=workspace_id,
        created_since=created_since,
        after=after,
        limit=limit,
    )
    heads: dict[str, Mapping[str, Any]] = {}
    rows: dict[str, list[BundleRow]] = {}
    for row in await statement.rows(conn, values):
        pending_id = row["pending_id"]
        of_bundle = rows.get(pending_id)
        if of_bundle is None:
            heads[pending_id] = row
            of_bundle = rows[pending_id] = []
        of_bundle.append((row["row_id"], row["row_created_at"], _metadata(row["metadata"])))
    page = list(heads)[:limit]  # in L6 order: the statement orders by (created_at, pending_id)
    bundles = [shape_bundle(heads[p], rows[p], now) for p in page]
    return bundles, len(heads) > limit
