"""Seed same-step-move-results.md, at the service: a same-step request is a validated no-op
(`applied`, the stored task, nothing written, no event) whatever the task's sessions are
doing, and validation runs first, in order, with the documented errors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy.exc import OperationalError

from kandev.auth.identity import Identity, acting_as
from kandev.board import task_repository, workflow_repository
from kandev.board.inputs import TaskCreate, WorkflowCreate
from kandev.errors import Conflict, NotFound, ValidationFailed
from kandev.moves.models import ACTOR_AGENT, APPLIED, MoveRequest
from kandev.moves.validation import LOOKUP_FAILED, MoveLookupFailed
from kandev.services import Services
from kandev.sessions import session_repository
from tests.moves.helpers import (
    add_session,
    drain,
    live_turn,
    make_board,
    set_task,
    snapshot,
)

# Sessions of the task, as (state, primary, live agent turn running).
SESSION_MATRIX = {
    "running": [("RUNNING", True, True)],
    "starting": [("STARTING", True, False)],
    "idle": [("IDLE", True, False)],
    "waiting": [("WAITING_FOR_INPUT", True, False)],
    "absent": [],
    "mixed siblings": [
        ("IDLE", True, False),
        ("RUNNING", False, True),
        ("STARTING", False, False),
        ("COMPLETED", False, False),
    ],
    "running sibling, ended primary": [("CANCELLED", True, False), ("RUNNING", False, True)],
}


@pytest.mark.parametrize("sessions", list(SESSION_MATRIX))
@pytest.mark.parametrize("position", [None, 0, 7])
async def test_same_step_is_applied_and_changes_nothing(
    services: Services, sessions: str, position: int | None
) -> None:
    board = await make_board(services, step="Work")
    for state, primary, running in SESSION_MATRIX[sessions]:
        session_id = await add_session(services, board.task.id, state=state, primary=primary)
        if running:
            live_turn(services, session_id)
    await set_task(services, board.task.id, position=3, metadata={"kept": True})
    stored = await services.tasks.get_task(board.task.id)
    before = await snapshot(services.db)
    events = services.bus.subscribe()
    last_id = services.bus.last_id

    result = await services.moves.move(
        board.request("Work", position=position, actor=ACTOR_AGENT, sender_session_id="s")
    )

    assert result.disposition == APPLIED and result.move_id is None
    assert result.task == stored  # the stored task: stored position, not the requested one
    assert result.task.position == 3
    body = await services.moves.result_json(result)
    assert body["disposition"] == "applied" and "move_id" not in body
    assert body["task"]["position"] == 3
    assert body["task"] == await services.presenter.task(stored)
    assert await snapshot(services.db) == before
    assert drain(events) == [] and services.bus.last_id == last_id


@pytest.mark.parametrize(
    "empty",
    [
        {"instructions": ""},
        {"instructions": "   "},
        {"prompt": ""},
        {"reset": False},
        {"skip": False},
        {"instructions": None, "prompt": None, "reset": None, "skip": None},
        {"instructions": "", "prompt": " ", "reset": False, "skip": False},
    ],
)
async def test_empty_entry_options_count_as_none(services: Services, empty: dict) -> None:
    board = await make_board(services)
    before = await snapshot(services.db)
    result = await services.moves.move(board.request("Backlog", **empty))
    assert result.disposition == APPLIED
    assert await snapshot(services.db) == before


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"instructions": "keep going"}, "instructions"),
        ({"prompt": "legacy hand-off"}, "instructions"),
        ({"reset": True}, "reset"),
        ({"skip": True}, "skip"),
        ({"reset": True, "skip": True}, "reset"),
    ],
)
async def test_entry_options_on_the_same_step_are_invalid(
    services: Services, options: dict, field: str
) -> None:
    board = await make_board(services)
    session_id = await add_session(services, board.task.id, state="RUNNING")
    live_turn(services, session_id)
    before = await snapshot(services.db)
    with pytest.raises(ValidationFailed) as err:
        await services.moves.move(board.request("Backlog", **options))
    assert err.value.field == field
    assert "different step" in err.value.message
    assert await snapshot(services.db) == before


async def test_a_human_same_step_move_with_a_new_position_reorders(services: Services) -> None:
    """REST keeps column reordering; without a position (or the same one) it is a no-op."""
    board = await make_board(services)
    other = await services.tasks.create_task(
        TaskCreate(
            workspace_id=board.task.workspace_id, workflow_id=board.workflow.id, title="Other"
        )
    )
    assert (board.task.position, other.position) == (0, 1)
    before = await snapshot(services.db)
    for position in (None, 0):
        result = await services.moves.move(board.request("Backlog", position=position), human=True)
        assert result.disposition == APPLIED and result.task.position == 0
    assert await snapshot(services.db) == before
    events = services.bus.subscribe()
    request = MoveRequest(other.id, board.workflow.id, board.step("Backlog").id, position=0)
    moved = await services.moves.move(request, human=True)
    assert moved.task.position == 0
    assert (await services.tasks.get_task(board.task.id)).position == 1
    assert [e.type for e in drain(events)] == ["task.updated"]


# --- validation, in order, before any session is looked at --------------------------------

ALICE = Identity(user_id="alice")
BOB = Identity(user_id="bob")


async def test_a_foreign_task_is_not_found_like_a_missing_one(services: Services) -> None:
    board = await make_board(services, owner=ALICE)
    with acting_as(BOB):
        for task_id in (board.task.id, "no-such-task"):
            request = MoveRequest(task_id, board.workflow.id, board.step("Backlog").id)
            with pytest.raises(NotFound, match=r"^task not found$"):
                await services.moves.move(request)
            # Even with options that would be invalid: access is decided first.
            with pytest.raises(NotFound, match=r"^task not found$"):
                await services.moves.move(
                    MoveRequest(task_id, "nope", "nope", instructions="x", prompt="y")
                )
    with acting_as(ALICE):
        assert (await services.moves.move(board.request("Backlog"))).disposition == APPLIED


async def test_write_access_is_its_own_rule(services: Services, monkeypatch) -> None:
    board = await make_board(services)
    calls = []
    original = services.access.authorize_task_write

    async def spy(conn, task_id):  # type: ignore[no-untyped-def]
        calls.append(task_id)
        return await original(conn, task_id)

    monkeypatch.setattr(services.access, "authorize_task_write", spy)
    await services.moves.move(board.request("Backlog"))
    assert calls == [board.task.id]


async def test_archived_tasks_cannot_be_moved_even_to_their_own_step(
    services: Services,
) -> None:
    board = await make_board(services)
    await set_task(services, board.task.id, archived_at=datetime(2026, 1, 1, tzinfo=UTC))
    before = await snapshot(services.db)
    for step in ("Backlog", "Work"):
        with pytest.raises(Conflict, match="archived"):
            await services.moves.move(board.request(step))
    assert await snapshot(services.db) == before


async def test_missing_and_foreign_targets(services: Services) -> None:
    board = await make_board(services, owner=ALICE)
    other = await make_board(services, owner=ALICE)  # another workspace of the same owner
    bobs = await make_board(services, owner=BOB)
    with acting_as(ALICE):
        same_ws_flow = await services.workflows.create_workflow(
            WorkflowCreate(workspace_id=board.task.workspace_id, name="Second")
        )
    task_id, step_id = board.task.id, board.step("Backlog").id
    cases = [
        (MoveRequest(task_id, "no-such-workflow", step_id), "workflow_id", "does not exist"),
        (MoveRequest(task_id, bobs.workflow.id, bobs.step("Backlog").id), "workflow_id", "exist"),
        (
            MoveRequest(task_id, other.workflow.id, other.step("Backlog").id),
            "workflow_id",
            "different workspace",
        ),
        (MoveRequest(task_id, board.workflow.id, "no-such-step"), "workflow_step_id", "no such"),
        (
            MoveRequest(task_id, board.workflow.id, same_ws_flow.steps[0].id),
            "workflow_step_id",
            "no such step in the target workflow",
        ),
        (
            MoveRequest(task_id, same_ws_flow.id, step_id),  # the task's own step, other flow
            "workflow_step_id",
            "no such step",
        ),
    ]
    before = await snapshot(services.db)
    with acting_as(ALICE):
        for request, field, text in cases:
            with pytest.raises(ValidationFailed) as err:
                await services.moves.move(request)
            assert err.value.field == field and text in err.value.message, request
    assert await snapshot(services.db) == before


async def test_instructions_need_a_session_to_receive_them(services: Services) -> None:
    board = await make_board(services)
    with pytest.raises(ValidationFailed) as err:
        await services.moves.move(board.request("Review", instructions="read the diff"))
    assert err.value.field == "instructions"
    await add_session(services, board.task.id, state="CANCELLED")
    with pytest.raises(ValidationFailed):
        await services.moves.move(board.request("Review", instructions="read the diff"))
    assert (await services.tasks.get_task(board.task.id)).workflow_step_id == board.step(
        "Backlog"
    ).id


async def test_instructions_and_their_legacy_alias_must_agree(services: Services) -> None:
    board = await make_board(services)
    await add_session(services, board.task.id, managed=False)
    with pytest.raises(ValidationFailed) as err:
        await services.moves.move(board.request("Review", instructions="a", prompt="b"))
    assert err.value.field == "prompt"
    result = await services.moves.move(board.request("Review", instructions="a", prompt=" a "))
    assert result.task.workflow_step_id == board.step("Review").id


def _boom(*_args, **_kwargs):  # type: ignore[no-untyped-def]
    raise OperationalError(
        "SELECT secret_column FROM workflows WHERE id = $1", {}, Exception("pg_hba: db locked")
    )


async def _raising(*args, **kwargs):  # type: ignore[no-untyped-def]
    _boom()


@pytest.mark.parametrize(
    ("module", "name", "step"),
    [
        (task_repository, "get_task", "Backlog"),
        (workflow_repository, "get_workflow", "Backlog"),
        (session_repository, "list_task_sessions", "Review"),  # after validation, routing
    ],
)
async def test_lookup_failures_are_internal_errors_without_detail(
    services: Services, monkeypatch, module, name: str, step: str
) -> None:
    board = await make_board(services)
    monkeypatch.setattr(module, name, _raising)
    with pytest.raises(MoveLookupFailed) as err:
        await services.moves.move(board.request(step))
    assert err.value.code == "INTERNAL_ERROR"
    assert err.value.message == LOOKUP_FAILED
    assert err.value.__cause__ is None and err.value.__suppress_context__
    for secret in ("secret_column", "workflows", "pg_hba", "SELECT"):
        assert secret not in err.value.message
