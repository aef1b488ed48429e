"""A session's current turn is found without reading its other turns (migration 0012):
the index holds the whole order the current turn is chosen by, so on both databases the
lookup in the session view scans backwards and stops at the first authoritative turn —
a session's thousandth turn does not pay for the other 999 on every state change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select

from kandev.board.inputs import TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.db.tables import task_session_messages, task_session_turns, task_sessions
from kandev.services import Services
from kandev.sessions.turns import current_turn_id, current_turn_id_subquery

BASE = datetime(2026, 12, 5, tzinfo=UTC)
TURNS = 1000
_LITERAL = {"literal_binds": True, "render_postcompile": True}


async def _long_session(services: Services) -> str:
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="long")
    )
    session = {"id": "long", "task_id": task.id, "state": "IDLE", "started_at": BASE}
    turns = [
        {"id": f"t{n:05d}", "session_id": "long", "task_id": task.id}
        | {"started_at": BASE + timedelta(seconds=n), "metadata": {}}
        | {"created_at": BASE, "updated_at": BASE}
        for n in range(TURNS)
    ]
    # The newest turn is an empty dispatch reservation (not authoritative): the one before
    # it is current, so the scan must also step over one turn that does not count.
    turns[-1]["metadata"] = {"prompt_dispatch_pending": True}
    async with services.db.write() as conn:
        await conn.execute(insert(task_sessions), [session | {"updated_at": BASE}])
        await conn.execute(insert(task_session_turns), turns)
        await conn.execute(
            insert(task_session_messages),
            [
                {"id": "m", "session_id": "long", "task_id": task.id, "turn_id": "t00000"}
                | {"content": "hi", "created_at": BASE, "updated_at": BASE}
            ],
        )
        await conn.exec_driver_sql("ANALYZE")
    return "long"


def _rows_read(plan: dict[str, Any], table: str) -> int:
    """Rows the scans of `table` in a PostgreSQL EXPLAIN ANALYZE plan produced, in all."""
    own = plan["Actual Rows"] * plan["Actual Loops"] if plan.get("Relation Name") == table else 0
    return own + sum(_rows_read(child, table) for child in plan.get("Plans", []))


async def test_the_current_turn_is_found_without_reading_the_others(services: Services) -> None:
    session_id = await _long_session(services)
    async with services.db.read() as conn:
        assert await current_turn_id(conn, session_id) == f"t{TURNS - 2:05d}"
    statement = select(current_turn_id_subquery(task_sessions.c.id)).where(
        task_sessions.c.id == session_id
    )
    dialect = services.db.engine.dialect
    sql = str(statement.compile(dialect=dialect, compile_kwargs=_LITERAL))
    async with services.db.read() as conn:
        if dialect.name == "sqlite":
            plan = [row[3] for row in await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql)]
            turns = [p for p in plan if "authority_turn" in p]
            assert turns and all("ix_task_session_turns_session_order" in p for p in turns), plan
            assert not any("TEMP B-TREE" in p for p in plan), plan  # no sort of every turn
        else:
            found = await conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
            plan = found.scalar_one()[0]["Plan"]
            assert _rows_read(plan, "task_session_turns") <= 2, plan  # not TURNS
