"""The claim and every guarded transition of a bundle's rows after it.

Every function here runs inside the caller's transaction (`async with db.write() as conn`)
and decides with SQL in that transaction: each state change is one guarded UPDATE whose
WHERE carries the whole rule (pending-ish status, current turn, live session, well-formed
bundle), so a stale read can never overwrite an answer or revive a superseded bundle. On
SQLite the write transaction's BEGIN IMMEDIATE serializes them; on PostgreSQL they take
the per-session turn lock (and, for the claim family, the session rows FOR UPDATE) first.

An exception from any function leaves partial writes in `conn`: let it propagate so
`db.write()` rolls the transaction back. (The claim protects itself with a savepoint: its
transient `responding` status is never left behind.)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    and_,
    case,
    exists,
    func,
    literal,
    not_,
    null,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog.messages import (
    AGENT_DISCONNECTED_KEY,
    ANSWERED,
    CANCELLED,
    CLAIM_STATUSES,
    CLARIFICATION_TYPE,
    DELIVERED_VIA_KEY,
    DELIVERY_PENDING_KEY,
    DELIVERY_VIAS,
    EXPIRED,
    PENDING,
    PENDING_ID_KEY,
    QUESTION_ID_KEY,
    REJECT_REASON_KEY,
    RESPONSE_KEY,
    STATUS_KEY,
    VIA_TOOL_CALL,
)
from kandev.clarification.bundles import select_messages
from kandev.clarification.predicates import (
    delivery_pending,
    is_pending,
    meta,
    of_bundle,
    on_current_turn,
    session_is_live,
    well_formed,
)
from kandev.db.engine import Database
from kandev.db.json_sql import json_remove_keys, json_set_keys, json_truthy
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_sessions as sessions
from kandev.errors import KandevError
from kandev.sessions.models import Message
from kandev.sessions.turns import lock_session_turn_and_row, lock_session_turns


class ClarificationStateError(KandevError):
    """The durable rows contradict what the transition requires; nothing may be committed."""


def check_claimed_ids(claimed_ids: list[str]) -> None:
    """The ids of a claim's rows: non-empty, unique, non-empty strings (else ValueError)."""
    if not claimed_ids:
        raise ValueError("claimed clarification message ids are required")
    if any(not isinstance(i, str) or not i for i in claimed_ids):
        raise ValueError("claimed clarification message ids must be non-empty strings")
    if len(set(claimed_ids)) != len(claimed_ids):
        raise ValueError("claimed clarification message ids must be unique")


def _check_terminal(terminal: str) -> None:
    if terminal not in CLAIM_STATUSES:
        raise ValueError(f"invalid clarification terminal status {terminal!r}")


def _rows(result: Any) -> list[Message]:
    """RETURNING rows as Messages in (created_at, id) order (RETURNING has no order)."""
    found = [Message.from_row(row) for row in result.mappings().all()]
    return sorted(found, key=lambda m: (m.created_at, m.id))


def _expect_all(written: list[Message], ids: Iterable[str], what: str) -> None:
    missing = sorted(set(ids) - {m.id for m in written})
    if missing:
        raise ClarificationStateError(f"clarification message {missing[0]} {what}")


async def lock_bundle(
    conn: AsyncConnection,
    db: Database,
    pending_id: str,
    session_ids: Sequence[str] | None = None,
) -> None:
    """PostgreSQL: the turn lock of every session the bundle touches, then those session
    rows FOR UPDATE, so a concurrent terminal-state write is either before or after us.

    `session_ids`: the bundle's sessions when the caller already read its rows (a row's
    session never changes), which saves looking them up; one session takes both locks in
    one statement."""
    if not db.is_postgres:
        return
    if session_ids is None:
        session_ids = (
            (
                await conn.execute(
                    select(messages.c.session_id).distinct().where(of_bundle(pending_id))
                )
            )
            .scalars()
            .all()
        )
    ids = sorted(set(session_ids))
    if not ids:
        return
    if len(ids) == 1:
        await lock_session_turn_and_row(conn, db, ids[0])
        return
    await lock_session_turns(conn, db, ids)
    await conn.execute(
        select(sessions.c.id)
        .where(sessions.c.id.in_(ids))
        .order_by(sessions.c.id)
        .with_for_update()
    )


# --- the claim and its two endings ---------------------------------------------------------


async def claim_active_bundle(
    conn: AsyncConnection,
    db: Database,
    pending_id: str,
    status: str,
    responses: dict[str, dict[str, Any]] | None,
    now: datetime,
    reject_reason: str = "",
    *,
    session_ids: Sequence[str] | None = None,
) -> list[Message] | None:
    """Claim the bundle's pending rows for one responder (§3.2); None when not claimed.

    The guarded UPDATE below is the only claim statement: exactly one concurrent caller
    moves the rows, the others (and any caller of a superseded, ended or malformed bundle)
    get None with nothing written. The claimed rows then carry `status` and the delivery
    intent (`response_delivery_pending`), plus `response` (responses[question_id]) when
    answered, or `reject_reason` when rejected (a resume after a restart quotes it) — all
    written by that one statement: each row picks its own response by its question_id,
    and a bundle with a pending row the claim could not complete (no question_id, no
    response for it) is not claimed at all, so nothing half-claimed is ever written.
    Such a bundle raises ClarificationStateError (found by one more read, only then).
    """
    _check_terminal(status)
    await lock_bundle(conn, db, pending_id, session_ids)
    changes: dict[str, Any] = {STATUS_KEY: status, DELIVERY_PENDING_KEY: True}
    if status == ANSWERED:
        changes[RESPONSE_KEY] = _response_of_row(responses or {})
    elif reject_reason:
        changes[REJECT_REASON_KEY] = reject_reason
    claimable = (
        of_bundle(pending_id),
        is_pending(),
        session_is_live(),
        on_current_turn(),
        well_formed(pending_id),
    )
    claimed = _rows(
        await conn.execute(
            update(messages)
            .where(*claimable, _completable(pending_id, status, responses))
            .values(metadata=json_set_keys(messages.c.metadata, changes), updated_at=now)
            .returning(*messages.c)
        )
    )
    if claimed:
        return claimed
    await _raise_if_incomplete(conn, claimable, status, responses)
    return None


def _response_of_row(responses: dict[str, dict[str, Any]]) -> ColumnElement[Any]:
    """Each row's response as JSON text, chosen by its own question_id (NULL: none)."""
    if not responses:
        return null()
    return case(
        {qid: literal(json.dumps(r), Text()) for qid, r in responses.items()},
        value=meta(QUESTION_ID_KEY),
        else_=null(),
    )


def _incomplete(status: str, responses: dict[str, dict[str, Any]] | None, table: Any) -> Any:
    """A pending row this claim could not complete: no question_id, or (answered) no
    response for its question."""
    question_id = func.coalesce(meta(QUESTION_ID_KEY, table), "")
    missing = question_id == ""
    if status == ANSWERED:
        answered = sorted(responses or {})
        missing = or_(missing, question_id.not_in(answered) if answered else true())
    return missing


def _completable(
    pending_id: str, status: str, responses: dict[str, dict[str, Any]] | None
) -> ColumnElement[bool]:
    sibling = messages.alias("claimed_sibling")
    return not_(
        exists().where(
            of_bundle(pending_id, sibling),
            is_pending(sibling),
            _incomplete(status, responses, sibling),
        )
    )


async def _raise_if_incomplete(
    conn: AsyncConnection,
    claimable: tuple[ColumnElement[bool], ...],
    status: str,
    responses: dict[str, dict[str, Any]] | None,
) -> None:
    """Nothing was claimed: a claimable bundle that failed only for an incomplete row is a
    state error (the rows contradict the claim), not a lost race."""
    rows = await select_messages(conn, select(messages).where(*claimable))
    for row in rows:
        question_id = row.metadata.get(QUESTION_ID_KEY)
        if not isinstance(question_id, str) or not question_id:
            raise ClarificationStateError(f"clarification message {row.id} is missing question_id")
        if status == ANSWERED and (responses is None or question_id not in responses):
            raise ClarificationStateError(
                f"missing response for clarification question {question_id}"
            )


async def finalize_delivery(
    conn: AsyncConnection,
    db: Database,
    pending_id: str,
    terminal: str,
    claimed_ids: list[str],
    via: str = VIA_TOOL_CALL,
    *,
    session_ids: Sequence[str] | None = None,
    locked: bool = False,
) -> list[Message] | None:
    """The delivered mark: clear the delivery intent once the answer was handed over (§3.3),
    recording how (`response_delivered_via`).

    None unless the rows still carrying the intent are exactly `claimed_ids`, all with
    status `terminal` — decided by the one guarded UPDATE, all or nothing. `updated_at` is
    left alone: it stays the claim's time, the "responded_at" every caller sees.
    `locked`: the caller already holds the bundle's session locks (PostgreSQL).
    """
    _check_terminal(terminal)
    if via not in DELIVERY_VIAS:
        raise ValueError(f"invalid clarification delivery {via!r}")
    check_claimed_ids(claimed_ids)
    if not locked:
        await lock_bundle(conn, db, pending_id, session_ids)
    carrying = messages.alias("carrying")
    exactly_the_claim = and_(
        # no other row of the bundle carries the intent, and none of it with another status
        not_(
            exists().where(
                of_bundle(pending_id, carrying),
                delivery_pending(carrying),
                or_(carrying.c.id.not_in(claimed_ids), meta(STATUS_KEY, carrying) != terminal),
            )
        ),
        # every claimed row still carries it
        select(func.count())
        .select_from(carrying)
        .where(
            carrying.c.id.in_(claimed_ids),
            of_bundle(pending_id, carrying),
            delivery_pending(carrying),
        )
        .scalar_subquery()
        == len(set(claimed_ids)),
    )
    written = _rows(
        await conn.execute(
            update(messages)
            .where(
                messages.c.id.in_(claimed_ids),
                of_bundle(pending_id),
                meta(STATUS_KEY) == terminal,
                delivery_pending(),
                exactly_the_claim,
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
    if not written:
        return None
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
    check_claimed_ids(claimed_ids)
    await lock_bundle(conn, db, pending_id)
    guard = (
        of_bundle(pending_id),
        meta(STATUS_KEY) == terminal,
        delivery_pending(),
        session_is_live(),
        on_current_turn(),
        well_formed(pending_id),
    )
    restorable = await select_messages(
        conn, select(messages).where(messages.c.id.in_(claimed_ids), *guard)
    )
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
                is_pending(),
                not_(json_truthy(messages.c.metadata, AGENT_DISCONNECTED_KEY)),
                on_current_turn(session_id=session_id),
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
                is_pending(),
                func.coalesce(meta(PENDING_ID_KEY), "") != "",
                on_current_turn(session_id=session_id),
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
    await lock_bundle(conn, db, pending_id)
    return _rows(
        await conn.execute(
            update(messages)
            .where(of_bundle(pending_id), is_pending())
            .values(
                metadata=json_set_keys(messages.c.metadata, {STATUS_KEY: CANCELLED}),
                updated_at=now,
            )
            .returning(*messages.c)
        )
    )
