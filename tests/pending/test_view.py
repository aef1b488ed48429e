"""pending.view: one statement describes a session, and its task's other sessions only when
the task's JSON may be needed — all of them when asked, else the primary one as a row and
the rest as one aggregate (both databases)."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.catalog.states import TASK_IN_PROGRESS, TASK_REVIEW
from kandev.clarification.inputs import RequestInput
from kandev.db.tables import tasks
from kandev.pending.view import _statement, view_of_session_task
from kandev.services import Services
from kandev.sessions.inputs import SessionCreate

QUESTIONS = [
    {
        "id": "q",
        "prompt": "Which?",
        "options": [
            {"option_id": "a", "label": "A", "description": "a"},
            {"option_id": "b", "label": "B", "description": "b"},
        ],
    }
]


async def _task_with_sessions(services: Services, count: int) -> tuple[str, list[str]]:
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="t")
    )
    ids = [
        (await services.sessions.create_session(task.id, SessionCreate()))["id"]
        for _ in range(count)
    ]
    return task.id, ids


async def test_siblings_are_read_only_when_the_task_state_would_change(
    services: Services,
) -> None:
    task_id, ids = await _task_with_sessions(services, 4)
    async with services.db.write() as conn:
        await conn.execute(update(tasks).where(tasks.c.id == task_id).values(state=TASK_REVIEW))
    async with services.db.read() as conn:
        alone = await view_of_session_task(conn, ids[0])
        unchanged = await view_of_session_task(conn, ids[0], task_changing_to=TASK_REVIEW)
        changing = await view_of_session_task(conn, ids[0], task_changing_to=TASK_IN_PROGRESS)
        changing_other = await view_of_session_task(conn, ids[2], task_changing_to=TASK_IN_PROGRESS)
        everything = await view_of_session_task(conn, ids[2], all_sessions=True)
    assert [s.id for s in alone.sessions_of(task_id)] == [ids[0]]
    assert [s.id for s in unchanged.sessions_of(task_id)] == [ids[0]]
    # A changing task state reads the rows a writer may patch — the session and the primary
    # one — and the other sessions as one aggregate (tests/pending/test_other_sessions.py).
    primary = [s.id for s in everything.sessions_of(task_id) if s.is_primary]
    assert primary == [ids[0]]  # the task's first session
    assert [s.id for s in changing.sessions_of(task_id)] == [ids[0]]
    assert sorted(s.id for s in changing_other.sessions_of(task_id)) == sorted([ids[0], ids[2]])
    assert sorted(s.id for s in everything.sessions_of(task_id)) == sorted(ids)
    # The described session is the same either way, and so is its scope.
    assert alone.session_json(ids[0]) == changing.session_json(ids[0])
    assert alone.owner_id(task_id) == changing.owner_id(task_id)


async def test_the_task_json_carries_a_siblings_question(services: Services) -> None:
    task_id, ids = await _task_with_sessions(services, 2)
    await services.sessions.prompt(ids[0], "go")
    pending_id = await services.clarifications.request(
        RequestInput(session_id=ids[0], questions=QUESTIONS)
    )
    task = await services.tasks.get_task(task_id)
    async with services.db.read() as conn:
        seen_from_other = await view_of_session_task(conn, ids[1], all_sessions=True)
        only_other = await view_of_session_task(conn, ids[1])
    assert seen_from_other.task_json(task)["pending_clarification_id"] == pending_id
    assert seen_from_other.session_json(ids[0])["pending_clarification_id"] == pending_id
    assert seen_from_other.has_open_question(ids[0])
    assert not seen_from_other.has_open_question(ids[1])
    assert only_other.session(ids[0]) is None  # not read when not asked for
    # The same JSON the task service gives.
    assert seen_from_other.task_json(task) == await services.presenter.task(task)


async def test_sqlite_describes_a_session_from_indexes_not_its_history(
    services: Services,
) -> None:
    """Each way of choosing sessions reads task_session_messages through the turn and the
    partial (pending) indexes only — never by walking the session's history (its
    created_at index) or the whole table — and finds the current turn once (materialized).
    The plan is SQLite's; PostgreSQL's planner picks by table statistics."""
    if services.db.engine.dialect.name != "sqlite":
        pytest.skip("the plan asserted is SQLite's")
    task_id, ids = await _task_with_sessions(services, 2)
    values = {
        "view_session_id": ids[0],
        "view_task_state": TASK_IN_PROGRESS,
        "view_ids": [ids[0], task_id],
    }

    async def plan_of(choice: str) -> list[str]:
        statement = _statement(choice)
        dialect = services.db.engine.dialect
        names = {b.key for b in statement.compile(dialect=dialect).binds.values()}
        bound = statement.params({k: v for k, v in values.items() if k in names})
        sql = str(bound.compile(dialect=dialect, compile_kwargs=_LITERAL))
        async with services.db.read() as conn:
            return [row[3] for row in await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)]

    for choice in ("session", "session_task", "session_or_changing_task", "tasks", "sessions"):
        plan = await plan_of(choice)
        reads = [p for p in plan if "task_session_messages" in p]
        assert reads and all("USING" in p and "INDEX" in p for p in reads), (choice, plan)
        assert not any("session_created" in p for p in reads), (choice, plan)
        used = " ".join(reads)
        for index in ("pending_permission", "turn_permissions", "pending_clarification"):
            assert f"ix_task_session_messages_{index}" in used, (choice, index, plan)
        assert "MATERIALIZE described" in plan, (choice, plan)
        if choice == "session_or_changing_task":
            # Whether another session has a pending row: a probe of each partial pending
            # index by task; the aggregate itself is not in this statement.
            probes = [p for p in plan if p.startswith("SEARCH elsewhere_")]
            assert len(probes) == 2 and all("_task_pending_" in p for p in probes), plan
            assert not any(" other_" in p for p in plan), plan  # not the aggregate
    # The other sessions' aggregate, read only when a probe found a row, walks the task's
    # pending rows only.
    plan = await plan_of("others")
    others = [p for p in plan if p.startswith("SEARCH other_")]
    assert len(others) == 4, plan
    assert all("_task_pending_" in p for p in others), plan


_LITERAL = {"literal_binds": True, "render_postcompile": True}
