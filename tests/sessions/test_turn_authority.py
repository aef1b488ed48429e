"""Current-turn authority (reference §1.4) on both databases."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import insert, select

from kandev.clock import ManualClock
from kandev.db.engine import Database
from kandev.db.tables import task_session_messages, task_session_turns, task_sessions, tasks
from kandev.sessions.turns import current_turn_id, current_turn_id_subquery

T0 = ManualClock().now()


async def _session(db: Database, session_id: str = "s1") -> None:
    async with db.write() as conn:
        await conn.execute(
            insert(tasks).values(id=f"task-{session_id}", title="t", created_at=T0, updated_at=T0)
        )
        await conn.execute(
            insert(task_sessions).values(
                id=session_id, task_id=f"task-{session_id}", started_at=T0, updated_at=T0
            )
        )


async def _turn(
    db: Database,
    turn_id: str,
    *,
    started: int,
    created: int | None = None,
    metadata: dict | None = None,
    session_id: str = "s1",
    completed: bool = False,
) -> None:
    async with db.write() as conn:
        await conn.execute(
            insert(task_session_turns).values(
                id=turn_id,
                session_id=session_id,
                task_id=f"task-{session_id}",
                started_at=T0 + timedelta(seconds=started),
                created_at=T0 + timedelta(seconds=created if created is not None else started),
                updated_at=T0,
                completed_at=T0 + timedelta(seconds=started + 1) if completed else None,
                metadata=metadata or {},
            )
        )


async def _message(db: Database, turn_id: str, session_id: str = "s1") -> None:
    async with db.write() as conn:
        await conn.execute(
            insert(task_session_messages).values(
                id=f"m-{turn_id}",
                session_id=session_id,
                turn_id=turn_id,
                content="hi",
                created_at=T0,
                updated_at=T0,
            )
        )


async def _current(db: Database, session_id: str = "s1") -> str | None:
    async with db.read() as conn:
        direct = await current_turn_id(conn, session_id)
        # The correlated form (used by list queries) must agree with the direct one.
        correlated = (
            await conn.execute(
                select(current_turn_id_subquery(task_sessions.c.id)).where(
                    task_sessions.c.id == session_id
                )
            )
        ).scalar_one()
    assert direct == correlated
    return direct


async def test_no_turns_means_no_current_turn(db: Database) -> None:
    await _session(db)
    assert await _current(db) is None


async def test_newest_started_turn_wins_even_when_completed(db: Database) -> None:
    await _session(db)
    await _turn(db, "old", started=1)
    await _turn(db, "new", started=2, completed=True)
    assert await _current(db) == "new"


async def test_started_at_beats_created_at(db: Database) -> None:
    await _session(db)
    await _turn(db, "late-start", started=5, created=1)
    await _turn(db, "early-start", started=4, created=9)
    assert await _current(db) == "late-start"


async def test_created_at_breaks_started_at_ties(db: Database) -> None:
    await _session(db)
    await _turn(db, "b", started=3, created=2)
    await _turn(db, "a", started=3, created=3)
    assert await _current(db) == "a"


async def test_id_breaks_full_ties_descending(db: Database) -> None:
    await _session(db)
    await _turn(db, "turn-a", started=3)
    await _turn(db, "turn-z", started=3)
    assert await _current(db) == "turn-z"


async def test_empty_unattempted_reservation_is_not_authoritative(db: Database) -> None:
    await _session(db)
    await _turn(db, "asked", started=1)
    await _turn(db, "reservation", started=2, metadata={"prompt_dispatch_pending": True})
    assert await _current(db) == "asked"


async def test_reservation_flag_spellings_are_all_truthy(db: Database) -> None:
    await _session(db)
    await _turn(db, "asked", started=1)
    for i, flag in enumerate([True, "true", "1", 1]):
        await _turn(db, f"r{i}", started=2 + i, metadata={"prompt_dispatch_pending": flag})
    assert await _current(db) == "asked"


async def test_false_pending_flag_keeps_the_turn_authoritative(db: Database) -> None:
    await _session(db)
    await _turn(db, "asked", started=1)
    await _turn(db, "plain", started=2, metadata={"prompt_dispatch_pending": False})
    assert await _current(db) == "plain"


async def test_attempted_reservation_is_authoritative(db: Database) -> None:
    await _session(db)
    await _turn(db, "asked", started=1)
    await _turn(
        db,
        "reservation",
        started=2,
        metadata={"prompt_dispatch_pending": True, "prompt_dispatch_attempted": True},
    )
    assert await _current(db) == "reservation"


async def test_reservation_with_a_message_is_authoritative(db: Database) -> None:
    await _session(db)
    await _turn(db, "asked", started=1)
    await _turn(db, "reservation", started=2, metadata={"prompt_dispatch_pending": "true"})
    assert await _current(db) == "asked"
    await _message(db, "reservation")
    assert await _current(db) == "reservation"


async def test_turns_of_other_sessions_do_not_count(db: Database) -> None:
    await _session(db, "s1")
    await _session(db, "s2")
    await _turn(db, "mine", started=1, session_id="s1")
    await _turn(db, "theirs", started=9, session_id="s2")
    assert await _current(db, "s1") == "mine"
    assert await _current(db, "s2") == "theirs"
