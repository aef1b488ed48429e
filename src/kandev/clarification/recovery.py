"""Startup recovery of half-finished clarification deliveries (reference §3.10).

Runs before the server admits prompts. A claim is never undone here: once the claim
committed, `respond` may have returned `claimed: true` (nobody can tell whether that reply
reached the human), so the answer is delivered, not put back (docs/questions.md,
"Delivery guarantees"). The delivered mark is the absence of `response_delivery_pending`:
it is cleared only after the agent was handed the answer.

Step 1 settles every resume reservation turn still marked `prompt_dispatch_pending`: one
that was attempted (or already has a message) becomes an ordinary turn, one that was never
attempted is deleted; the claim it served keeps its delivery intent either way (its prompt
was not confirmed written). Step 2 settles every delivery intent: a bundle of a live
session is reported `undelivered` — the server resumes its agent with it once it runs
(`ClarificationService.redeliver_after_restart`) — and one of an ended session is retired
(the intent cleared, the terminal status kept).

Each reservation and each bundle is settled in its own transaction; a problem with one is
collected and the others still run, then `RecoveryError` names every problem and the
server refuses to start.

`settle_sessions_on_startup` then puts the sessions whose agent died with the previous
server at rest, all of them at once: a fixed number of statements in one transaction, for
any number of sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import case, exists, func, literal, not_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from kandev.catalog import messages as kinds
from kandev.catalog.states import IDLE, RUNNING, STARTING, TERMINAL_STATES, WAITING_FOR_INPUT
from kandev.clarification.bundles import find_delivery_intent_messages
from kandev.clarification.claims import ClarificationStateError, finalize_delivery
from kandev.clarification.predicates import is_pending, of_type, on_current_turn
from kandev.clarification.reservations import delete_reservation
from kandev.db.engine import Database
from kandev.db.json_sql import json_key_text, json_remove_keys, json_set_keys, json_truthy
from kandev.db.tables import task_session_messages as messages
from kandev.db.tables import task_session_turns as turns
from kandev.db.tables import task_sessions as sessions
from kandev.errors import KandevError
from kandev.sessions.message_repository import interrupt_open_tool_calls
from kandev.sessions.turns import lock_session_turns, turn_is_authoritative


class RecoveryError(KandevError):
    """Durable clarification state startup recovery cannot settle; the server must not start."""


@dataclass
class RecoveryReport:
    undelivered: list[str] = field(default_factory=list)  # pending_ids to deliver (resume)
    retired: list[str] = field(default_factory=list)  # pending_ids kept terminal, intent cleared
    deleted_reservations: list[str] = field(default_factory=list)  # turn ids
    kept_reservations: list[str] = field(default_factory=list)  # turn ids, now ordinary turns


@dataclass(frozen=True)
class _Reservation:
    turn_id: str
    session_id: str
    authoritative: bool
    pending_id: str | None  # None: a reservation that serves no clarification
    clarification_turn_id: str
    message_ids: tuple[str, ...]


async def recover_on_startup(db: Database, now: datetime) -> RecoveryReport:
    report = RecoveryReport()
    problems: list[str] = []
    for turn_id in await _pending_reservation_ids(db):
        try:
            async with db.write() as conn:
                outcome = await _settle_reservation(conn, db, turn_id, now)
        except (RecoveryError, ClarificationStateError) as exc:
            problems.append(str(exc))
            continue
        if outcome is None:
            continue
        (report.kept_reservations if outcome else report.deleted_reservations).append(turn_id)
    pending_ids, orphans = await _delivery_intents(db)
    problems += [
        f"clarification message {m} has a delivery intent but no pending_id" for m in orphans
    ]
    for pending_id in pending_ids:
        try:
            async with db.write() as conn:
                undelivered = await _settle_delivery(conn, db, pending_id)
        except (RecoveryError, ClarificationStateError) as exc:
            problems.append(str(exc))
            continue
        if undelivered is not None:
            (report.undelivered if undelivered else report.retired).append(pending_id)
    if problems:
        raise RecoveryError("clarification startup recovery failed: " + "; ".join(problems))
    return report


# --- step 1: reservation turns ------------------------------------------------------------


def _reserved() -> Any:
    return json_truthy(turns.c.metadata, kinds.DISPATCH_PENDING_KEY)


async def _pending_reservation_ids(db: Database) -> list[str]:
    async with db.read() as conn:
        query = select(turns.c.id).where(_reserved()).order_by(turns.c.started_at, turns.c.id)
        return list((await conn.execute(query)).scalars().all())


async def _load_reservation(conn: AsyncConnection, turn_id: str) -> _Reservation | None:
    row = (
        await conn.execute(
            select(
                turns.c.session_id,
                turns.c.metadata,
                turn_is_authoritative().label("authoritative"),
            ).where(turns.c.id == turn_id, _reserved())
        )
    ).first()
    if row is None:
        return None
    meta: dict[str, Any] = row.metadata if isinstance(row.metadata, dict) else {}
    keys = (
        kinds.DISPATCH_PENDING_ID_KEY,
        kinds.DISPATCH_TURN_ID_KEY,
        kinds.DISPATCH_MESSAGE_IDS_KEY,
    )
    if not any(k in meta for k in keys):
        return _Reservation(turn_id, row.session_id, bool(row.authoritative), None, "", ())
    pending_id = meta.get(kinds.DISPATCH_PENDING_ID_KEY)
    clarification_turn_id = meta.get(kinds.DISPATCH_TURN_ID_KEY)
    message_ids = meta.get(kinds.DISPATCH_MESSAGE_IDS_KEY)

    def malformed(detail: str) -> RecoveryError:
        return RecoveryError(
            f"reservation turn {turn_id} (pending_id {pending_id!r}): malformed recovery "
            f"metadata: {detail}"
        )

    if not isinstance(pending_id, str) or not pending_id:
        raise malformed("missing pending_id")
    if not isinstance(clarification_turn_id, str) or not clarification_turn_id:
        raise malformed("missing clarification turn id")
    if not isinstance(message_ids, list) or not message_ids:
        raise malformed("missing message ids")
    if any(not isinstance(i, str) or not i for i in message_ids):
        raise malformed("a message id is empty or not a string")
    if len(set(message_ids)) != len(message_ids):
        raise malformed("duplicate message ids")
    return _Reservation(
        turn_id,
        row.session_id,
        bool(row.authoritative),
        pending_id,
        clarification_turn_id,
        tuple(message_ids),
    )


async def _settle_reservation(
    conn: AsyncConnection, db: Database, turn_id: str, now: datetime
) -> bool | None:
    """True: kept (an ordinary turn now), False: deleted; None: no longer a reservation."""
    found = await _load_reservation(conn, turn_id)
    if found is None:
        return None
    await lock_session_turns(conn, db, [found.session_id])
    reservation = await _load_reservation(conn, turn_id)  # as of holding the lock
    if reservation is None:
        return None
    if reservation.authoritative:
        if reservation.pending_id is not None:
            await _check_reserved_claim(conn, reservation)
        await conn.execute(
            update(turns)
            .where(turns.c.id == turn_id)
            .values(
                metadata=json_set_keys(
                    json_remove_keys(turns.c.metadata, list(kinds.DISPATCH_KEYS)),
                    {kinds.START_EVENT_PENDING_KEY: True},
                ),
                updated_at=now,
            )
        )
        return True
    if reservation.pending_id is not None:
        await _reserved_rows(conn, reservation)
    if not await delete_reservation(conn, turn_id):
        raise RecoveryError(f"reservation turn {turn_id} could not be deleted")
    return False


async def _reserved_rows(conn: AsyncConnection, reservation: _Reservation) -> list[Any]:
    """The reserved rows, each checked to belong to the recorded bundle and turn."""
    rows = (
        (await conn.execute(select(messages).where(messages.c.id.in_(reservation.message_ids))))
        .mappings()
        .all()
    )
    for row in rows:
        meta = row["metadata"] if isinstance(row["metadata"], dict) else {}
        if (
            row["type"] != kinds.CLARIFICATION_TYPE
            or meta.get(kinds.PENDING_ID_KEY) != reservation.pending_id
            or row["turn_id"] != reservation.clarification_turn_id
        ):
            raise RecoveryError(
                f"reservation turn {reservation.turn_id}: message {row['id']} is not a row "
                f"of clarification {reservation.pending_id} on turn "
                f"{reservation.clarification_turn_id}"
            )
    return list(rows)


async def _check_reserved_claim(conn: AsyncConnection, reservation: _Reservation) -> None:
    """The reserved rows must all exist, carry one claim outcome, and be the only rows of
    the bundle that still carry an intent; the rows themselves are left to step 2."""
    rows = await _reserved_rows(conn, reservation)
    where = f"reservation turn {reservation.turn_id} (pending_id {reservation.pending_id})"
    if {r["id"] for r in rows} != set(reservation.message_ids):
        raise RecoveryError(f"{where}: reserved messages are missing")
    outcomes = {r["metadata"].get(kinds.STATUS_KEY) for r in rows}
    if len(outcomes) != 1 or not outcomes <= set(kinds.CLAIM_STATUSES):
        raise RecoveryError(f"{where}: reserved messages are not all answered or rejected")
    stray = [
        m.id
        for m in await find_delivery_intent_messages(conn, reservation.pending_id or "")
        if m.id not in reservation.message_ids
    ]
    if stray:
        raise RecoveryError(f"{where}: message {stray[0]} carries an unreserved intent")


# --- step 2: delivery intents -------------------------------------------------------------


async def _delivery_intents(db: Database) -> tuple[list[str], list[str]]:
    """(pending_ids to settle, ids of intent rows without a pending_id).

    Bundles a still-pending reservation refers to are left to that reservation.
    """
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(
                    messages.c.id, json_key_text(messages.c.metadata, kinds.PENDING_ID_KEY)
                ).where(
                    of_type(kinds.CLARIFICATION_TYPE),
                    json_truthy(messages.c.metadata, kinds.DELIVERY_PENDING_KEY),
                )
            )
        ).all()
        reserved = set(
            (
                await conn.execute(
                    select(json_key_text(turns.c.metadata, kinds.DISPATCH_PENDING_ID_KEY)).where(
                        _reserved()
                    )
                )
            )
            .scalars()
            .all()
        )
    pending_ids = sorted({p for _, p in rows if p} - reserved)
    orphans = sorted(m for m, p in rows if not p)
    return pending_ids, orphans


async def _settle_delivery(conn: AsyncConnection, db: Database, pending_id: str) -> bool | None:
    """True: undelivered (to resume); False: retired; None: nothing left to do."""
    carrying = await find_delivery_intent_messages(conn, pending_id)
    if not carrying:
        return None
    statuses = {m.metadata.get(kinds.STATUS_KEY) for m in carrying}
    terminal = next(iter(statuses)) if len(statuses) == 1 else None
    if terminal is None or terminal not in kinds.CLAIM_STATUSES:
        raise RecoveryError(
            f"clarification {pending_id}: delivery intent on rows with statuses "
            f"{sorted(str(s) for s in statuses)}"
        )
    session_ids = {m.session_id for m in carrying}
    live = (
        await conn.execute(
            select(sessions.c.id).where(
                sessions.c.id.in_(session_ids), sessions.c.state.not_in(TERMINAL_STATES)
            )
        )
    ).all()
    if len(session_ids) == 1 and live:
        return True  # the agent gets it as a resumed turn once the server runs
    ids = [m.id for m in carrying]
    if await finalize_delivery(conn, db, pending_id, terminal, ids, kinds.VIA_RETIRED) is None:
        raise RecoveryError(f"clarification {pending_id}: delivery intent could not be retired")
    return False


# --- sessions whose agent died with the previous server -----------------------------------

# What an agent process was doing when the server went away; nothing runs it any more.
AGENT_GONE_STATES = (STARTING, RUNNING, WAITING_FOR_INPUT)


@dataclass
class SessionSettlement:
    idle: list[str] = field(default_factory=list)  # wait for a prompt (relaunch on it)
    waiting: list[str] = field(default_factory=list)  # wait for the answer to an open question


async def settle_sessions_on_startup(db: Database, now: datetime) -> SessionSettlement:
    """Every session in AGENT_GONE_STATES: open turns completed, the pending questions of
    its current turn detached (still answerable, §3.5), its open tool calls INTERRUPTED, and
    its state IDLE — or WAITING_FOR_INPUT while such a question is open, so it is listed and
    an answer resumes the agent. One transaction, six statements (five on SQLite), whatever
    the number of sessions; events are not published (nobody can be subscribed before the
    server runs, and an event stream of the previous server gets `stream.reset`)."""
    gone = select(sessions.c.id).where(sessions.c.state.in_(AGENT_GONE_STATES))
    async with db.write() as conn:
        if db.is_postgres:
            # The per-session current-turn lock (kandev.sessions.turns.lock_session_turns),
            # taken for all of them in one statement, in the same sorted order.
            ordered = gone.order_by(sessions.c.id).subquery("gone")
            key = literal("task-session-turn:") + ordered.c.id
            await conn.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))
        await conn.execute(
            update(turns)
            .where(turns.c.session_id.in_(gone), turns.c.completed_at.is_(None))
            .values(completed_at=now, updated_at=now)
        )
        await conn.execute(
            update(messages)
            .where(
                messages.c.session_id.in_(gone),
                of_type(kinds.CLARIFICATION_TYPE),
                is_pending(),
                not_(json_truthy(messages.c.metadata, kinds.AGENT_DISCONNECTED_KEY)),
                on_current_turn(),
            )
            .values(
                metadata=json_set_keys(messages.c.metadata, {kinds.AGENT_DISCONNECTED_KEY: True}),
                updated_at=now,
            )
        )
        # Their agents' tool calls still open will never finish (the process is gone).
        await interrupt_open_tool_calls(conn, gone, now)
        open_question = (
            exists()
            .where(
                messages.c.session_id == sessions.c.id,
                of_type(kinds.CLARIFICATION_TYPE),
                is_pending(),
                on_current_turn(),
            )
            .correlate(sessions)
        )
        settled = (
            await conn.execute(
                update(sessions)
                .where(sessions.c.state.in_(AGENT_GONE_STATES))
                .values(
                    state=case((open_question, WAITING_FOR_INPUT), else_=IDLE),
                    updated_at=now,
                )
                .returning(sessions.c.id, sessions.c.state)
            )
        ).all()
    result = SessionSettlement()
    for session_id, state in sorted(settled):
        (result.waiting if state == WAITING_FOR_INPUT else result.idle).append(session_id)
    return result
