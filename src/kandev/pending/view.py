"""One statement that describes a task's sessions: everything events and responses need.

For every session of the task(s) asked about: the session row, its current turn, whether a
question is pending on that turn, the latest permission request's status on it, whether any
permission request of the session is pending, its oldest active bundle, and the task's
owner. Task JSON, session JSON, the turn-end guards ("is a question open?", "is a permission
pending?") and event scoping all come from this one read, so a write path describes what it
changed without re-reading rows (reference §1.7, §2.5; the rules are the same SQL as
pending.projection and clarification.pending_ids). When the task's state changes, the other
sessions' aggregate (OtherSessions) is a second statement, read only when the first found a
pending row of such a session.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, exists, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import BindParameter

from kandev.board.models import Task
from kandev.catalog.messages import (
    ACTION_CLARIFICATION,
    ACTION_PERMISSION,
    CLARIFICATION_TYPE,
    PENDING,
    PENDING_ID_KEY,
    PERMISSION_TYPE,
    STATUS_KEY,
)
from kandev.catalog.states import INPUT_CAPABLE_STATES, TERMINAL_STATES
from kandev.clarification.pending_ids import task_pending_clarification_id
from kandev.clarification.predicates import is_pending, meta, of_type
from kandev.db.direct import DirectStatement
from kandev.db.json_sql import json_key_text
from kandev.db.sql_literals import constant
from kandev.db.tables import queued_prompts, task_sessions, tasks, workspaces
from kandev.db.tables import task_session_messages as messages
from kandev.pending.projection import strongest_action, task_pending_action
from kandev.sessions.describe import ViewColumns
from kandev.sessions.models import Session
from kandev.sessions.turns import current_turn_id_subquery


@dataclass(frozen=True)
class SessionFacts:
    session: Session
    current_turn_id: str | None
    clarification_pending: bool  # a pending question on the current turn
    permission_status: str | None  # the current turn's latest permission request, if any
    permission_pending: bool  # any pending permission request of the session
    bundle: tuple[datetime, str] | None  # the oldest active bundle: (created_at, pending_id)
    queued_prompt: bool = False  # a prompt waits in the session's queue

    @property
    def pending_action(self) -> str | None:
        if self.session.is_terminal:
            return None  # ended sessions owe nothing
        if self.clarification_pending:
            return ACTION_CLARIFICATION
        if self.permission_status is not None and self.permission_status in ("", PENDING):
            return ACTION_PERMISSION
        return None

    @property
    def pending_clarification_id(self) -> str | None:
        return None if self.session.is_terminal or self.bundle is None else self.bundle[1]

    def to_json(self) -> dict[str, Any]:
        return self.session.to_json(
            current_turn_id=self.current_turn_id,
            pending_action=self.pending_action,
            pending_clarification_id=self.pending_clarification_id,
        )


@dataclass(frozen=True)
class OtherSessions:
    """What a task's sessions that were not read as rows add to its JSON: one aggregate over
    them (the session being written and the task's primary one are rows, so writers can
    patch them), answered from indexes on the pending rows instead of describing every
    session. Read by a statement of its own (`_read_others`), and only when the view's
    statement found a pending row of such a session: otherwise it owes nothing."""

    action: str | None  # the strongest action an input-capable one owes
    bundle: tuple[datetime, str] | None  # the oldest active bundle among the live ones


class TaskView:
    """The described sessions of one or more tasks; writers patch it with what they changed
    (the rows their UPDATE … RETURNING gave back) and describe from it."""

    def __init__(
        self,
        facts: Iterable[SessionFacts],
        owners: dict[str, str],
        others: dict[str, OtherSessions] | None = None,
        extras: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self._facts: dict[str, SessionFacts] = {f.session.id: f for f in facts}
        self._owners = owners
        self._others = others or {}
        self._extras = extras or {}

    # --- reading --------------------------------------------------------------------------

    def session(self, session_id: str) -> Session | None:
        found = self._facts.get(session_id)
        return found.session if found is not None else None

    def sessions_of(self, task_id: str) -> list[Session]:
        return [f.session for f in self._facts.values() if f.session.task_id == task_id]

    def owner_id(self, task_id: str) -> str:
        return self._owners.get(task_id, "")

    def session_json(self, session_id: str) -> dict[str, Any]:
        return self._facts[session_id].to_json()

    def has_open_question(self, session_id: str) -> bool:
        found = self._facts.get(session_id)
        return found is not None and found.clarification_pending

    def has_pending_permission(self, session_id: str) -> bool:
        found = self._facts.get(session_id)
        return found is not None and found.permission_pending

    def pending_action(self, session_id: str) -> str | None:
        found = self._facts.get(session_id)
        return found.pending_action if found is not None else None

    def has_queued_prompt(self, session_id: str) -> bool:
        found = self._facts.get(session_id)
        return found is not None and found.queued_prompt

    def extra(self, session_id: str) -> dict[str, Any] | None:
        """The session's values of the ViewColumns the view was read with."""
        return self._extras.get(session_id) if session_id in self._facts else None

    def task_json(self, task: Task) -> dict[str, Any]:
        of_task = [f for f in self._facts.values() if f.session.task_id == task.id]
        states = [(f.session.id, f.session.state) for f in of_task]
        actions = {f.session.id: a for f in of_task if (a := f.pending_action) is not None}
        bundles = {
            f.session.id: f.bundle
            for f in of_task
            if f.bundle is not None and not f.session.is_terminal
        }
        primary = next((f for f in of_task if f.session.is_primary), None)
        action = task_pending_action(states, actions)
        others = self._others.get(task.id)
        if others is None:
            bundle_id = task_pending_clarification_id(states, bundles)
        else:  # the rows read, then what the other sessions owe (the same rules)
            action = strongest_action((action, others.action))
            oldest = [b for b in (*bundles.values(), others.bundle) if b is not None]
            bundle_id = min(oldest)[1] if oldest else None
        return task.to_json(
            task_pending_action=action,
            primary_session_pending_action=primary.pending_action if primary else None,
            pending_clarification_id=bundle_id,
        )

    # --- patching -------------------------------------------------------------------------

    def replace_session(self, session: Session) -> None:
        """The session row as an UPDATE … RETURNING gave it back."""
        found = self._facts.get(session.id)
        if found is not None:
            self._facts[session.id] = replace(found, session=session)

    def clarifications_settled(self, session_id: str) -> None:
        """No question of the session is pending any more (claimed, expired)."""
        found = self._facts.get(session_id)
        if found is not None:
            self._facts[session_id] = replace(found, clarification_pending=False, bundle=None)

    def permissions_settled(self, session_id: str) -> None:
        """The session's pending permission requests were decided or expired."""
        found = self._facts.get(session_id)
        if found is not None and found.permission_pending:
            status = "expired" if found.permission_status in ("", PENDING) else None
            self._facts[session_id] = replace(
                found,
                permission_pending=False,
                permission_status=status or found.permission_status,
            )


def _facts_query(
    where: ColumnElement[bool], extra: Sequence[Any] = (), columns: Sequence[ViewColumns] = ()
) -> Any:
    described = select(
        task_sessions, current_turn_id_subquery(task_sessions.c.id).label("current_turn_id")
    ).where(where)
    # Materialized: the current turn is found once per session, not once per column below
    # (SQLite's planner otherwise inlined the subquery and re-ran it in every EXISTS).
    current = described.cte("described").prefix_with("MATERIALIZED")
    on_turn = (
        messages.c.session_id == current.c.id,
        messages.c.turn_id == current.c.current_turn_id,
    )
    # Literal constants (kandev.db.sql_literals): the partial indexes' WHERE terms.
    pending_question = (of_type(CLARIFICATION_TYPE), is_pending())
    clarification = exists().where(*on_turn, *pending_question)
    # By turn alone (a turn id names its session): the partial (turn_id, created_at, id) index
    # answers it without walking the session's history.
    permission_status = (
        select(func.coalesce(meta(STATUS_KEY), constant("")))
        .where(
            messages.c.turn_id == current.c.current_turn_id,
            of_type(PERMISSION_TYPE),
        )
        .order_by(messages.c.created_at.desc(), messages.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    permission_pending = exists().where(  # the partial pending-permission index's WHERE
        messages.c.session_id == current.c.id,
        of_type(PERMISSION_TYPE),
        is_pending(),
    )
    pending_id = json_key_text(messages.c.metadata, PENDING_ID_KEY)
    bundles = (
        select(pending_id.label("pending_id"), func.min(messages.c.created_at).label("created"))
        .where(
            *on_turn,
            *pending_question,
            func.coalesce(pending_id, constant("")) != constant(""),
        )
        .group_by(pending_id)
        .order_by(func.min(messages.c.created_at), pending_id)
        .limit(1)
    )
    queued = exists().where(queued_prompts.c.session_id == current.c.id)
    owner = (
        select(workspaces.c.owner_id)
        .select_from(tasks.join(workspaces, workspaces.c.id == tasks.c.workspace_id))
        .where(tasks.c.id == current.c.task_id)
        .scalar_subquery()
    )
    return select(
        current,
        clarification.label("clarification_pending"),
        permission_status.label("permission_status"),
        permission_pending.label("permission_pending"),
        bundles.with_only_columns(bundles.selected_columns.pending_id)
        .scalar_subquery()
        .label("bundle_id"),
        bundles.with_only_columns(bundles.selected_columns.created)
        .scalar_subquery()
        .label("bundle_created"),
        owner.label("owner_id"),
        queued.label("queued_prompt"),
        *extra,
        *(column for build in columns for column in build(current)),
    ).order_by(current.c.started_at, current.c.id)


_EVERY_ROW = 2**31 - 1


@dataclass(frozen=True)
class _Others:
    """What the other-sessions aggregate is relative to (uncorrelated scalar subqueries)."""

    task_id: Any
    primary_id: Any
    changing: Any


def _candidates(kind: str, rows_of: _Others, name: str = "other") -> Any:
    """The task's still-pending `kind` rows in the order the oldest bundle is chosen by,
    from the partial pending index by task (migration 0011) — with only the index's own
    conditions, fenced: PostgreSQL otherwise folded the per-row session checks
    below into the scan, misjudged them as selective, and ran them on every pending row of
    the task (bitmap scan, then sort) before the LIMIT; fenced, producing and ordering the
    candidates is cheap and the checks run only until the first row that counts. The fence
    is a LIMIT no task reaches, as a literal (SQLite takes no OFFSET without a LIMIT, and
    would bind the one it adds)."""
    row = messages.alias(f"{name}_{kind}")
    pending_id = json_key_text(row.c.metadata, PENDING_ID_KEY)
    return (
        select(
            row.c.id,
            row.c.session_id,
            row.c.turn_id,
            row.c.created_at,
            pending_id.label("pending_id"),
        )
        .where(row.c.task_id == rows_of.task_id, of_type(kind, row), is_pending(row))
        .order_by(row.c.created_at, pending_id)
        .limit(constant(_EVERY_ROW))
        .subquery(f"{name}_{kind}_candidate")
    )


def _first_that_counts(
    kind: str, states: Iterable[str], *, alive: bool, rows_of: _Others
) -> tuple[Any, list[ColumnElement[bool]]]:
    """(candidate, conditions): the candidate rows on the current turn of a session that is
    neither the one asked about nor the primary one, whose state is in `states` (`alive`:
    not in them — the terminal ones). The session is looked up per row by correlated
    scalar subqueries, never joined (a join let the planners hash every session of the
    task first): the cost is the rows walked until the first that counts."""
    row = _candidates(kind, rows_of)
    literal_states = [constant(state) for state in sorted(states)]
    state = select(task_sessions.c.state).where(task_sessions.c.id == row.c.session_id)
    state_of_session = state.scalar_subquery()
    return (
        row,
        [
            row.c.session_id != _SESSION_ID,
            row.c.session_id != func.coalesce(rows_of.primary_id, constant("")),
            state_of_session.not_in(literal_states)
            if alive
            else state_of_session.in_(literal_states),
            row.c.turn_id == current_turn_id_subquery(row.c.session_id),
            rows_of.changing,
        ],
    )


def _first(row: Any, column: Any, *conditions: ColumnElement[bool]) -> Any:
    """`column` of the first candidate, in the candidates' order, meeting `conditions`.

    No ORDER BY of its own: both planners scan a fenced subquery (a LIMIT of its own) in
    the order it produced, and a second ORDER BY made SQLite sort every candidate — every
    check run on each — before taking the first. The randomized test of
    tests/pending/test_other_sessions.py (ties on created_at included) holds it to the
    oldest bundle on both databases."""
    return select(column).select_from(row).where(*conditions).limit(1).scalar_subquery()


def _pending_elsewhere(rows_of: _Others) -> ColumnElement[bool]:
    """Whether the task has a pending question or permission request of a session other than
    the one asked about and the primary one (with the task's state changing): the only case
    in which the other sessions' aggregate can owe anything. Two probes of the partial
    pending indexes by task, cheap beside the aggregate's plan — whose executor start-up
    alone cost PostgreSQL ~0.15-0.3 ms on each of a turn's two views."""

    def pending_of_another(kind: str) -> Any:
        # From the fenced candidates, as the aggregate reads them: unfenced, SQLite took
        # the (task_id, type) index and would walk every row of that type the task has.
        row = _candidates(kind, rows_of, "elsewhere")
        return _first(
            row,
            row.c.id,
            row.c.session_id != _SESSION_ID,
            row.c.session_id != func.coalesce(rows_of.primary_id, constant("")),
        ).is_not(None)

    return and_(
        rows_of.changing,
        or_(pending_of_another(CLARIFICATION_TYPE), pending_of_another(PERMISSION_TYPE)),
    )


def _other_sessions_columns(rows_of: _Others) -> list[Any]:
    """OtherSessions as four uncorrelated scalar columns (each planner runs them once per
    statement): is a permission owed, is a question owed — by an input-capable other
    session, with the rule of SessionFacts.pending_action (a question on the turn is the
    session's action, a permission only when the turn's latest permission request is
    pending) — and the oldest live bundle's pending_id and created_at."""
    question, asked = _first_that_counts(
        CLARIFICATION_TYPE, INPUT_CAPABLE_STATES, alive=False, rows_of=rows_of
    )
    permission, requested = _first_that_counts(
        PERMISSION_TYPE, INPUT_CAPABLE_STATES, alive=False, rows_of=rows_of
    )
    later = messages.alias("later_permission")
    on_turn_question = messages.alias("turn_question")
    latest = ~exists().where(
        later.c.turn_id == permission.c.turn_id,
        of_type(PERMISSION_TYPE, later),
        or_(
            later.c.created_at > permission.c.created_at,
            and_(later.c.created_at == permission.c.created_at, later.c.id > permission.c.id),
        ),
    )
    no_question = ~exists().where(
        on_turn_question.c.session_id == permission.c.session_id,
        on_turn_question.c.turn_id == permission.c.turn_id,
        of_type(CLARIFICATION_TYPE, on_turn_question),
        is_pending(on_turn_question),
    )
    bundle, live = _first_that_counts(
        CLARIFICATION_TYPE, TERMINAL_STATES, alive=True, rows_of=rows_of
    )
    named = func.coalesce(bundle.c.pending_id, constant("")) != constant("")
    return [
        _first(permission, permission.c.id, *requested, latest, no_question)
        .is_not(None)
        .label("others_permission"),
        _first(question, question.c.id, *asked).is_not(None).label("others_question"),
        _first(bundle, bundle.c.pending_id, *live, named).label("others_bundle_id"),
        _first(bundle, bundle.c.created_at, *live, named).label("others_bundle_created"),
    ]


# The statement of each way of choosing the sessions, built once: building and cache-keying a
# statement this size costs more than running it. Values go in as bind parameters.
_SESSION_ID: BindParameter[str] = bindparam("view_session_id")
_TASK_STATE: BindParameter[str] = bindparam("view_task_state")
_IDS: BindParameter[list[str]] = bindparam("view_ids", expanding=True)


@functools.cache
def _statement(choice: str, columns: tuple[ViewColumns, ...] = ()) -> Any:
    task_of_session = (
        select(task_sessions.c.task_id).where(task_sessions.c.id == _SESSION_ID).scalar_subquery()
    )
    of_task = task_sessions.c.task_id == task_of_session
    this_one = task_sessions.c.id == _SESSION_ID
    task_state = select(tasks.c.state).where(tasks.c.id == task_of_session).scalar_subquery()
    changing = task_state != _TASK_STATE
    if choice in ("session_or_changing_task", "others"):
        # The rows a writer may patch (this session, the task's primary one — the first,
        # as task_json takes it), and the rest of the task as one aggregate
        # (OtherSessions) — only when the task's state changes. Both are id lookups.
        primary_id = (
            select(task_sessions.c.id)
            .where(of_task, task_sessions.c.is_primary == true(), changing)
            .order_by(task_sessions.c.started_at, task_sessions.c.id)
            .limit(1)
            .scalar_subquery()
        )
        rows_of = _Others(task_of_session, primary_id, changing)
        if choice == "others":  # the aggregate alone (uncorrelated scalar columns)
            return select(*_other_sessions_columns(rows_of))
        return _facts_query(
            or_(this_one, task_sessions.c.id == primary_id),
            [_pending_elsewhere(rows_of).label("pending_elsewhere")],
            columns,
        )
    where = {
        "session": this_one,
        "session_task": of_task,
        "tasks": task_sessions.c.task_id.in_(_IDS),
        "sessions": task_sessions.c.id.in_(_IDS),
    }[choice]
    return _facts_query(where, (), columns)


@functools.cache
def _direct(choice: str, columns: tuple[ViewColumns, ...] = ()) -> DirectStatement:
    return DirectStatement(_statement(choice, columns))


@functools.cache
def _extra_keys(columns: tuple[ViewColumns, ...]) -> tuple[str, ...]:
    """The labels the ViewColumns add (what TaskView.extra gives back)."""
    return tuple(column.key for build in columns for column in build(task_sessions))


def _bundle(pending_id: str | None, created: datetime | str | None) -> tuple[datetime, str] | None:
    if not pending_id or created is None:
        return None
    if isinstance(created, str):  # SQLite hands a subquery's value back untyped
        created = datetime.fromisoformat(created)
    return (created, pending_id)


async def _read(
    conn: AsyncConnection, choice: str, columns: tuple[ViewColumns, ...] = (), **params: Any
) -> TaskView:
    facts: list[SessionFacts] = []
    owners: dict[str, str] = {}
    others: dict[str, OtherSessions] = {}
    extras: dict[str, dict[str, Any]] = {}
    extra_keys = _extra_keys(columns) if columns else ()
    for row in await _direct(choice, columns).rows(conn, params):
        if extra_keys:
            extras[row["id"]] = {key: row[key] for key in extra_keys}
        bundle = _bundle(row["bundle_id"], row["bundle_created"])
        if "pending_elsewhere" in row and row["task_id"] not in others:
            others[row["task_id"]] = (
                await _read_others(conn, params) if row["pending_elsewhere"] else _OWING_NOTHING
            )
        facts.append(
            SessionFacts(
                session=Session.from_row(row),
                current_turn_id=row["current_turn_id"],
                clarification_pending=bool(row["clarification_pending"]),
                permission_status=row["permission_status"],
                permission_pending=bool(row["permission_pending"]),
                bundle=bundle,
                queued_prompt=bool(row["queued_prompt"]),
            )
        )
        owners[row["task_id"]] = row["owner_id"] or ""
    return TaskView(facts, owners, others, extras)


_OWING_NOTHING = OtherSessions(action=None, bundle=None)


async def _read_others(conn: AsyncConnection, params: dict[str, Any]) -> OtherSessions:
    """The other sessions' aggregate (`OtherSessions`), read after the view's statement: on
    PostgreSQL a statement of its own sees its own snapshot — as any statement after the
    view does; the other sessions are not locked by the writer either way."""
    row = (await _direct("others").rows(conn, params))[0]
    return OtherSessions(
        action=strongest_action(
            (
                ACTION_PERMISSION if row["others_permission"] else None,
                ACTION_CLARIFICATION if row["others_question"] else None,
            )
        ),
        bundle=_bundle(row["others_bundle_id"], row["others_bundle_created"]),
    )


async def view_of_session_task(
    conn: AsyncConnection,
    session_id: str,
    *,
    task_changing_to: str | None = None,
    all_sessions: bool = False,
    columns: tuple[ViewColumns, ...] = (),
) -> TaskView:
    """The session, described in one statement — with every other session of its task when
    the caller may need the task's JSON: `all_sessions`, or `task_changing_to` a state the
    task is not in yet (the statement itself decides, so a task with a thousand sessions is
    read whole only when its state really changes). `columns`: read in the same statement,
    each session's values in `TaskView.extra`."""
    if all_sessions:
        return await _read(conn, "session_task", columns, view_session_id=session_id)
    if task_changing_to is None:
        return await _read(conn, "session", columns, view_session_id=session_id)
    return await _read(
        conn,
        "session_or_changing_task",
        columns,
        view_session_id=session_id,
        view_task_state=task_changing_to,
    )


async def view_of_tasks(conn: AsyncConnection, task_ids: Sequence[str]) -> TaskView:
    return await _read(conn, "tasks", view_ids=sorted(set(task_ids)))


async def view_of_sessions(conn: AsyncConnection, session_ids: Sequence[str]) -> TaskView:
    return await _read(conn, "sessions", view_ids=sorted(set(session_ids)))
