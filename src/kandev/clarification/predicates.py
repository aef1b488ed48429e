"""The SQL predicates of clarification rows, each rule written once.

The claim family (claims.py), the reads (bundles.py), the pending list (list_query.py), the
pending ids (pending_ids.py) and the pending-action projection all decide with these, so a
row is pending, current or well-formed by the same SQL wherever it is asked.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, literal, not_, or_

from kandev.catalog.messages import (
    CLARIFICATION_TYPE,
    DELIVERY_PENDING_KEY,
    PENDING,
    PENDING_ID_KEY,
    STATUS_KEY,
)
from kandev.catalog.states import TERMINAL_STATES
from kandev.db.json_sql import json_key_text, json_truthy
from kandev.db.sql_literals import constant
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_sessions as sessions
from kandev.sessions.turns import current_turn_id_subquery


def meta(key: str, table: Any = messages) -> ColumnElement[str]:
    return json_key_text(table.c.metadata, key)


def of_type(kind: str, table: Any = messages) -> ColumnElement[bool]:
    """The row is a message of this type — the type as a SQL literal (kandev.db.sql_literals:
    a partial index's WHERE is proved from it, and SQLite would re-plan on a bound one)."""
    return table.c.type == constant(kind)


def of_bundle(pending_id: str | ColumnElement[str], table: Any = messages) -> ColumnElement[bool]:
    return and_(of_type(CLARIFICATION_TYPE, table), meta(PENDING_ID_KEY, table) == pending_id)


def is_pending(table: Any = messages) -> ColumnElement[bool]:
    """Absent, '', JSON null and 'pending' count; an unrecognized status does not (§1.3)."""
    return func.coalesce(meta(STATUS_KEY, table), constant("")).in_(
        [constant(""), constant(PENDING)]
    )


def on_current_turn(table: Any = messages, session_id: str | None = None) -> ColumnElement[bool]:
    """The row belongs to its session's current turn (sessions.turns, the one rule).

    With a known session the subquery is uncorrelated (evaluated once), else per row.
    """
    session = table.c.session_id if session_id is None else literal(session_id)
    return table.c.turn_id == current_turn_id_subquery(session)


def session_is_live(table: Any = messages) -> ColumnElement[bool]:
    return exists().where(
        sessions.c.id == table.c.session_id, sessions.c.state.not_in(TERMINAL_STATES)
    )


def well_formed(pending_id: str | ColumnElement[str], table: Any = messages) -> ColumnElement[bool]:
    """No row shares the pending_id while differing in type, session or turn (§1.5)."""
    sibling = messages.alias("bundle_sibling")
    return not_(
        exists().where(
            meta(PENDING_ID_KEY, sibling) == pending_id,
            or_(
                sibling.c.type != constant(CLARIFICATION_TYPE),
                sibling.c.session_id != table.c.session_id,
                sibling.c.turn_id.is_distinct_from(table.c.turn_id),
            ),
        )
    )


def delivery_pending(table: Any = messages) -> ColumnElement[bool]:
    return json_truthy(table.c.metadata, DELIVERY_PENDING_KEY)
