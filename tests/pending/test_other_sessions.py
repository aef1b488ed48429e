"""pending.view: when a task's state changes, its JSON comes from the rows a writer may patch
(the written session, the primary ones) plus one aggregate over the other sessions' pending
rows (OtherSessions) — and says exactly what describing every session says, before and
after the writer patches its session (both databases).

Random tasks (seeded, bounded) mix every session state, primary flags, current and older
turns, reservation turns, bundles (with ties on created_at), questions without a pending_id
and permission requests decided after, before or beside pending ones.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, update

from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.catalog.states import SESSION_STATES, TASK_IN_PROGRESS, TASK_REVIEW
from kandev.db.tables import task_session_messages, task_session_turns, task_sessions, tasks
from kandev.pending.view import TaskView, _statement, view_of_session_task
from kandev.services import Services
from tests.statement_counter import StatementCounter

BASE = datetime(2026, 12, 2, tzinfo=UTC)
QUESTION_STATUSES = ["pending", "", None, "answered", "expired"]  # None: no status key
PERMISSION_STATUSES = ["pending", "", None, "approved", "rejected", "expired"]
TRIALS = 60


def _at(rng: random.Random) -> datetime:
    return BASE + timedelta(seconds=rng.randint(0, 2))  # a small range: ties happen


def _status(rng: random.Random, choices: list[str | None]) -> dict[str, Any]:
    status = rng.choice(choices)
    return {} if status is None else {"status": status}


def _random_task(rng: random.Random, task_id: str, count: int) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {"sessions": [], "turns": [], "messages": []}
    for n in range(count):
        session_id = f"{task_id}-s{n}"
        rows["sessions"].append(
            {
                "id": session_id,
                "task_id": task_id,
                "state": rng.choice(SESSION_STATES),
                "is_primary": rng.random() < 0.3,
                "started_at": BASE + timedelta(seconds=n),
                "updated_at": BASE,
            }
        )
        for t in range(rng.randint(0, 3)):
            turn_id = f"{session_id}-t{t}"
            # A reservation that never went out is not the current turn (sessions.turns).
            reserved = {"prompt_dispatch_pending": True} if rng.random() < 0.15 else {}
            rows["turns"].append(
                {
                    "id": turn_id,
                    "session_id": session_id,
                    "task_id": task_id,
                    "started_at": BASE + timedelta(minutes=t),
                    "metadata": reserved,
                    "created_at": BASE,
                    "updated_at": BASE,
                }
            )
            if reserved:
                continue
            for m in range(rng.randint(0, 4)):
                question = rng.random() < 0.55
                metadata = _status(rng, QUESTION_STATUSES if question else PERMISSION_STATUSES)
                if question:
                    metadata["pending_id"] = rng.choice(["", f"{task_id}-b{rng.randint(0, 3)}"])
                rows["messages"].append(
                    {
                        "id": f"{turn_id}-m{m}",
                        "session_id": session_id,
                        "task_id": task_id,
                        "turn_id": turn_id,
                        "type": "clarification_request" if question else "permission_request",
                        "content": "?",
                        "metadata": metadata,
                        "created_at": _at(rng),
                        "updated_at": BASE,
                    }
                )
    return rows


async def _store(services: Services, rows: dict[str, list[dict]]) -> None:
    async with services.db.write() as conn:
        for table, key in (
            (task_sessions, "sessions"),
            (task_session_turns, "turns"),
            (task_session_messages, "messages"),
        ):
            if rows[key]:
                await conn.execute(insert(table), rows[key])


def _patch(view: TaskView, session_id: str, state: str) -> None:
    """What a writer does to the session it changes (pending.view's patching methods)."""
    view.clarifications_settled(session_id)
    view.permissions_settled(session_id)
    session = view.session(session_id)
    assert session is not None
    view.replace_session(replace(session, state=state))


async def test_the_aggregate_says_what_every_session_says(services: Services) -> None:
    rng = random.Random(20261202)
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    compared = owed = 0
    for trial in range(TRIALS):
        task = await services.tasks.create_task(
            TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title=f"t{trial}")
        )
        async with services.db.write() as conn:
            await conn.execute(update(tasks).where(tasks.c.id == task.id).values(state=TASK_REVIEW))
        rows = _random_task(rng, task.id, rng.randint(1, 6))
        await _store(services, rows)
        task = await services.tasks.get_task(task.id)
        # The task's primary session is its first one (by started_at, id) flagged primary.
        primary = next((s["id"] for s in rows["sessions"] if s["is_primary"]), None)
        for session in rows["sessions"]:
            async with services.db.read() as conn:
                every = await view_of_session_task(conn, session["id"], all_sessions=True)
                part = await view_of_session_task(
                    conn, session["id"], task_changing_to=TASK_IN_PROGRESS
                )
            # Only the rows a writer may patch were read.
            read = {s.id for s in part.sessions_of(task.id)}
            assert read == {session["id"], primary} - {None}, (trial, read)
            assert part.task_json(task) == every.task_json(task), (trial, session["id"])
            new_state = rng.choice(SESSION_STATES)
            _patch(every, session["id"], new_state)
            _patch(part, session["id"], new_state)
            assert part.task_json(task) == every.task_json(task), (trial, session["id"])
            compared += 1
            owed += every.task_json(task)["task_pending_action"] is not None
    # The random tasks really exercised owed actions and bundles, not only empty ones.
    assert compared > TRIALS and owed > TRIALS // 3, (compared, owed)


async def test_an_unchanged_task_state_reads_no_other_session(services: Services) -> None:
    rng = random.Random(7)
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="t")
    )
    rows = _random_task(rng, task.id, 5)
    for session in rows["sessions"]:
        session["is_primary"] = True
    await _store(services, rows)
    async with services.db.read() as conn:
        view = await view_of_session_task(
            conn, rows["sessions"][1]["id"], task_changing_to=task.state
        )
    assert [s.id for s in view.sessions_of(task.id)] == [rows["sessions"][1]["id"]]


async def test_the_aggregate_is_read_only_when_another_session_owes(
    services: Services,
) -> None:
    """The view's statement probes the other sessions' pending rows; their aggregate (a
    large plan, whose start-up alone cost PostgreSQL more than the rest of the view) is a
    second statement, run only when the probe found one — never for a task whose other
    sessions owe nothing, the usual task and every single-session one."""
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="t")
    )
    async with services.db.write() as conn:
        await conn.execute(update(tasks).where(tasks.c.id == task.id).values(state=TASK_REVIEW))
    rows: dict[str, list[dict]] = {"sessions": [], "turns": [], "messages": []}
    for n in range(3):
        rows["sessions"].append(
            {"id": f"s{n}", "task_id": task.id, "state": "WAITING_FOR_INPUT"}
            | {"is_primary": n == 0, "started_at": BASE + timedelta(seconds=n), "updated_at": BASE}
        )
        rows["turns"].append(
            {"id": f"t{n}", "session_id": f"s{n}", "task_id": task.id, "started_at": BASE}
            | {"metadata": {}, "created_at": BASE, "updated_at": BASE}
        )
    await _store(services, rows)
    counter = StatementCounter(services.db)
    try:

        async def described(session_id: str) -> tuple[dict[str, Any], int]:
            with counter.counting():
                async with services.db.read() as conn:
                    view = await view_of_session_task(
                        conn, session_id, task_changing_to=TASK_IN_PROGRESS
                    )
            return view.task_json(await services.tasks.get_task(task.id)), len(counter.statements)

        task_json, statements = await described("s1")
        assert (task_json["pending_clarification_id"], statements) == (None, 1)
        # A question waits on the third session: the view of the second reads the aggregate.
        question = {"id": "m2", "session_id": "s2", "task_id": task.id, "turn_id": "t2"}
        question |= {"type": "clarification_request", "content": "?", "created_at": BASE}
        question |= {"metadata": {"status": "pending", "pending_id": "b2"}, "updated_at": BASE}
        await _store(services, {"sessions": [], "turns": [], "messages": [question]})
        task_json, statements = await described("s1")
        assert (task_json["pending_clarification_id"], statements) == ("b2", 2)
        # Its own view needs no aggregate: the question is a row it reads.
        task_json, statements = await described("s2")
        assert (task_json["pending_clarification_id"], statements) == ("b2", 1)
    finally:
        counter.close()


def _lookups(plan: dict[str, Any]) -> int:
    """The most times any one scan of sessions, turns or messages ran (its loops): a check
    run per pending row of the task shows as a loop per row."""
    relations = ("task_sessions", "task_session_turns", "task_session_messages")
    here = int(plan.get("Actual Loops", 1)) if plan.get("Relation Name") in relations else 0
    return max([here, *(_lookups(child) for child in plan.get("Plans", []))])


async def test_a_crowded_task_is_not_walked_session_by_session(
    services: Services, database_kind: str
) -> None:
    """300 sessions of one task each wait on a question (ANALYZEd): PostgreSQL's plan for
    the changing-task view runs no per-row check on all of them. It hash-joined every
    session before the LIMIT, and unfenced it checked every pending row before sorting.
    (SQLite's plan is asserted in tests/pending/test_view.py; it reports no row counts.)"""
    if database_kind != "postgres":
        pytest.skip("EXPLAIN ANALYZE row counts are PostgreSQL's")
    count = 300
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="crowd")
    )
    rows: dict[str, list[dict]] = {"sessions": [], "turns": [], "messages": []}
    for n in range(count):
        session_id, turn_id = f"c-s{n:04d}", f"c-t{n:04d}"
        stamps = {"created_at": BASE, "updated_at": BASE}
        rows["sessions"].append(
            {"id": session_id, "task_id": task.id, "state": "WAITING_FOR_INPUT"}
            | {"is_primary": n == 0, "started_at": BASE + timedelta(seconds=n), "updated_at": BASE}
        )
        rows["turns"].append(
            {"id": turn_id, "session_id": session_id, "task_id": task.id, "started_at": BASE}
            | {"metadata": {}}
            | stamps
        )
        rows["messages"].append(
            {"id": f"c-m{n:04d}", "session_id": session_id, "task_id": task.id}
            | {"turn_id": turn_id, "type": "clarification_request", "content": "?"}
            | {"metadata": {"status": "pending", "pending_id": f"c-b{n:04d}"}}
            | {"created_at": BASE + timedelta(seconds=n), "updated_at": BASE}
        )
    await _store(services, rows)
    async with services.db.write() as conn:
        await conn.execute(update(tasks).where(tasks.c.id == task.id).values(state=TASK_REVIEW))
        await conn.exec_driver_sql("ANALYZE")
    dialect = services.db.engine.dialect
    plans = []
    async with services.db.read() as conn:
        # The view's statement (its probe of the other sessions' pending rows) and the
        # aggregate's, which the probe finding a row makes the view read.
        for choice in ("session_or_changing_task", "others"):
            statement = _statement(choice).params(
                view_session_id="c-s0150", view_task_state=TASK_IN_PROGRESS
            )
            sql = str(statement.compile(dialect=dialect, compile_kwargs=_LITERAL))
            found = await conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
            plans.append(found.scalar_one())
        view = await view_of_session_task(conn, "c-s0150", task_changing_to=TASK_IN_PROGRESS)
    task = await services.tasks.get_task(task.id)
    assert view.task_json(task)["pending_clarification_id"] == "c-b0000"  # the oldest bundle
    for plan in plans:
        assert _lookups(plan[0]["Plan"]) < count // 10, plan


_LITERAL = {"literal_binds": True, "render_postcompile": True}
