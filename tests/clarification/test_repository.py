"""Durable clarification rows (reference §1 to §3.6, §10.2) on SQLite and PostgreSQL.

Concurrency is real: every claimer opens its own `db.write()` transaction on its own
connection. The helpers at the top are shared with test_recovery.py.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import insert, select, text, update

from kandev.catalog import messages as kinds
from kandev.catalog.messages import ANSWERED, PENDING, REJECTED
from kandev.clarification import bundles, claims, reservations
from kandev.clarification.claims import ClarificationStateError
from kandev.clock import ManualClock
from kandev.db.engine import Database
from kandev.db.tables import task_session_messages, task_session_turns, task_sessions, tasks
from kandev.pending.projection import session_pending_action, task_pending_action
from kandev.pending.view import view_of_sessions
from kandev.sessions.models import Message
from kandev.sessions.turns import current_turn_id

T0 = ManualClock().now()
_ids = itertools.count(1)


def at(seconds: float) -> Any:
    return T0 + timedelta(seconds=seconds)


def new_id() -> str:
    return f"msg-{next(_ids):06d}"


def questions(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i}",
            "title": f"T{i}",
            "prompt": f"Question {i}?",
            "options": [
                {"option_id": f"q{i}_opt1", "label": "Yes", "description": "do it"},
                {"option_id": f"q{i}_opt2", "label": "No", "description": "skip it"},
            ],
        }
        for i in range(1, n + 1)
    ]


def answers_for(rows: list[Message]) -> dict[str, dict[str, Any]]:
    return {
        r.metadata["question_id"]: {
            "question_id": r.metadata["question_id"],
            "selected_options": [f"{r.metadata['question_id']}_opt1"],
        }
        for r in rows
        if r.metadata.get("question_id")
    }


async def seed_session(db: Database, session_id: str = "s1", state: str = "RUNNING") -> None:
    async with db.write() as conn:
        await conn.execute(
            insert(tasks).values(id=f"task-{session_id}", title="t", created_at=T0, updated_at=T0)
        )
        await conn.execute(
            insert(task_sessions).values(
                id=session_id,
                task_id=f"task-{session_id}",
                state=state,
                started_at=T0,
                updated_at=T0,
            )
        )


async def seed_turn(
    db: Database,
    turn_id: str,
    session_id: str = "s1",
    *,
    started: float = 0,
    metadata: dict[str, Any] | None = None,
) -> None:
    async with db.write() as conn:
        await conn.execute(
            insert(task_session_turns).values(
                id=turn_id,
                session_id=session_id,
                task_id=f"task-{session_id}",
                started_at=at(started),
                created_at=at(started),
                updated_at=at(started),
                metadata=metadata or {},
            )
        )


async def seed_bundle(
    db: Database,
    pending_id: str,
    session_id: str = "s1",
    turn_id: str = "turn-1",
    *,
    n: int = 2,
    when: float = 1,
) -> list[Message]:
    async with db.write() as conn:
        return await bundles.insert_bundle(
            conn,
            pending_id=pending_id,
            session_id=session_id,
            task_id=f"task-{session_id}",
            turn_id=turn_id,
            questions=questions(n),
            context="ctx",
            now=at(when),
            new_id=new_id,
        )


async def seed_message(
    db: Database,
    message_id: str,
    *,
    session_id: str = "s1",
    turn_id: str = "turn-1",
    type: str = kinds.CLARIFICATION_TYPE,
    metadata: dict[str, Any] | None = None,
    when: float = 1,
) -> None:
    async with db.write() as conn:
        await conn.execute(
            insert(task_session_messages).values(
                id=message_id,
                session_id=session_id,
                task_id=f"task-{session_id}",
                turn_id=turn_id,
                author_type="agent",
                type=type,
                content=message_id,
                metadata=metadata or {},
                created_at=at(when),
                updated_at=at(when),
            )
        )


async def set_metadata(db: Database, message_id: str, **changes: Any) -> None:
    async with db.write() as conn:
        meta = (
            await conn.execute(
                select(task_session_messages.c.metadata).where(
                    task_session_messages.c.id == message_id
                )
            )
        ).scalar_one()
        await conn.execute(
            update(task_session_messages)
            .where(task_session_messages.c.id == message_id)
            .values(metadata={**meta, **changes})
        )


async def set_state(db: Database, session_id: str, state: str) -> None:
    async with db.write() as conn:
        await conn.execute(
            update(task_sessions).where(task_sessions.c.id == session_id).values(state=state)
        )


async def bundle(db: Database, pending_id: str) -> list[Message]:
    async with db.read() as conn:
        return await bundles.find_bundle_messages(conn, pending_id)


async def statuses(db: Database, pending_id: str) -> list[str | None]:
    return [m.metadata.get("status") for m in await bundle(db, pending_id)]


async def claim(
    db: Database,
    pending_id: str,
    status: str = ANSWERED,
    *,
    when: float = 100,
    responses: dict[str, dict[str, Any]] | None = None,
) -> list[Message] | None:
    if status == ANSWERED and responses is None:
        responses = answers_for(await bundle(db, pending_id))
    async with db.write() as conn:
        attempt = await claims.attempt_claim(conn, db, pending_id, status, responses, at(when))
        return attempt.claimed


async def restore(
    db: Database, pending_id: str, ids: list[str], terminal: str = ANSWERED, when: float = 200
) -> list[Message] | None:
    async with db.write() as conn:
        return await claims.restore_active_bundle(conn, db, pending_id, terminal, ids, at(when))


async def finalize(
    db: Database, pending_id: str, ids: list[str], terminal: str = ANSWERED
) -> list[Message] | None:
    async with db.write() as conn:
        return await claims.finalize_delivery(conn, db, pending_id, terminal, ids)


async def actions(db: Database, session_ids: list[str]) -> dict[str, str]:
    """The pending-action projection, as the one describing read (pending.view) gives it."""
    async with db.read() as conn:
        view = await view_of_sessions(conn, session_ids)
    found = {sid: view.pending_action(sid) for sid in session_ids}
    return {sid: action for sid, action in found.items() if action is not None}


async def active_ids(db: Database, session_id: str = "s1") -> list[str]:
    async with db.read() as conn:
        return [m.id for m in await bundles.find_active_messages(conn, session_id)]


async def one_session_bundle(db: Database, pending_id: str = "p1", n: int = 2) -> list[Message]:
    await seed_session(db)
    await seed_turn(db, "turn-1")
    return await seed_bundle(db, pending_id, n=n)


# --- creation and reads -------------------------------------------------------------------


async def test_insert_bundle_writes_one_pending_row_per_question(db: Database) -> None:
    rows = await one_session_bundle(db, n=3)
    stored = await bundle(db, "p1")
    assert [m.id for m in stored] == [m.id for m in rows]
    assert [m.content for m in stored] == ["Question 1?", "Question 2?", "Question 3?"]
    assert [m.requests_input for m in stored] == [False, False, True]
    first = stored[0]
    assert (first.type, first.author_type, first.turn_id, first.task_id) == (
        "clarification_request",
        "agent",
        "turn-1",
        "task-s1",
    )
    assert first.metadata == {
        "pending_id": "p1",
        "question_id": "q1",
        "question": questions(3)[0],
        "question_index": 0,
        "question_total": 3,
        "context": "ctx",
        "status": "pending",
    }
    assert [m.metadata["question_index"] for m in stored] == [0, 1, 2]
    assert stored == rows  # the returned Messages are what was stored


async def test_active_rows_are_pending_rows_of_the_current_turn(db: Database) -> None:
    await one_session_bundle(db)
    await seed_message(db, "absent", metadata={"pending_id": "p2"}, when=2)
    await seed_message(db, "empty", metadata={"pending_id": "p3", "status": ""}, when=3)
    await seed_message(db, "null", metadata={"pending_id": "p4", "status": None}, when=4)
    await seed_message(db, "weird", metadata={"pending_id": "p5", "status": "weird"}, when=5)
    await seed_message(db, "done", metadata={"pending_id": "p6", "status": ANSWERED}, when=6)
    await seed_message(
        db, "other-type", type="permission_request", metadata={"pending_id": "p7"}, when=7
    )
    p1 = [m.id for m in await bundle(db, "p1")]
    assert await active_ids(db) == [*p1, "absent", "empty", "null"]
    # A terminal session is not this lookup's business (§1.5): the rows are still listed.
    await set_state(db, "s1", "COMPLETED")
    assert await active_ids(db) == [*p1, "absent", "empty", "null"]


async def test_a_newer_turn_supersedes_active_rows_and_a_reservation_does_not(
    db: Database,
) -> None:
    await one_session_bundle(db)
    await seed_turn(db, "reservation", started=5, metadata={"prompt_dispatch_pending": True})
    assert len(await active_ids(db)) == 2
    await seed_turn(db, "turn-2", started=6)
    assert await active_ids(db) == []


# --- the claim ------------------------------------------------------------------------------


@pytest.mark.parametrize("claimers", [2, 20])
async def test_concurrent_claims_have_exactly_one_winner(db: Database, claimers: int) -> None:
    rows = await one_session_bundle(db)
    responses = answers_for(rows)
    results: list[list[Message] | None] = []

    async def claimer() -> None:
        async with db.write() as conn:
            results.append(
                (await claims.attempt_claim(conn, db, "p1", ANSWERED, responses, at(100))).claimed
            )

    async with anyio.create_task_group() as group:
        for _ in range(claimers):
            group.start_soon(claimer)
    winners = [r for r in results if r is not None]
    assert len(results) == claimers
    assert len(winners) == 1
    stored = await bundle(db, "p1")
    assert winners[0] == stored
    for row in stored:
        assert row.metadata["status"] == ANSWERED
        assert row.metadata["response"] == responses[row.metadata["question_id"]]
        assert row.metadata["response_delivery_pending"] is True
        assert row.updated_at == at(100)


async def test_claim_rejected_writes_no_response(db: Database) -> None:
    await one_session_bundle(db)
    claimed = await claim(db, "p1", REJECTED)
    assert claimed is not None
    assert [m.metadata["status"] for m in claimed] == [REJECTED, REJECTED]
    assert all("response" not in m.metadata for m in claimed)
    assert all(m.metadata["response_delivery_pending"] is True for m in claimed)


async def test_loser_sees_nothing_written(db: Database) -> None:
    await one_session_bundle(db)
    assert await claim(db, "p1", when=100) is not None
    before = await bundle(db, "p1")
    assert await claim(db, "p1", REJECTED, when=150) is None
    assert await bundle(db, "p1") == before


async def test_superseded_bundle_is_not_claimable(db: Database) -> None:
    await one_session_bundle(db)
    await seed_turn(db, "turn-2", started=5)
    assert await claim(db, "p1") is None
    assert await statuses(db, "p1") == [PENDING, PENDING]
    assert await actions(db, ["s1"]) == {}


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED", "CANCELLED"])
async def test_terminal_session_bundle_is_not_claimable(db: Database, state: str) -> None:
    await one_session_bundle(db)
    await set_state(db, "s1", state)
    assert await claim(db, "p1") is None
    assert await statuses(db, "p1") == [PENDING, PENDING]
    assert await actions(db, ["s1"]) == {}


async def test_detached_bundle_is_claimable(db: Database) -> None:
    await one_session_bundle(db)
    async with db.write() as conn:
        assert len(await claims.detach_active(conn, db, "s1", at(50))) == 2
    claimed = await claim(db, "p1")
    assert claimed is not None
    assert all(m.metadata["agent_disconnected"] is True for m in claimed)


async def test_mixed_bundle_claims_and_restores_only_pending_rows(db: Database) -> None:
    rows = await one_session_bundle(db, n=3)
    legacy = {"question_id": "q1", "custom_text": "earlier"}
    await set_metadata(db, rows[0].id, status=ANSWERED, response=legacy)
    claimed = await claim(db, "p1", when=100)
    assert claimed is not None
    assert [m.id for m in claimed] == [rows[1].id, rows[2].id]
    restored = await restore(db, "p1", [m.id for m in claimed], when=200)
    assert restored is not None
    assert [m.id for m in restored] == [rows[1].id, rows[2].id]
    stored = await bundle(db, "p1")
    assert [m.metadata["status"] for m in stored] == [ANSWERED, PENDING, PENDING]
    assert stored[0].metadata["response"] == legacy
    assert stored[0].updated_at == rows[0].updated_at


async def test_malformed_bundle_is_not_claimable(db: Database) -> None:
    await one_session_bundle(db)
    # The same pending_id on another turn (which is not even current): never claimable.
    await seed_turn(db, "turn-0", started=-5)
    stray = {"pending_id": "p1", "question_id": "q9", "status": PENDING}
    await seed_message(db, "stray", turn_id="turn-0", metadata=stray)
    assert await claim(db, "p1") is None
    assert await statuses(db, "p1") == [PENDING, PENDING, PENDING]


async def test_bundle_sharing_its_id_with_another_type_is_not_claimable(db: Database) -> None:
    await one_session_bundle(db)
    await seed_message(db, "perm", type="permission_request", metadata={"pending_id": "p1"}, when=5)
    assert await claim(db, "p1") is None


async def test_claim_validates_status(db: Database) -> None:
    await one_session_bundle(db)
    with pytest.raises(ValueError, match="invalid clarification terminal status"):
        await claim(db, "p1", "expired")


async def test_failed_claim_leaves_no_responding_row_even_if_caught(db: Database) -> None:
    rows = await one_session_bundle(db)
    async with db.write() as conn:
        with pytest.raises(ClarificationStateError, match="missing response for"):
            await claims.attempt_claim(
                conn, db, "p1", ANSWERED, {"q1": {"question_id": "q1"}}, at(100)
            )
        # Same transaction, after the caught error: nothing of the claim is left.
        assert await bundles.find_bundle_messages(conn, "p1") == rows
    assert await bundle(db, "p1") == rows


async def test_claim_requires_flat_question_id(db: Database) -> None:
    rows = await one_session_bundle(db)
    await set_metadata(db, rows[1].id, question_id="")
    with pytest.raises(ClarificationStateError, match=f"{rows[1].id} is missing question_id"):
        await claim(db, "p1", REJECTED)
    assert await statuses(db, "p1") == [PENDING, PENDING]


# --- finalize and restore -------------------------------------------------------------------


async def test_finalize_clears_the_intent_and_keeps_updated_at(db: Database) -> None:
    await one_session_bundle(db)
    claimed = await claim(db, "p1", when=100)
    assert claimed is not None
    ids = [m.id for m in claimed]
    assert await finalize(db, "p1", ids, REJECTED) is None  # wrong terminal status
    assert await finalize(db, "p1", ids[:1]) is None  # not the whole claimed set
    done = await finalize(db, "p1", ids)
    assert done is not None
    for row in done:
        assert "response_delivery_pending" not in row.metadata
        assert row.metadata["status"] == ANSWERED and "response" in row.metadata
        assert row.updated_at == at(100)
    assert await bundle(db, "p1") == done
    assert await finalize(db, "p1", ids) is None  # nothing left to finalize
    assert await restore(db, "p1", ids) is None  # a finalized answer is never restored


async def test_finalize_and_restore_validate_their_arguments(db: Database) -> None:
    await one_session_bundle(db)
    for bad in ([], ["a", "a"], [""]):
        with pytest.raises(ValueError):
            await finalize(db, "p1", bad)
        with pytest.raises(ValueError):
            await restore(db, "p1", bad)
    with pytest.raises(ValueError):
        await finalize(db, "p1", ["a"], "pending")


async def test_restore_makes_a_claimed_bundle_claimable_again(db: Database) -> None:
    rows = await one_session_bundle(db)
    async with db.write() as conn:
        await claims.detach_active(conn, db, "s1", at(50))
    claimed = await claim(db, "p1", when=100)
    assert claimed is not None
    restored = await restore(db, "p1", [m.id for m in claimed], when=200)
    assert restored is not None
    for row in restored:
        assert row.metadata["status"] == PENDING
        assert "response" not in row.metadata
        assert "response_delivery_pending" not in row.metadata
        assert row.metadata["agent_disconnected"] is True
        assert row.updated_at == at(200)
    assert await active_ids(db) == [m.id for m in rows]
    assert await claim(db, "p1", REJECTED, when=300) is not None


async def test_restore_is_refused_after_supersession(db: Database) -> None:
    await one_session_bundle(db)
    claimed = await claim(db, "p1")
    assert claimed is not None
    await seed_turn(db, "turn-2", started=5)
    assert await restore(db, "p1", [m.id for m in claimed]) is None
    assert await statuses(db, "p1") == [ANSWERED, ANSWERED]


async def test_restore_is_refused_after_the_session_ended(db: Database) -> None:
    await one_session_bundle(db)
    claimed = await claim(db, "p1")
    assert claimed is not None
    await set_state(db, "s1", "FAILED")
    assert await restore(db, "p1", [m.id for m in claimed]) is None
    assert await statuses(db, "p1") == [ANSWERED, ANSWERED]


async def test_restore_needs_every_claimed_row_in_the_claimed_status(db: Database) -> None:
    await one_session_bundle(db)
    claimed = await claim(db, "p1")
    assert claimed is not None
    ids = [m.id for m in claimed]
    assert await restore(db, "p1", ids, REJECTED) is None
    assert await restore(db, "p1", [*ids, "unknown"]) is None
    assert await statuses(db, "p1") == [ANSWERED, ANSWERED]


# --- detach, expire, cancel -----------------------------------------------------------------


async def test_detach_marks_only_current_pending_rows_not_yet_detached(db: Database) -> None:
    await seed_session(db, "s1")
    await seed_session(db, "s2")
    await seed_turn(db, "old", started=0)
    await seed_turn(db, "turn-1", started=1)
    await seed_turn(db, "other", "s2", started=1)
    superseded = await seed_bundle(db, "p-old", turn_id="old", n=1)
    current = await seed_bundle(db, "p1", n=3, when=2)
    theirs = await seed_bundle(db, "p2", "s2", "other", n=1)
    await set_metadata(db, current[0].id, status=ANSWERED)
    await set_metadata(db, current[1].id, agent_disconnected="true")
    async with db.write() as conn:
        changed = await claims.detach_active(conn, db, "s1", at(50))
    assert [m.id for m in changed] == [current[2].id]
    assert changed[0].metadata["agent_disconnected"] is True
    assert changed[0].metadata["status"] == PENDING
    assert changed[0].updated_at == at(50)
    assert await bundle(db, "p-old") == superseded
    assert await bundle(db, "p2") == theirs
    async with db.write() as conn:
        assert await claims.detach_active(conn, db, "s1", at(60)) == []


@pytest.mark.parametrize("flag", [True, "true", "1", 1])
async def test_every_truthy_encoding_counts_as_detached(db: Database, flag: Any) -> None:
    rows = await one_session_bundle(db, n=1)
    await set_metadata(db, rows[0].id, agent_disconnected=flag)
    async with db.write() as conn:
        assert await claims.detach_active(conn, db, "s1", at(50)) == []


async def test_expire_touches_only_current_pending_rows_of_the_session(db: Database) -> None:
    await seed_session(db, "s1")
    await seed_session(db, "s2")
    await seed_turn(db, "old", started=0)
    await seed_turn(db, "turn-1", started=1)
    await seed_turn(db, "other", "s2", started=1)
    superseded = await seed_bundle(db, "p-old", turn_id="old", n=1)
    first = await seed_bundle(db, "p1", n=2, when=2)
    second = await seed_bundle(db, "p3", n=1, when=3)
    theirs = await seed_bundle(db, "p2", "s2", "other", n=1)
    await set_metadata(db, first[0].id, status=ANSWERED, response={"question_id": "q1"})
    answered = (await bundle(db, "p1"))[0]
    async with db.write() as conn:
        changed = await claims.expire_active_bundles(conn, db, "s1", at(50))
    assert [m.id for m in changed] == [first[1].id, second[0].id]
    for row in changed:
        assert row.metadata["status"] == "expired"
        assert row.metadata["agent_disconnected"] is True
        assert row.updated_at == at(50)
    assert (await bundle(db, "p1"))[0] == answered
    assert await bundle(db, "p-old") == superseded
    assert await bundle(db, "p2") == theirs
    async with db.write() as conn:
        assert await claims.expire_active_bundles(conn, db, "s1", at(60)) == []


async def test_cancel_bundle_cancels_pending_rows_only(db: Database) -> None:
    rows = await one_session_bundle(db)
    await set_metadata(db, rows[0].id, status=ANSWERED)
    async with db.write() as conn:
        changed = await claims.cancel_bundle(conn, db, "p1", at(50))
    assert [m.id for m in changed] == [rows[1].id]
    assert await statuses(db, "p1") == [ANSWERED, "cancelled"]
    async with db.write() as conn:
        assert await claims.cancel_bundle(conn, db, "p1", at(60)) == []


# --- pending-action projection -----------------------------------------------------------


async def _permission(db: Database, message_id: str, session_id: str, when: float, **meta: Any):
    await seed_message(
        db,
        message_id,
        session_id=session_id,
        turn_id=f"turn-{session_id}",
        type="permission_request",
        metadata=meta,
        when=when,
    )


async def test_pending_action_projection(db: Database) -> None:
    for sid in ("clar", "perm", "both", "ended", "old", "approved", "clean"):
        await seed_session(db, sid)
        await seed_turn(db, f"turn-{sid}", sid, started=1)
    await seed_bundle(db, "p-clar", "clar", "turn-clar")
    await _permission(db, "perm-1", "perm", 2, status="pending")
    await _permission(db, "both-1", "both", 2)
    await seed_bundle(db, "p-both", "both", "turn-both", when=3)
    await seed_bundle(db, "p-ended", "ended", "turn-ended")
    await set_state(db, "ended", "COMPLETED")
    await seed_bundle(db, "p-old", "old", "turn-old")
    await seed_turn(db, "turn-old-2", "old", started=5)
    await _permission(db, "approved-1", "approved", 2)
    await _permission(db, "approved-2", "approved", 3, status="approved")
    sessions = ["clar", "perm", "both", "ended", "old", "approved", "clean", "missing"]
    assert await actions(db, sessions) == {
        "clar": "clarification",
        "perm": "permission",
        "both": "clarification",
    }
    assert await actions(db, []) == {}


def test_task_pending_action_aggregates_input_capable_sessions() -> None:
    acts = {"a": "clarification", "b": "permission", "c": "permission"}
    assert task_pending_action([("a", "RUNNING"), ("b", "WAITING_FOR_INPUT")], acts) == (
        "permission"
    )
    assert task_pending_action([("a", "WAITING_FOR_INPUT"), ("c", "IDLE")], acts) == (
        "clarification"
    )
    assert task_pending_action([("c", "COMPLETED"), ("x", "RUNNING")], acts) is None
    assert task_pending_action([], acts) is None
    assert session_pending_action("b", acts) == "permission"
    assert session_pending_action("x", acts) is None
    assert session_pending_action(None, acts) is None


# --- reservation turns ----------------------------------------------------------------------


async def reserve(db: Database, message_ids: list[str], turn_id: str = "resume") -> None:
    async with db.write() as conn:
        await reservations.reserve_resume_turn(
            conn,
            db,
            turn_id=turn_id,
            session_id="s1",
            task_id="task-s1",
            pending_id="p1",
            clarification_turn_id="turn-1",
            message_ids=message_ids,
            now=at(150),
        )


async def turn_metadata(db: Database, turn_id: str) -> dict[str, Any] | None:
    async with db.read() as conn:
        return (
            await conn.execute(
                select(task_session_turns.c.metadata).where(task_session_turns.c.id == turn_id)
            )
        ).scalar_one_or_none()


async def current(db: Database) -> str | None:
    async with db.read() as conn:
        return await current_turn_id(conn, "s1")


async def test_reservation_lifecycle(db: Database) -> None:
    await one_session_bundle(db)
    claimed = await claim(db, "p1")
    assert claimed is not None
    ids = [m.id for m in claimed]
    await reserve(db, ids)
    assert await turn_metadata(db, "resume") == {
        "prompt_dispatch_pending": True,
        "prompt_dispatch_clarification_pending_id": "p1",
        "prompt_dispatch_clarification_turn_id": "turn-1",
        "prompt_dispatch_clarification_message_ids": ids,
    }
    assert await current(db) == "turn-1"  # private until attempted
    async with db.write() as conn:
        assert await reservations.mark_dispatch_attempted(conn, "resume", at(160))
    assert await current(db) == "resume"
    async with db.write() as conn:
        assert not await reservations.delete_reservation(conn, "resume")  # attempted: kept
        assert await reservations.publish_reservation(conn, "resume", at(170))
    assert await turn_metadata(db, "resume") == {}
    assert await current(db) == "resume"
    assert await restore(db, "p1", ids) is None  # the answer's turn is superseded now


async def test_unattempted_empty_reservation_can_be_deleted_and_the_claim_restored(
    db: Database,
) -> None:
    await one_session_bundle(db)
    claimed = await claim(db, "p1")
    assert claimed is not None
    await reserve(db, [m.id for m in claimed])
    async with db.write() as conn:
        assert await reservations.delete_reservation(conn, "resume")
        assert not await reservations.delete_reservation(conn, "resume")
    assert await turn_metadata(db, "resume") is None
    assert await restore(db, "p1", [m.id for m in claimed]) is not None


async def test_reservation_with_a_message_is_not_deleted(db: Database) -> None:
    await one_session_bundle(db)
    await reserve(db, ["x"])
    await seed_message(db, "prompt", turn_id="resume", type="message", when=160)
    async with db.write() as conn:
        assert not await reservations.delete_reservation(conn, "resume")
    assert await current(db) == "resume"


# --- PostgreSQL: a claim against a concurrent terminal-state write -------------------------


async def wait_for_lock_waiter(db: Database) -> None:
    """Until some backend of this database waits on a lock (polling, never sleeping)."""
    deadline = anyio.current_time() + 20
    while anyio.current_time() < deadline:
        async with db.read() as conn:  # a fresh transaction: pg_stat_activity is re-read
            waiting = (
                await conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                )
            ).scalar_one()
        if waiting:
            return
    raise AssertionError("no transaction started waiting on a lock")


@pytest.mark.parametrize("writer_takes_turn_lock", [False, True])
async def test_pg_claim_waits_for_a_concurrent_terminal_session_write(
    db: Database, writer_takes_turn_lock: bool
) -> None:
    if not db.is_postgres:
        pytest.skip("PostgreSQL row locks; SQLite serializes whole write transactions")
    await one_session_bundle(db)
    results: list[list[Message] | None] = []

    async def claimer() -> None:
        results.append(await claim(db, "p1"))

    async with anyio.create_task_group() as group, db.write() as conn:
        if writer_takes_turn_lock:
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
                {"k": "task-session-turn:s1"},
            )
        await conn.execute(
            update(task_sessions).where(task_sessions.c.id == "s1").values(state="COMPLETED")
        )
        group.start_soon(claimer)
        await wait_for_lock_waiter(db)
        # Leaving the block commits the terminal write while the claim waits on it.
    assert results == [None]
    assert await statuses(db, "p1") == [PENDING, PENDING]


async def test_pg_terminal_session_write_waits_for_a_claim_in_progress(db: Database) -> None:
    if not db.is_postgres:
        pytest.skip("PostgreSQL row locks; SQLite serializes whole write transactions")
    rows = await one_session_bundle(db)

    async def terminal_writer() -> None:
        async with db.write() as conn:
            await conn.execute(
                update(task_sessions).where(task_sessions.c.id == "s1").values(state="COMPLETED")
            )

    async with anyio.create_task_group() as group, db.write() as conn:
        claimed = (
            await claims.attempt_claim(conn, db, "p1", ANSWERED, answers_for(rows), at(100))
        ).claimed
        assert claimed is not None
        group.start_soon(terminal_writer)
        await wait_for_lock_waiter(db)  # the session row is ours until we commit
    assert await statuses(db, "p1") == [ANSWERED, ANSWERED]
    async with db.write() as conn:
        state = (
            await conn.execute(select(task_sessions.c.state).where(task_sessions.c.id == "s1"))
        ).scalar_one()
        assert state == "COMPLETED"
        # Expiry after the session ended never overwrites the answer.
        assert await claims.expire_active_bundles(conn, db, "s1", at(200)) == []


@pytest.mark.parametrize("reads_rows", [False, True], ids=["lock", "lock-and-read"])
async def test_pg_claim_takes_the_turn_lock_before_the_session_row(
    db: Database, reads_rows: bool
) -> None:
    """The claim's one lock statement (advisory lock in its select list, FOR UPDATE) must
    take the turn lock first, as writers that take them one after the other do: while it
    waits for the turn lock it holds no row lock (else the two orders could deadlock).
    `reads_rows`: the statement that also locks and reads the bundle's rows (the claim
    of a caller that knows the bundle's session, as the resolver does)."""
    if not db.is_postgres:
        pytest.skip("PostgreSQL lock order; SQLite serializes whole write transactions")
    rows = await one_session_bundle(db)
    results: list[list[Message] | None] = []

    async def claimer() -> None:
        async with db.write() as conn:
            held = await claims.lock_and_read_bundle(conn, db, "p1") if reads_rows else None
            attempt = await claims.attempt_claim(
                conn, db, "p1", ANSWERED, answers_for(rows), at(100), held=held
            )
        results.append(attempt.claimed)

    async with anyio.create_task_group() as group, db.write() as turn_holder:
        await turn_holder.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
            {"k": "task-session-turn:s1"},
        )
        group.start_soon(claimer)
        await wait_for_lock_waiter(db)
        # The claim waits on the turn lock: the session row is free (NOWAIT would fail).
        async with db.engine.connect() as other, other.begin():
            locked = await other.execute(
                text("SELECT id FROM task_sessions WHERE id = 's1' FOR UPDATE NOWAIT")
            )
            assert locked.scalar_one() == "s1"
            bundle_rows = await other.execute(
                text(
                    "SELECT id FROM task_session_messages WHERE session_id = 's1' FOR UPDATE NOWAIT"
                )
            )
            assert sorted(bundle_rows.scalars()) == sorted(m.id for m in rows)
    assert results and results[0] is not None  # it claimed once the turn lock was free


async def test_pg_a_losing_claim_reads_the_winners_rows_in_its_lock_statement(
    db: Database,
) -> None:
    """A claim that waited for the winner's commit on the bundle's locks gets the rows as
    the winner left them from its own lock statement (no read after the claim): PostgreSQL
    re-reads a row it locks at its newest version, not the version its snapshot saw."""
    if not db.is_postgres:
        pytest.skip("PostgreSQL row locks; SQLite serializes whole write transactions")
    rows = await one_session_bundle(db)
    winning = answers_for(rows)
    losing = {q: {**r, "selected_options": ["other"]} for q, r in winning.items()}
    attempts: list[claims.ClaimAttempt] = []

    async def loser() -> None:
        async with db.write() as conn:
            held = await claims.lock_and_read_bundle(conn, db, "p1")
            attempt = await claims.attempt_claim(
                conn, db, "p1", ANSWERED, losing, at(101), held=held
            )
            attempts.append(attempt)

    async with anyio.create_task_group() as group, db.write() as conn:
        won = (await claims.attempt_claim(conn, db, "p1", ANSWERED, winning, at(100))).claimed
        assert won is not None
        group.start_soon(loser)
        await wait_for_lock_waiter(db)  # the loser waits for our commit
    (attempt,) = attempts
    assert attempt.claimed is None
    assert attempt.seen is not None, "the rows read under the locks"
    assert [m.id for m in attempt.seen] == [m.id for m in rows]
    assert [m.metadata["status"] for m in attempt.seen] == [ANSWERED, ANSWERED]
    assert {m.metadata["question_id"]: m.metadata["response"] for m in attempt.seen} == winning


async def test_reservation_needs_its_recovery_identity(db: Database) -> None:
    await one_session_bundle(db)
    for pending_id, turn_id, ids in (("", "turn-1", ["m"]), ("p1", "", ["m"]), ("p1", "t", [])):
        with pytest.raises(ValueError):
            async with db.write() as conn:
                await reservations.reserve_resume_turn(
                    conn,
                    db,
                    turn_id="resume",
                    session_id="s1",
                    task_id="task-s1",
                    pending_id=pending_id,
                    clarification_turn_id=turn_id,
                    message_ids=ids,
                    now=at(150),
                )
    assert await turn_metadata(db, "resume") is None
