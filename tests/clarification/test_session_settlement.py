"""Sessions whose agent died with the previous server, settled at startup all at once
(`settle_sessions_on_startup`, run by `Services.recover`), on both databases: the same
outcome as settling them one by one, and the same statements for 1 session as for 50."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy import event, select

from kandev.agents import process_repository
from kandev.agents.process_repository import ProcessRecord
from kandev.catalog import messages as kinds
from kandev.catalog.states import (
    COMPLETED,
    IDLE,
    RUNNING,
    STARTING,
    WAITING_FOR_INPUT,
)
from kandev.clarification.recovery import SessionSettlement, settle_sessions_on_startup
from kandev.db.engine import Database
from kandev.db.tables import task_session_messages, task_session_turns, task_sessions
from kandev.services import Services, build_services
from tests.clarification.test_repository import (
    active_ids,
    at,
    bundle,
    seed_bundle,
    seed_message,
    seed_session,
    seed_turn,
)
from tests.conftest import make_settings

GONE = (STARTING, RUNNING, WAITING_FOR_INPUT)


async def seed_sessions(db: Database, count: int, prefix: str = "s") -> dict[str, dict[str, Any]]:
    """`count` sessions an agent was running, in each gone state in turn; every other one
    waits on a question of its current turn, every third one of the rest has a question
    only on an older turn (not open any more). Returns what each one should become."""
    expected: dict[str, dict[str, Any]] = {}
    for i in range(count):
        session_id = f"{prefix}{i:03d}"
        await seed_session(db, session_id, GONE[i % len(GONE)])
        open_question = i % 2 == 0
        old_question = not open_question and i % 3 == 0
        if old_question:
            await seed_turn(db, f"{session_id}-t0", session_id, started=0)
            await seed_bundle(db, f"{session_id}-old", session_id, f"{session_id}-t0")
        await seed_turn(db, f"{session_id}-t1", session_id, started=10)
        if open_question:
            await seed_bundle(db, f"{session_id}-p", session_id, f"{session_id}-t1", when=11)
        expected[session_id] = {
            "state": WAITING_FOR_INPUT if open_question else IDLE,
            "pending_id": f"{session_id}-p" if open_question else None,
            "old_pending_id": f"{session_id}-old" if old_question else None,
        }
    return expected


async def session_rows(db: Database) -> dict[str, Any]:
    async with db.read() as conn:
        rows = (await conn.execute(select(task_sessions))).mappings().all()
    return {r["id"]: r for r in rows}


async def open_turns(db: Database) -> set[str]:
    async with db.read() as conn:
        query = select(task_session_turns.c.session_id).where(
            task_session_turns.c.completed_at.is_(None)
        )
        return set((await conn.execute(query)).scalars().all())


async def test_live_sessions_settle_as_one_by_one_would(db: Database) -> None:
    expected = await seed_sessions(db, 7)
    # Untouched: a session at rest with its open turn, and an ended one.
    await seed_session(db, "idle", IDLE)
    await seed_turn(db, "idle-t1", "idle")
    await seed_bundle(db, "idle-p", "idle", "idle-t1")
    await seed_session(db, "done", COMPLETED)
    await seed_turn(db, "done-t1", "done")

    settled = await settle_sessions_on_startup(db, at(500))

    assert settled == SessionSettlement(
        idle=sorted(s for s, e in expected.items() if e["state"] == IDLE),
        waiting=sorted(s for s, e in expected.items() if e["state"] == WAITING_FOR_INPUT),
    )
    rows = await session_rows(db)
    for session_id, outcome in expected.items():
        assert rows[session_id]["state"] == outcome["state"], session_id
        assert rows[session_id]["updated_at"] == at(500)
        if outcome["pending_id"]:
            # Detached, still pending and answerable: the session's open question.
            for row in await bundle(db, outcome["pending_id"]):
                assert row.metadata.get(kinds.STATUS_KEY, kinds.PENDING) == kinds.PENDING
                assert row.metadata[kinds.AGENT_DISCONNECTED_KEY] is True
                assert row.updated_at == at(500)
            assert await active_ids(db, session_id)
        else:
            assert await active_ids(db, session_id) == []
        if outcome["old_pending_id"]:  # not on the current turn: left as it was
            for row in await bundle(db, outcome["old_pending_id"]):
                assert kinds.AGENT_DISCONNECTED_KEY not in row.metadata
    assert await open_turns(db) == {"idle", "done"}
    assert (rows["idle"]["state"], rows["done"]["state"]) == (IDLE, COMPLETED)
    for row in await bundle(db, "idle-p"):
        assert kinds.AGENT_DISCONNECTED_KEY not in row.metadata

    # A second start leaves every state as it is (a waiting session keeps waiting).
    again = await settle_sessions_on_startup(db, at(600))
    assert again == SessionSettlement(idle=[], waiting=settled.waiting)
    assert {s: r["state"] for s, r in (await session_rows(db)).items()} == {
        s: r["state"] for s, r in rows.items()
    }


async def test_tool_calls_left_open_by_a_gone_agent_are_interrupted(db: Database) -> None:
    """The agent's Ask call (or any tool call) it never finished: after the restart it
    would read `in_progress` forever; it is `interrupted`. Finished ones, and those of a
    session at rest (nothing is gone there), keep their status."""
    statuses = {"open": "in_progress", "queued": "pending", "bare": None, "done": "completed"}
    statuses["broke"] = "failed"
    for session_id, state in (("gone", RUNNING), ("rest", IDLE)):
        await seed_session(db, session_id, state)
        await seed_turn(db, f"{session_id}-t1", session_id)
        for name, status in statuses.items():
            metadata = {"title": "Ask: go?"} | ({kinds.STATUS_KEY: status} if status else {})
            await seed_message(
                db,
                f"{session_id}-{name}",
                session_id=session_id,
                turn_id=f"{session_id}-t1",
                type=kinds.TOOL_CALL_TYPE,
                metadata=metadata,
            )

    await settle_sessions_on_startup(db, at(500))

    async with db.read() as conn:
        rows = (await conn.execute(select(task_session_messages))).mappings().all()
    after = {r["id"]: (r["metadata"].get(kinds.STATUS_KEY), r["updated_at"]) for r in rows}
    for name in ("open", "queued", "bare"):
        assert after[f"gone-{name}"] == (kinds.INTERRUPTED, at(500)), name
    assert after["gone-done"][0] == "completed" and after["gone-broke"][0] == "failed"
    for name, status in statuses.items():
        assert after[f"rest-{name}"][0] == status, name  # a session at rest: untouched
    assert {r["metadata"]["title"] for r in rows} == {"Ask: go?"}  # other keys kept


@contextmanager
def counting_statements(db: Database) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(db.engine.sync_engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(db.engine.sync_engine, "before_cursor_execute", count)


async def recovery_statements(services: Services, count: int, prefix: str) -> list[str]:
    expected = await seed_sessions(services.db, count, prefix)
    async with services.db.write() as conn:
        for session_id in expected:
            # The record of each session's agent; of another boot, so nothing is killed.
            await process_repository.replace_record(
                conn,
                ProcessRecord(session_id, pid=1, pgid=1, start_ticks=1, boot_id="other-boot"),
                at(0),
            )
    with counting_statements(services.db) as statements:
        await services.recover()
    rows = await session_rows(services.db)
    assert {s: rows[s]["state"] for s in expected} == {s: e["state"] for s, e in expected.items()}
    async with services.db.read() as conn:
        assert await process_repository.list_records(conn) == []
    return statements


async def test_recovery_runs_the_same_statements_for_1_and_50_sessions(
    services: Services,
) -> None:
    one = await recovery_statements(services, 1, "a")
    fifty = await recovery_statements(services, 50, "b")

    assert len(fifty) == len(one), "\n".join(fifty)
    assert len(one) <= 20


async def test_offline_commands_leave_live_sessions_alone(
    database_url: str, tmp_path: Path
) -> None:
    """`kandev user create` / `token create` (a server may run on this database right now)
    prepare storage only: no session settles, no question detaches, no turn ends."""
    home = tmp_path / "home"
    built = build_services(make_settings(tmp_path, database_url))
    await built.prepare_storage()
    expected = await seed_sessions(built.db, 6)
    before = await session_rows(built.db)
    before_bundles = {
        s: await bundle(built.db, e["pending_id"]) for s, e in expected.items() if e["pending_id"]
    }
    await built.close()

    env = {**os.environ, "KANDEV_HOME": str(home), "KANDEV_DATABASE_URL": database_url}
    for argv in (
        ["user", "create", "--email", "ops@example.com", "--password", "long enough pw"],
        ["token", "create", "--email", "ops@example.com"],
    ):
        done = await anyio.run_process(
            [sys.executable, "-m", "kandev", *argv], env=env, check=False
        )
        assert done.returncode == 0, done.stderr

    again = build_services(make_settings(tmp_path, database_url))
    try:
        assert await session_rows(again.db) == before
        assert await open_turns(again.db) == set(expected)
        for session_id, rows in before_bundles.items():
            assert await bundle(again.db, expected[session_id]["pending_id"]) == rows
    finally:
        await again.close()
