"""Startup recovery of claims and resume reservations (reference §3.10) on both databases.

Unlike the baseline, a claim is never restored to pending at startup: `respond` may already
have returned `claimed: true`, so an undelivered claim of a live session is reported for
delivery (a resumed turn) and keeps its intent until that delivery is confirmed.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update

from kandev.catalog.messages import ANSWERED, PENDING, REJECTED
from kandev.clarification import claims, reservations
from kandev.clarification.recovery import RecoveryError, RecoveryReport, recover_on_startup
from kandev.db.engine import Database
from kandev.db.tables import task_session_turns
from kandev.sessions.models import Message
from tests.clarification.test_repository import (
    active_ids,
    at,
    bundle,
    claim,
    current,
    finalize,
    one_session_bundle,
    reserve,
    seed_bundle,
    seed_message,
    seed_session,
    seed_turn,
    set_metadata,
    set_state,
    statuses,
    turn_metadata,
)

TRUTHY = [True, "true", "1", 1]


async def recover(db: Database) -> RecoveryReport:
    return await recover_on_startup(db, at(1000))


async def claimed_bundle(db: Database, status: str = ANSWERED) -> list[Message]:
    await one_session_bundle(db)
    async with db.write() as conn:
        await claims.detach_active(conn, db, "s1", at(50))
    claimed = await claim(db, "p1", status)
    assert claimed is not None
    return claimed


async def set_turn_metadata(db: Database, turn_id: str, metadata: dict[str, Any]) -> None:
    async with db.write() as conn:
        await conn.execute(
            update(task_session_turns)
            .where(task_session_turns.c.id == turn_id)
            .values(metadata=metadata)
        )


def assert_undelivered(rows: list[Message], claimed: list[Message], status: str = ANSWERED) -> None:
    """Still claimed, intent kept, nothing rewritten (the claim time stays responded_at)."""
    assert [r.id for r in rows] == [m.id for m in claimed]
    for row, before in zip(rows, claimed, strict=True):
        assert row.metadata["status"] == status
        assert row.metadata["response_delivery_pending"] is True
        assert row.updated_at == before.updated_at


def assert_retired(rows: list[Message], status: str = ANSWERED) -> None:
    for row in rows:
        assert row.metadata["status"] == status
        assert "response_delivery_pending" not in row.metadata


# --- step 2: delivery intents -------------------------------------------------------------


async def test_nothing_to_recover(db: Database) -> None:
    await one_session_bundle(db)
    assert await recover(db) == RecoveryReport()


@pytest.mark.parametrize("status", [ANSWERED, REJECTED])
async def test_undelivered_claim_is_kept_for_delivery_not_revived(
    db: Database, status: str
) -> None:
    claimed = await claimed_bundle(db, status)
    assert await recover(db) == RecoveryReport(undelivered=["p1"])
    assert_undelivered(await bundle(db, "p1"), claimed, status)
    assert await active_ids(db) == []  # never answerable again: the claim stands
    assert await claim(db, "p1", REJECTED, when=2000) is None
    # Until its delivery is confirmed, every start reports it again.
    assert await recover(db) == RecoveryReport(undelivered=["p1"])
    assert await finalize(db, "p1", [m.id for m in claimed], status) is not None
    assert await recover(db) == RecoveryReport()


async def test_superseded_claim_is_still_delivered(db: Database) -> None:
    claimed = await claimed_bundle(db)
    await seed_turn(db, "turn-2", started=5)
    assert await recover(db) == RecoveryReport(undelivered=["p1"])
    assert_undelivered(await bundle(db, "p1"), claimed)


async def test_claim_of_an_ended_session_is_retired(db: Database) -> None:
    claimed = await claimed_bundle(db)
    await set_state(db, "s1", "CANCELLED")
    assert await recover(db) == RecoveryReport(retired=["p1"])
    rows = await bundle(db, "p1")
    assert_retired(rows)
    assert all(r.metadata["response_delivered_via"] == "retired" for r in rows)
    assert [r.updated_at for r in rows] == [m.updated_at for m in claimed]
    assert await recover(db) == RecoveryReport()


async def test_finalized_claim_is_left_alone(db: Database) -> None:
    claimed = await claimed_bundle(db)
    assert await finalize(db, "p1", [m.id for m in claimed]) is not None
    before = await bundle(db, "p1")
    assert await recover(db) == RecoveryReport()
    assert await bundle(db, "p1") == before


async def test_mixed_intent_statuses_stop_the_start(db: Database) -> None:
    claimed = await claimed_bundle(db)
    await set_metadata(db, claimed[0].id, status=REJECTED)
    with pytest.raises(RecoveryError, match="clarification p1"):
        await recover(db)
    assert await statuses(db, "p1") == [REJECTED, ANSWERED]


@pytest.mark.parametrize("flag", TRUTHY)
async def test_every_truthy_intent_encoding_is_recovered(db: Database, flag: Any) -> None:
    claimed = await claimed_bundle(db)
    for row in claimed:
        await set_metadata(db, row.id, response_delivery_pending=flag)
    assert await recover(db) == RecoveryReport(undelivered=["p1"])
    assert await statuses(db, "p1") == [ANSWERED, ANSWERED]


# --- step 1: reservation turns ------------------------------------------------------------


@pytest.mark.parametrize("flag", TRUTHY)
async def test_empty_unattempted_reservation_is_deleted_and_its_claim_kept_for_delivery(
    db: Database, flag: Any
) -> None:
    claimed = await claimed_bundle(db)
    ids = [m.id for m in claimed]
    await reserve(db, ids)
    meta = await turn_metadata(db, "resume")
    assert meta is not None
    await set_turn_metadata(db, "resume", {**meta, "prompt_dispatch_pending": flag})
    report = await recover(db)
    assert report == RecoveryReport(undelivered=["p1"], deleted_reservations=["resume"])
    assert await turn_metadata(db, "resume") is None
    assert_undelivered(await bundle(db, "p1"), claimed)
    assert await current(db) == "turn-1"


async def test_deleted_reservation_leaves_every_row_as_it_was(db: Database) -> None:
    await one_session_bundle(db, n=3)
    rows = await bundle(db, "p1")
    await set_metadata(db, rows[0].id, status=ANSWERED, response={"question_id": "q1"})
    claimed = await claim(db, "p1")
    assert claimed is not None
    await reserve(db, [m.id for m in claimed])
    assert await recover(db) == RecoveryReport(undelivered=["p1"], deleted_reservations=["resume"])
    assert await statuses(db, "p1") == [ANSWERED, ANSWERED, ANSWERED]
    rows = await bundle(db, "p1")
    assert rows[0].metadata["response"] == {"question_id": "q1"}
    assert "response_delivery_pending" not in rows[0].metadata  # terminal before the claim
    assert [r.metadata.get("response_delivery_pending") for r in rows[1:]] == [True, True]


@pytest.mark.parametrize("flag", TRUTHY)
async def test_attempted_reservation_is_kept_and_its_answer_still_delivered(
    db: Database, flag: Any
) -> None:
    claimed = await claimed_bundle(db)
    ids = [m.id for m in claimed]
    await reserve(db, ids)
    meta = await turn_metadata(db, "resume")
    assert meta is not None
    await set_turn_metadata(db, "resume", {**meta, "prompt_dispatch_attempted": flag})
    report = await recover(db)
    # The prompt may not have reached the agent: the claim keeps its intent for a resume.
    assert report == RecoveryReport(undelivered=["p1"], kept_reservations=["resume"])
    assert await turn_metadata(db, "resume") == {"prompt_dispatch_start_event_pending": True}
    rows = await bundle(db, "p1")
    assert_undelivered(rows, claimed)
    assert all(r.metadata["response"] for r in rows)
    assert await current(db) == "resume"
    assert await recover(db) == RecoveryReport(undelivered=["p1"])


async def test_reservation_with_a_message_is_kept(db: Database) -> None:
    claimed = await claimed_bundle(db)
    await reserve(db, [m.id for m in claimed])
    await seed_message(db, "prompt", turn_id="resume", type="message", when=160)
    assert await recover(db) == RecoveryReport(undelivered=["p1"], kept_reservations=["resume"])
    assert_undelivered(await bundle(db, "p1"), claimed)


async def test_kept_reservation_whose_claim_was_already_finalized(db: Database) -> None:
    claimed = await claimed_bundle(db)
    ids = [m.id for m in claimed]
    await reserve(db, ids)
    async with db.write() as conn:
        await reservations.mark_dispatch_attempted(conn, "resume", at(160))
    assert await finalize(db, "p1", ids) is not None
    assert await recover(db) == RecoveryReport(kept_reservations=["resume"])
    assert_retired(await bundle(db, "p1"))


@pytest.mark.parametrize("attempted", [False, True])
async def test_reservation_without_a_clarification(db: Database, attempted: bool) -> None:
    await seed_session(db)
    await seed_turn(db, "turn-1")
    meta: dict[str, Any] = {"prompt_dispatch_pending": True}
    if attempted:
        meta["prompt_dispatch_attempted"] = "1"
    await seed_turn(db, "plain", started=5, metadata=meta)
    report = await recover(db)
    if attempted:
        assert report == RecoveryReport(kept_reservations=["plain"])
        assert await turn_metadata(db, "plain") == {"prompt_dispatch_start_event_pending": True}
    else:
        assert report == RecoveryReport(deleted_reservations=["plain"])
        assert await turn_metadata(db, "plain") is None


MALFORMED = {
    "empty message id": {"prompt_dispatch_clarification_message_ids": ["m", ""]},
    "non-string message id": {"prompt_dispatch_clarification_message_ids": [7]},
    "no message ids": {"prompt_dispatch_clarification_message_ids": []},
    "message ids not a list": {"prompt_dispatch_clarification_message_ids": "m"},
    "no pending id": {"prompt_dispatch_clarification_pending_id": ""},
    "no turn id": {"prompt_dispatch_clarification_turn_id": None},
}


@pytest.mark.parametrize("broken", MALFORMED.values(), ids=MALFORMED.keys())
async def test_malformed_reservation_stops_the_start_but_not_the_other_recoveries(
    db: Database, broken: dict[str, Any]
) -> None:
    claimed = await claimed_bundle(db)
    await reserve(db, [m.id for m in claimed])
    meta = await turn_metadata(db, "resume")
    assert meta is not None
    await set_turn_metadata(db, "resume", {**meta, **broken})
    # Another session's undelivered claim is still settled before the start is refused.
    await seed_session(db, "s2")
    await seed_turn(db, "turn-s2", "s2")
    await seed_bundle(db, "p2", "s2", "turn-s2")
    assert await claim(db, "p2") is not None
    with pytest.raises(RecoveryError, match="reservation turn resume"):
        await recover(db)
    assert await turn_metadata(db, "resume") == {**meta, **broken}  # kept for a human
    assert await statuses(db, "p2") == [ANSWERED, ANSWERED]  # kept for delivery
    if "prompt_dispatch_clarification_pending_id" not in broken:
        # Its own bundle is left to the reservation: still claimed, intent kept.
        rows = await bundle(db, "p1")
        assert all(r.metadata["response_delivery_pending"] is True for r in rows)


async def test_reserved_rows_of_another_bundle_stop_the_start(db: Database) -> None:
    claimed = await claimed_bundle(db)
    await seed_bundle(db, "p-other", n=1, when=5)
    other = (await bundle(db, "p-other"))[0]
    await reserve(db, [claimed[0].id, other.id])
    with pytest.raises(RecoveryError, match=f"message {other.id} is not a row of clarification"):
        await recover(db)
    assert await turn_metadata(db, "resume") is not None


async def test_attempted_reservation_with_unanswered_rows_stops_the_start(db: Database) -> None:
    claimed = await claimed_bundle(db)
    await reserve(db, [m.id for m in claimed])
    async with db.write() as conn:
        await reservations.mark_dispatch_attempted(conn, "resume", at(160))
    await set_metadata(db, claimed[0].id, status=PENDING)
    with pytest.raises(RecoveryError, match="not all answered"):
        await recover(db)
    assert (await turn_metadata(db, "resume") or {}).get("prompt_dispatch_attempted") is True


async def test_attempted_reservation_covering_part_of_the_intent_stops_the_start(
    db: Database,
) -> None:
    claimed = await claimed_bundle(db)
    await reserve(db, [claimed[0].id])
    async with db.write() as conn:
        await reservations.mark_dispatch_attempted(conn, "resume", at(160))
    with pytest.raises(RecoveryError, match=f"message {claimed[1].id} carries an unreserved"):
        await recover(db)
    assert all(r.metadata["response_delivery_pending"] for r in await bundle(db, "p1"))
