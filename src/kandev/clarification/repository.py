"""Durable clarification rows: creation, the claim, and every guarded transition after it.

A bundle is one `clarification_request` message per question, all sharing
`metadata.pending_id` (reference clarification-baseline §1.2). Every function here runs
inside the caller's transaction (`async with db.write() as conn`) and decides with SQL in
that transaction: each state change is one guarded UPDATE whose WHERE carries the whole
rule (pending-ish status, current turn, live session, well-formed bundle), so a stale read
can never overwrite an answer or revive a superseded bundle. On SQLite the write
transaction's BEGIN IMMEDIATE serializes them; on PostgreSQL they take the per-session
turn lock (and, for the claim family, the session rows FOR UPDATE) first.

An exception from any function leaves partial writes in `conn`: let it propagate so
`db.write()` rolls the transaction back. (The claim protects itself with a savepoint: its
transient `responding` status is never left behind.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    delete,
    exists,
    func,
    insert,
    literal,
    not_,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog.messages import (
    AGENT_DISCONNECTED_KEY,
    ANSWERED,
    CANCELLED,
    CLAIM_STATUSES,
    CLARIFICATION_TYPE,
    CONTEXT_KEY,
    DELIVERED_VIA_KEY,
    DELIVERY_PENDING_KEY,
    DELIVERY_VIAS,
    DISPATCH_ATTEMPTED_KEY,
    DISPATCH_KEYS,
    DISPATCH_MESSAGE_IDS_KEY,
    DISPATCH_PENDING_ID_KEY,
    DISPATCH_PENDING_KEY,
    DISPATCH_TURN_ID_KEY,
    EXPIRED,
    PENDING,
    PENDING_ID_KEY,
    QUESTION_ID_KEY,
    QUESTION_INDEX_KEY,
    QUESTION_KEY,
    QUESTION_TOTAL_KEY,
    REJECT_REASON_KEY,
    RESPONDING,
    RESPONSE_KEY,
    STATUS_KEY,
    VIA_TOOL_CALL,
)
from kandev.catalog.states import TERMINAL_STATES
from kandev.db.engine import Database
from kandev.db.json_sql import json_key_text, json_remove_keys, json_set_keys, json_truthy
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_session_turns as turns
from kandev.db.tables import task_sessions as sessions
from kandev.errors import KandevError
from kandev.sessions import turn_repository
from kandev.sessions.models import Message
from kandev.sessions.turns import current_turn_id_subquery, lock_session_turns

_ORDER = (messages.c.created_at, messages.c.id)


class ClarificationStateError(KandevError):
    """The durable rows contradict what the transition requires; nothing may be committed."""


# --- predicates (each exists once) --------------------------------------------------------


def _meta(key: str, table: Any = messages) -> ColumnElement[str]:
    return json_key_text(table.c.metadata, key)


def _of_bundle(pending_id: str, table: Any = messages) -> ColumnElement[bool]:
    return and_(table.c.type == CLARIFICATION_TYPE, _meta(PENDING_ID_KEY, table) == pending_id)


def _is_pending(table: Any = messages) -> ColumnElement[bool]:
    """Absent, '', JSON null and 'pending' count; an unrecognized status does not (§1.3)."""
    return func.coalesce(_meta(STATUS_KEY, table), "").in_(["", PENDING])


def _on_current_turn(table: Any = messages, session_id: str | None = None) -> ColumnElement[bool]:
    """The row belongs to its session's current turn (sessions.turns, the one rule).

    With a known session the subquery is uncorrelated (evaluated once), else per row.
    """
    session = table.c.session_id if session_id is None else literal(session_id)
    return table.c.turn_id == current_turn_id_subquery(session)


def _session_is_live(table: Any = messages) -> ColumnElement[bool]:
    return exists().where(
        sessions.c.id == table.c.session_id, sessions.c.state.not_in(TERMINAL_STATES)
    )


def _well_formed(pending_id: str, table: Any = messages) -> ColumnElement[bool]:
    """No row shares the pending_id while differing in type, session or turn (§1.5)."""
    sibling = messages.alias("bundle_sibling")
    return not_(
        exists().where(
            _meta(PENDING_ID_KEY, sibling) == pending_id,
            or_(
                sibling.c.type != CLARIFICATION_TYPE,
                sibling.c.session_id != table.c.session_id,
                sibling.c.turn_id.is_distinct_from(table.c.turn_id),
            ),
        )
    )


def _delivery_pending(table: Any = messages) -> ColumnElement[bool]:
    return json_truthy(table.c.metadata, DELIVERY_PENDING_KEY)


def _rows(result: Any) -> list[Message]:
    """RETURNING rows as Messages in (created_at, id) order (RETURNING has no order)."""
    found = [Message.from_row(row) for row in result.mappings().all()]
    return sorted(found, key=lambda m: (m.created_at, m.id))


async def _select(conn: AsyncConnection, query: Select[Any]) -> list[Message]:
    rows = (await conn.execute(query.order_by(*_ORDER))).mappings().all()
    return [Message.from_row(row) for row in rows]


async def _lock_bundle(conn: AsyncConnection, db: Database, pending_id: str) -> None:
    """PostgreSQL: the turn lock of every session the bundle touches, then those session
    rows FOR UPDATE, so a concurrent terminal-state write is either before or after us."""
    if not db.is_postgres:
        return
    session_ids = sorted(
        (await conn.execute(select(messages.c.session_id).distinct().where(_of_bundle(pending_id))))
        .scalars()
        .all()
    )
    if not session_ids:
        return
    await lock_session_turns(conn, db, session_ids)
    await conn.execute(
        select(sessions.c.id)
        .where(sessions.c.id.in_(session_ids))
        .order_by(sessions.c.id)
        .with_for_update()
    )


def _check_terminal(terminal: str) -> None:
    if terminal not in CLAIM_STATUSES:
        raise ValueError(f"invalid clarification terminal status {terminal!r}")


def _check_claimed_ids(claimed_ids: list[str]) -> None:
    if not claimed_ids:
        raise ValueError("claimed clarification message ids are required")
    if any(not isinstance(i, str) or not i for i in claimed_ids):
        raise ValueError("claimed clarification message ids must be non-empty strings")
    if len(set(claimed_ids)) != len(claimed_ids):
        raise ValueError("claimed clarification message ids must be unique")


# --- creation and reads --------------------------------------------------------------------


def _question_record(question: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": question["id"],
        "title": question.get("title", ""),
        "prompt": question["prompt"],
        "options": [
            {
                "option_id": option["option_id"],
                "label": option.get("label", ""),
                "description": option.get("description", ""),
            }
            for option in question.get("options", [])
        ],
    }


async def insert_bundle(
    conn: AsyncConnection,
    *,
    pending_id: str,
    session_id: str,
    task_id: str,
    turn_id: str,
    questions: list[dict[str, Any]],
    context: str,
    now: datetime,
    new_id: Callable[[], str],
) -> list[Message]:
    """One pending row per question (§2.5), in one statement; questions are validated.

    Row i is stamped `now + i µs` so question order is also (created_at, id) order,
    whatever the id factory yields.
    """
    if not questions:
        raise ValueError("a clarification bundle needs at least one question")
    total = len(questions)
    values = []
    for index, question in enumerate(questions):
        record = _question_record(question)
        created = now + timedelta(microseconds=index)
        values.append(
            {
                "id": new_id(),
                "session_id": session_id,
                "task_id": task_id,
                "turn_id": turn_id,
                "author_type": "agent",
                "author_id": "",
                "type": CLARIFICATION_TYPE,
                "content": record["prompt"],
                "requests_input": index == total - 1,
                "metadata": {
                    PENDING_ID_KEY: pending_id,
                    QUESTION_ID_KEY: record["id"],
                    QUESTION_KEY: record,
                    QUESTION_INDEX_KEY: index,
                    QUESTION_TOTAL_KEY: total,
                    CONTEXT_KEY: context,
                    STATUS_KEY: PENDING,
                },
                "created_at": created,
                "updated_at": created,
            }
        )
    await conn.execute(insert(messages), values)
    return [Message.from_row(v) for v in values]  # type: ignore[arg-type]


async def find_bundle_messages(conn: AsyncConnection, pending_id: str) -> list[Message]:
    """Every row of the bundle, whatever its state."""
    return await _select(conn, select(messages).where(_of_bundle(pending_id)))


async def find_active_messages(conn: AsyncConnection, session_id: str) -> list[Message]:
    """Pending rows of the session on its current turn; the session's state is not read
    (the workflow guard and expiry discovery want them even while it ends, §1.5)."""
    return await _select(
        conn,
        select(messages).where(
            messages.c.session_id == session_id,
            messages.c.type == CLARIFICATION_TYPE,
            _is_pending(),
            _on_current_turn(session_id=session_id),
        ),
    )


async def find_delivery_intent_messages(conn: AsyncConnection, pending_id: str) -> list[Message]:
    """The bundle's rows that still carry a delivery intent (claimed, not yet handed over)."""
    return await _select(conn, select(messages).where(_of_bundle(pending_id), _delivery_pending()))


# --- the claim and its two endings ---------------------------------------------------------


async def claim_active_bundle(
    conn: AsyncConnection,
    db: Database,
    pending_id: str,
    status: str,
    responses: dict[str, dict[str, Any]] | None,
    now: datetime,
    reject_reason: str = "",
) -> list[Message] | None:
    """Claim the bundle's pending rows for one responder (§3.2); None when not claimed.

    The guarded UPDATE below is the only claim statement: exactly one concurrent caller
    moves the rows, the others (and any caller of a superseded, ended or malformed bundle)
    get None with nothing written. The claimed rows then carry `status` and the delivery
    intent (`response_delivery_pending`), plus `response` (responses[question_id]) when
    answered, or `reject_reason` when rejected (a resume after a restart quotes it).
    """
    _check_terminal(status)
    await _lock_bundle(conn, db, pending_id)
    async with conn.begin_nested():
        claimed = _rows(
            await conn.execute(
                update(messages)
                .where(
                    _of_bundle(pending_id),
                    _is_pending(),
                    _session_is_live(),
                    _on_current_turn(),
                    _well_formed(pending_id),
                )
                .values(
                    metadata=json_set_keys(messages.c.metadata, {STATUS_KEY: RESPONDING}),
                    updated_at=now,
                )
                .returning(*messages.c)
            )
        )
        if not claimed:
            return None
        out = [
            await _write_claim(conn, row, status, responses, now, reject_reason)
            for row in claimed  # question order: the order the reference writes them in
        ]
    return out


async def _write_claim(
    conn: AsyncConnection,
    row: Message,
    status: str,
    responses: dict[str, dict[str, Any]] | None,
    now: datetime,
    reject_reason: str,
) -> Message:
    question_id = row.metadata.get(QUESTION_ID_KEY)
    if not isinstance(question_id, str) or not question_id:
        raise ClarificationStateError(f"clarification message {row.id} is missing question_id")
    changes: dict[str, Any] = {STATUS_KEY: status, DELIVERY_PENDING_KEY: True}
    if status == ANSWERED:
        if responses is None or question_id not in responses:
            raise ClarificationStateError(
                f"missing response for clarification question {question_id}"
            )
        changes[RESPONSE_KEY] = responses[question_id]
    elif reject_reason:
        changes[REJECT_REASON_KEY] = reject_reason
    written = _rows(
        await conn.execute(
            update(messages)
            .where(messages.c.id == row.id, _meta(STATUS_KEY) == RESPONDING)
            .values(metadata=json_set_keys(messages.c.metadata, changes), updated_at=now)
            .returning(*messages.c)
        )
    )
    if len(written) != 1:
        raise ClarificationStateError(f"clarification message {row.id} lost its claim")
    return written[0]


async def finalize_delivery(
    conn: AsyncConnection,
    db: Database,
    pending_id: str,
    terminal: str,
    claimed_ids: list[str],
    via: str = VIA_TOOL_CALL,
) -> list[Message] | None:
    """The delivered mark: clear the delivery intent once the answer was handed over (§3.3),
    recording how (`response_delivered_via`).

    None unless the rows still carrying the intent are exactly `claimed_ids`, all with
    status `terminal`. `updated_at` is left alone: it stays the claim's time, the
    "responded_at" every caller sees.
    """
    _check_terminal(terminal)
    if via not in DELIVERY_VIAS:
        raise ValueError(f"invalid clarification delivery {via!r}")
    _check_claimed_ids(claimed_ids)
    await _lock_bundle(conn, db, pending_id)
    carrying = await find_delivery_intent_messages(conn, pending_id)
    if {m.id for m in carrying} != set(claimed_ids) or any(
        m.metadata.get(STATUS_KEY) != terminal for m in carrying
    ):
        return None
    written = _rows(
        await conn.execute(
            update(messages)
            .where(
                messages.c.id.in_(claimed_ids),
                _of_bundle(pending_id),
                _meta(STATUS_KEY) == terminal,
                _delivery_pending(),
            )
            .values(
                metadata=json_set_keys(
                    json_remove_keys(messages.c.metadata, [DELIVERY_PENDING_KEY]),
                    {DELIVERED_VIA_KEY: via},
                )
            )
            .returning(*messages.c)
        )
    )
    _expect_all(written, claimed_ids, "lost its delivery intent")
    return written


async def restore_active_bundle(
    conn: AsyncConnection,
    db: Database,
    pending_id: str,
    terminal: str,
    claimed_ids: list[str],
    now: datetime,
) -> list[Message] | None:
    """Undo a claim whose delivery failed, so the bundle can be answered again (§3.4).

    None when not restorable: a claimed row is no longer `terminal` with the intent, or
    the bundle is superseded, its session ended, or the bundle is malformed. Only the
    claimed rows change; siblings that were terminal before the claim stay terminal.
    """
    _check_terminal(terminal)
    _check_claimed_ids(claimed_ids)
    await _lock_bundle(conn, db, pending_id)
    guard = (
        _of_bundle(pending_id),
        _meta(STATUS_KEY) == terminal,
        _delivery_pending(),
        _session_is_live(),
        _on_current_turn(),
        _well_formed(pending_id),
    )
    restorable = await _select(conn, select(messages).where(messages.c.id.in_(claimed_ids), *guard))
    if len(restorable) != len(claimed_ids):
        return None
    written = _rows(
        await conn.execute(
            update(messages)
            .where(messages.c.id.in_(claimed_ids), *guard)
            .values(
                metadata=json_remove_keys(
                    json_set_keys(messages.c.metadata, {STATUS_KEY: PENDING}),
                    [RESPONSE_KEY, DELIVERY_PENDING_KEY],
                ),
                updated_at=now,
            )
            .returning(*messages.c)
        )
    )
    _expect_all(written, claimed_ids, "lost its terminal claim")
    return written


def _expect_all(written: list[Message], ids: Iterable[str], what: str) -> None:
    missing = sorted(set(ids) - {m.id for m in written})
    if missing:
        raise ClarificationStateError(f"clarification message {missing[0]} {what}")


# --- detach, expire, cancel -----------------------------------------------------------------


async def detach_active(
    conn: AsyncConnection, db: Database, session_id: str, now: datetime
) -> list[Message]:
    """Mark the session's current-turn pending rows as detached (§3.5); still answerable.

    Returns only the rows this call changed: a repeat returns [].
    """
    await lock_session_turns(conn, db, [session_id])
    return _rows(
        await conn.execute(
            update(messages)
            .where(
                messages.c.session_id == session_id,
                messages.c.type == CLARIFICATION_TYPE,
                _is_pending(),
                not_(json_truthy(messages.c.metadata, AGENT_DISCONNECTED_KEY)),
                _on_current_turn(session_id=session_id),
            )
            .values(
                metadata=json_set_keys(messages.c.metadata, {AGENT_DISCONNECTED_KEY: True}),
                updated_at=now,
            )
            .returning(*messages.c)
        )
    )


async def expire_active_bundles(
    conn: AsyncConnection, db: Database, session_id: str, now: datetime
) -> list[Message]:
    """Expire every active bundle of a session that is ending (§3.6).

    Only pending rows with a pending_id on the current turn change; answered siblings,
    superseded rows and other sessions are untouched. A repeat returns [].
    """
    await lock_session_turns(conn, db, [session_id])
    return _rows(
        await conn.execute(
            update(messages)
            .where(
                messages.c.session_id == session_id,
                messages.c.type == CLARIFICATION_TYPE,
                _is_pending(),
                func.coalesce(_meta(PENDING_ID_KEY), "") != "",
                _on_current_turn(session_id=session_id),
            )
            .values(
                metadata=json_set_keys(
                    messages.c.metadata, {STATUS_KEY: EXPIRED, AGENT_DISCONNECTED_KEY: True}
                ),
                updated_at=now,
            )
            .returning(*messages.c)
        )
    )


async def cancel_bundle(
    conn: AsyncConnection, db: Database, pending_id: str, now: datetime
) -> list[Message]:
    """Operator cancel (§3.13): the bundle's still-pending rows become `cancelled`.

    Not a claim and not turn-guarded (the caller requires a live waiter), but it never
    overwrites a row that already has an outcome. Returns the rows changed.
    """
    await _lock_bundle(conn, db, pending_id)
    return _rows(
        await conn.execute(
            update(messages)
            .where(_of_bundle(pending_id), _is_pending())
            .values(
                metadata=json_set_keys(messages.c.metadata, {STATUS_KEY: CANCELLED}),
                updated_at=now,
            )
            .returning(*messages.c)
        )
    )


# --- reservation turns for a detached resume (§1.4, §3.11) ----------------------------------


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
    _check_claimed_ids(message_ids)
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
