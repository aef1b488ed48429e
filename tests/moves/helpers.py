"""Board set-up and database snapshots for the move tests (service level)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update

from kandev.auth.identity import Identity, acting_as
from kandev.board.inputs import StepCreate, TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.board.models import Task, Workflow, WorkflowStep
from kandev.db.engine import Database
from kandev.db.tables import (
    applied_moves,
    pending_moves,
    queued_prompts,
    task_session_messages,
    task_session_turns,
    task_sessions,
    tasks,
)
from kandev.events.bus import Event, EventStream
from kandev.moves.models import MoveRequest
from kandev.services import Services

WORK_PROMPT = "STEP-PROMPT for {{task_prompt}}"
WORKFLOW_PROMPT = "WF-RULES"

# Backlog → Work (auto-start, then on to the next step when a turn completes) → Review → Done.
STEPS = [
    StepCreate(name="Backlog"),
    StepCreate(
        name="Work",
        prompt=WORK_PROMPT,
        events={  # type: ignore[arg-type]
            "on_enter": [{"type": "auto_start_agent"}],
            "on_turn_complete": [{"type": "move_to_next"}],
        },
    ),
    StepCreate(name="Review"),
    StepCreate(name="Done"),
]


@dataclass
class Board:
    workflow: Workflow
    task: Task

    def step(self, name: str) -> WorkflowStep:
        return next(s for s in self.workflow.steps if s.name == name)

    def request(self, step: str, **kw: Any) -> MoveRequest:
        return MoveRequest(
            task_id=self.task.id,
            workflow_id=self.workflow.id,
            workflow_step_id=self.step(step).id,
            **kw,
        )


async def make_board(
    services: Services, *, owner: Identity | None = None, title: str = "Task", step: str = ""
) -> Board:
    with acting_as(owner):
        ws = await services.workspaces.create_workspace(WorkspaceCreate(name="W"))
        flow = await services.workflows.create_workflow(
            WorkflowCreate(workspace_id=ws.id, name="F", prompt=WORKFLOW_PROMPT, steps=STEPS)
        )
        start = next((s.id for s in flow.steps if s.name == step), None)
        task = await services.tasks.create_task(
            TaskCreate(
                workspace_id=ws.id,
                workflow_id=flow.id,
                workflow_step_id=start,
                title=title,
                description="the task description",
            )
        )
    return Board(flow, task)


async def add_session(
    services: Services,
    task_id: str,
    *,
    state: str = "IDLE",
    primary: bool = True,
    managed: bool = True,
) -> str:
    """A session row as the orchestrator would leave it (no agent process)."""
    session_id = services.new_id()
    now = services.clock.now()
    async with services.db.write() as conn:
        await conn.execute(
            task_sessions.insert().values(
                id=session_id,
                task_id=task_id,
                agent_profile_id="scripted-profile" if managed else None,
                state=state,
                is_primary=primary,
                started_at=now,
                updated_at=now,
            )
        )
    return session_id


def live_turn(services: Services, session_id: str, running: bool = True) -> None:
    """Mark an agent turn of the session as running in the orchestrator (or ended)."""
    services.orchestrator.live(session_id).turn_id = "live-turn" if running else None


async def set_task(services: Services, task_id: str, **values: Any) -> None:
    async with services.db.write() as conn:
        await conn.execute(update(tasks).where(tasks.c.id == task_id).values(**values))


async def get_task(services: Services, task_id: str) -> Task:
    return await services.tasks.get_task(task_id)


SNAPSHOT_TABLES = (
    tasks,
    task_sessions,
    pending_moves,
    applied_moves,
    queued_prompts,
    task_session_turns,
    task_session_messages,
)


async def snapshot(db: Database) -> dict[str, list[dict[str, Any]]]:
    """Every row that a move could touch, in a stable order."""
    out: dict[str, list[dict[str, Any]]] = {}
    async with db.read() as conn:
        for table in SNAPSHOT_TABLES:
            key = table.c.move_id if table is applied_moves else table.c.id
            rows = (await conn.execute(select(table).order_by(key))).mappings()
            out[table.name] = [dict(r) for r in rows]
    return out


async def rows(db: Database, table: Any, **where: Any) -> list[dict[str, Any]]:
    async with db.read() as conn:
        query = select(table)
        for column, value in where.items():
            query = query.where(table.c[column] == value)
        return [dict(r) for r in (await conn.execute(query)).mappings()]


def drain(stream: EventStream) -> list[Event]:
    events = []
    while not stream.queue.empty():
        events.append(stream.queue.get_nowait())
    return events


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e.type == kind]
