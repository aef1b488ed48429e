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

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    and_,
    bindparam,
    case,
    exists,
    func,
    not_,
    null,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import BindParameter

from kandev.board.task_repository import with_task_owner
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
from kandev.clarification.bundles import (
    authorizable,
    find_bundle_authorizable,
    select_messages,
)
from kandev.clarification.predicates import (
    delivery_pending,
    is_pending,
    meta,
    of_bundle,
    of_type,
    on_current_turn,
    session_is_live,
    well_formed,
)
from kandev.db.direct import DirectStatement
from kandev.db.engine import Database, require_transaction
from kandev.db.json_sql import json_remove_keys, json_set_keys, json_truthy
from kandev.db.sql_literals import constant
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_sessions as sessions
from kandev.errors import KandevError
from kandev.sessions.models import Message
from kandev.sessions.turns import (
    lock_session_turn_and_row,
    lock_session_turns,
    turn_lock_column,
)


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
    return _ordered(result.mappings().all())


def _ordered(rows: Iterable[Mapping[str, Any]]) -> list[Message]:
    found = [Message.from_row(row) for row in rows]
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


@dataclass(frozen=True)
class HeldBundle:
    """A bundle read inside the transaction that claims it, once its locks are held: its
    rows, and per task they name the row that authorizes it (`with_task_owner`)."""

    rows: list[Message]
    task_rows: dict[str, Mapping[Any, Any]]


async def lock_and_read_bundle(conn: AsyncConnection, db: Database, pending_id: str) -> HeldBundle:
    """The bundle's locks (`lock_bundle`), then its rows as they are once the locks are
    ours — so a claim that claims nothing can replay them with no read after it.

    SQLite: the write transaction already serializes every writer: one read. PostgreSQL,
    a bundle of one session (every bundle an agent asks is one): one statement, the turn
    lock in its select list (taken while the row is read), then FOR UPDATE of the session
    row and the bundle's rows. A row a concurrent claim changed while we waited for the
    turn lock is read at its newest version (READ COMMITTED re-checks a row it locks), not
    the one the statement's snapshot saw. Rows of several sessions (or none under a session
    row): the first session's locks are ours and it sorts first, so `lock_bundle` takes
    every session's in sorted order, and one read follows."""
    require_transaction(conn)
    if db.is_postgres:
        found = await _locked_bundle_statement().rows(conn, {"pending_id": pending_id})
        if found and found[0]["bundle_sessions"] == 1:
            return HeldBundle(*authorizable(found))
        await lock_bundle(conn, db, pending_id)
    return HeldBundle(*await find_bundle_authorizable(conn, pending_id))


@functools.cache
def _locked_bundle_statement() -> DirectStatement:
    """PostgreSQL: the bundle's rows of its first session with their task's authorizing
    columns and how many sessions the bundle has, taking that session's turn lock, then
    the session row and those rows FOR UPDATE."""
    pending_id: BindParameter[str] = bindparam("pending_id")
    sibling = messages.alias("bundle_sibling")
    first_session = (
        select(func.min(sibling.c.session_id)).where(of_bundle(pending_id, sibling))
    ).scalar_subquery()
    bundle_sessions = (
        select(func.count(sibling.c.session_id.distinct())).where(of_bundle(pending_id, sibling))
    ).scalar_subquery()
    with_session = messages.join(sessions, sessions.c.id == messages.c.session_id)
    joined, owner_columns = with_task_owner(with_session, messages.c.task_id)
    return DirectStatement(
        select(
            turn_lock_column(sessions.c.id).label("turn_lock"),
            bundle_sessions.label("bundle_sessions"),
            *messages.c,
            *owner_columns,
        )
        .select_from(joined)
        .where(of_bundle(pending_id), messages.c.session_id == first_session)
        .order_by(messages.c.created_at, messages.c.id)
        .with_for_update(of=[messages, sessions])
    )


# --- the claim and its two endings ---------------------------------------------------------


@dataclass(frozen=True)
class ClaimAttempt:
    """A claim's outcome: the rows it claimed (None: nothing claimed), and for a claim
    that claimed nothing the bundle's rows as the caller replays them (R2)."""

    claimed: list[Message] | None
    seen: list[Message] | None = None


async def attempt_claim(
    conn: AsyncConnection,
    db: Database,
    pending_id: str,
    status: str,
    responses: dict[str, dict[str, Any]] | None,
    now: datetime,
    reject_reason: str = "",
    *,
    held: HeldBundle | None = None,
) -> ClaimAttempt:
    """Claim the bundle's pending rows for one responder (§3.2); `claimed` is None when
    nothing was claimed.

    The guarded UPDATE below is the only claim statement: exactly one concurrent caller
    moves the rows, the others (and any caller of a superseded, ended or malformed bundle)
    get None with nothing written. The claimed rows then carry `status` and the delivery
    intent (`response_delivery_pending`), plus `response` (responses[question_id]) when
    answered, or `reject_reason` when rejected (a resume after a restart quotes it) — all
    written by that one statement: each row picks its own response by its question_id,
    and a bundle with a pending row the claim could not complete (no question_id, no
    response for it) is not claimed at all, so nothing half-claimed is ever written.
    Such a bundle raises ClarificationStateError (found by one more read, only then).

    The bundle's locks are taken and its rows read first (`lock_and_read_bundle`), unless
    the caller did so in this transaction and passes them as `held`. A claim that claims
    nothing replays those rows as `seen` (R2), with no read after it — nobody could change
    them while the locks were held.
    """
    _check_terminal(status)
    if held is None:
        held = await lock_and_read_bundle(conn, db, pending_id)
    answers = sorted((responses or {}).items()) if status == ANSWERED else []
    with_reason = status != ANSWERED and bool(reject_reason)
    params: dict[str, Any] = {"pending_id": pending_id, "now": now}
    if status == ANSWERED:
        params["answered"] = [qid for qid, _ in answers]
    for i, (qid, response) in enumerate(answers):
        params[f"q{i}"], params[f"r{i}"] = qid, json.dumps(response)
    if with_reason:
        params["reject_reason"] = json.dumps(reject_reason)
    statement = _claim_statement(status, len(answers), with_reason)
    claimed = _ordered(await statement.rows(conn, params))
    if claimed:
        return ClaimAttempt(claimed)
    return ClaimAttempt(None, await read_failed_claim(conn, pending_id, status, responses, held))


async def read_failed_claim(
    conn: AsyncConnection,
    pending_id: str,
    status: str,
    responses: dict[str, dict[str, Any]] | None,
    held: HeldBundle,
) -> list[Message]:
    """After a claim that claimed nothing: every row of the bundle as read under the
    claim's locks — what a losing caller replays (R2). Raises ClarificationStateError when
    a row is still pending that the claim could not complete (the diagnosis runs only
    then: a decided bundle, the usual loser's, cannot be incomplete)."""
    rows = held.rows
    if any(_pending_status(row.metadata.get(STATUS_KEY)) for row in rows):
        await _raise_if_incomplete(conn, _claimable(pending_id), status, responses)
    return rows


def _pending_status(status: Any) -> bool:
    """is_pending() in Python: absent, '', JSON null and 'pending' count (§1.3)."""
    return status in (None, "", PENDING)


def _claimable(pending_id: Any) -> tuple[ColumnElement[bool], ...]:
    return (
        of_bundle(pending_id),
        is_pending(),
        session_is_live(),
        on_current_turn(),
        well_formed(pending_id),
    )


@functools.cache
def _claim_statement(status: str, answers: int, with_reason: bool) -> DirectStatement:
    """The claim statement of one shape, built once (its values are bind parameters:
    pending_id, now, q<i>/r<i> — each answered question's id and response JSON —,
    answered, reject_reason)."""
    pending_id: BindParameter[str] = bindparam("pending_id")
    changes: dict[str, Any] = {STATUS_KEY: status, DELIVERY_PENDING_KEY: True}
    if status == ANSWERED:
        changes[RESPONSE_KEY] = _response_of_row(answers)
    elif with_reason:
        changes[REJECT_REASON_KEY] = bindparam("reject_reason", type_=Text())
    return DirectStatement(
        update(messages)
        .where(*_claimable(pending_id), _completable(pending_id, status, answers))
        .values(
            metadata=json_set_keys(messages.c.metadata, changes),
            updated_at=bindparam("now", type_=messages.c.updated_at.type),
        )
        .returning(*messages.c)
    )


def _response_of_row(answers: int) -> ColumnElement[Any]:
    """Each row's response as JSON text, chosen by its own question_id (NULL: none)."""
    if not answers:
        return null()
    return case(
        *[
            (meta(QUESTION_ID_KEY) == bindparam(f"q{i}"), bindparam(f"r{i}", type_=Text()))
            for i in range(answers)
        ],
        else_=null(),
    )


def _completable(pending_id: Any, status: str, answers: int) -> ColumnElement[bool]:
    """No pending row of the bundle that this claim could not complete: one without a
    question_id, or (answered) one whose question has no response (`answered`)."""
    sibling = messages.alias("claimed_sibling")
    question_id = func.coalesce(meta(QUESTION_ID_KEY, sibling), constant(""))
    incomplete: ColumnElement[bool] = question_id == constant("")
    if status == ANSWERED:
        unanswered = (
            question_id.not_in(bindparam("answered", expanding=True)) if answers else true()
        )
        incomplete = or_(incomplete, unanswered)
    return not_(exists().where(of_bundle(pending_id, sibling), is_pending(sibling), incomplete))


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
    params = {
        "pending_id": pending_id,
        "claimed_ids": sorted(set(claimed_ids)),
        "claimed_count": len(set(claimed_ids)),
    }
    written = _ordered(await _finalize_statement(terminal, via).rows(conn, params))
    if not written:
        return None
    _expect_all(written, claimed_ids, "lost its delivery intent")
    return written


@functools.cache
def _finalize_statement(terminal: str, via: str) -> DirectStatement:
    """The delivered mark's one statement, built once per (terminal, via): the claimed
    rows lose the intent only if they are exactly the rows still carrying it."""
    pending_id: BindParameter[str] = bindparam("pending_id")
    claimed: BindParameter[list[str]] = bindparam("claimed_ids", expanding=True)
    carrying = messages.alias("carrying")
    exactly_the_claim = and_(
        # no other row of the bundle carries the intent, and none of it with another status
        not_(
            exists().where(
                of_bundle(pending_id, carrying),
                delivery_pending(carrying),
                or_(carrying.c.id.not_in(claimed), meta(STATUS_KEY, carrying) != terminal),
            )
        ),
        # every claimed row still carries it
        select(func.count())
        .select_from(carrying)
        .where(
            carrying.c.id.in_(claimed),
            of_bundle(pending_id, carrying),
            delivery_pending(carrying),
        )
        .scalar_subquery()
        == bindparam("claimed_count"),
    )
    return DirectStatement(
        update(messages)
        .where(
            messages.c.id.in_(claimed),
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
                of_type(CLARIFICATION_TYPE),
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
                of_type(CLARIFICATION_TYPE),
                is_pending(),
                func.coalesce(meta(PENDING_ID_KEY), constant("")) != constant(""),
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
