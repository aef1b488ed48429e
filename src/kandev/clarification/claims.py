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

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, not_, select, update
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
    RESPONDING,
    RESPONSE_KEY,
    STATUS_KEY,
    VIA_TOOL_CALL,
)
from kandev.clarification.bundles import find_delivery_intent_messages, select_messages
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
from kandev.sessions.turns import lock_session_turns


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


async def _lock_bundle(conn: AsyncConnection, db: Database, pending_id: str) -> None:
    """PostgreSQL: the turn lock of every session the bundle touches, then those session
    rows FOR UPDATE, so a concurrent terminal-state write is either before or after us."""
    if not db.is_postgres:
        return
    session_ids = sorted(
        (await conn.execute(select(messages.c.session_id).distinct().where(of_bundle(pending_id))))
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
                    of_bundle(pending_id),
                    is_pending(),
                    session_is_live(),
                    on_current_turn(),
                    well_formed(pending_id),
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
            .where(messages.c.id == row.id, meta(STATUS_KEY) == RESPONDING)
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
    check_claimed_ids(claimed_ids)
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
                of_bundle(pending_id),
                meta(STATUS_KEY) == terminal,
                delivery_pending(),
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
    check_claimed_ids(claimed_ids)
    await _lock_bundle(conn, db, pending_id)
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
    await _lock_bundle(conn, db, pending_id)
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
