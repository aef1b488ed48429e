"""Deferred moves, turn-end application, step events and terminal steps, at the service
(both databases). The running turn is the orchestrator's live-turn mark; the real ACP agent
versions of these flows are in test_moves_acp.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import delete, func, select, update

from kandev.board.inputs import StepCreate, TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.clock import ManualClock
from kandev.db.tables import (
    applied_moves,
    pending_moves,
    queued_prompts,
    task_sessions,
    workflow_steps,
    workflows,
)
from kandev.moves import repository as moves_repo
from kandev.moves import step_events
from kandev.moves.models import ACTOR_AGENT, APPLIED, DEFERRED, MoveRequest
from kandev.moves.transitions import ENTRY_PROMPT_AUTHOR
from kandev.services import Services
from kandev.sessions.inputs import MessagePageQuery
from tests.moves.helpers import (
    WORKFLOW_PROMPT,
    add_session,
    drain,
    get_task,
    live_turn,
    make_board,
    of_type,
    rows,
    set_task,
    snapshot,
)

ENTRY = step_events.INSTRUCTIONS_PREFIX


async def _running_board(services: Services):  # type: ignore[no-untyped-def]
    board = await make_board(services)
    session_id = await add_session(services, board.task.id, state="RUNNING")
    live_turn(services, session_id)
    return board, session_id


async def _end_turn(
    services: Services, session_id: str, *, stop_reason: str = "end_turn", waiting: bool = False
) -> None:
    live_turn(services, session_id, running=False)
    await services.moves.on_turn_end(session_id, stop_reason=stop_reason, waiting=waiting)


async def test_a_move_during_a_turn_is_deferred_and_stored_on_the_target_session(
    services: Services,
) -> None:
    board, session_id = await _running_board(services)
    events = services.bus.subscribe()
    result = await services.moves.move(
        board.request(
            "Work",
            position=2,
            instructions="look at the failing test",
            reset=True,
            actor=ACTOR_AGENT,
            sender_session_id="caller-session",
        )
    )
    assert result.disposition == DEFERRED and result.move_id
    assert result.task == board.task  # the stored task: it has not moved yet
    body = await services.moves.result_json(result)
    assert body["disposition"] == "deferred" and body["move_id"] == result.move_id
    assert body["task"]["workflow_step_id"] == board.step("Backlog").id
    [row] = await rows(services.db, pending_moves)
    assert row["session_id"] == session_id and row["move_id"] == result.move_id
    assert (row["workflow_step_id"], row["step_position"]) == (board.step("Work").id, 2)
    assert (row["instructions"], row["reset"], row["skip"]) == ("look at the failing test", 1, 0)
    assert (row["actor"], row["sender_session_id"]) == ("agent", "caller-session")
    assert await rows(services.db, queued_prompts) == []  # the hand-off lives in the row
    [deferred] = drain(events)
    assert deferred.type == "task.move_deferred"
    assert deferred.data["move_id"] == result.move_id and deferred.data["session_id"] == session_id


async def test_the_newest_deferred_move_wins_and_takes_its_hand_off_away(
    services: Services,
) -> None:
    board, session_id = await _running_board(services)
    first = await services.moves.move(board.request("Review", instructions="OLD hand-off"))
    events = services.bus.subscribe()
    second = await services.moves.move(board.request("Work", instructions="NEW hand-off"))
    assert second.disposition == DEFERRED and second.move_id != first.move_id
    [row] = await rows(services.db, pending_moves)
    assert row["move_id"] == second.move_id and row["instructions"] == "NEW hand-off"
    assert await rows(services.db, queued_prompts) == []
    dropped, deferred = drain(events)
    assert dropped.type == "task.move_dropped"
    assert dropped.data["move_id"] == first.move_id and dropped.data["reason"] == "replaced"
    assert deferred.type == "task.move_deferred"

    await _end_turn(services, session_id)
    assert (await get_task(services, board.task.id)).workflow_step_id == board.step("Work").id
    [prompt] = await rows(services.db, queued_prompts)
    assert "NEW hand-off" in prompt["content"] and "OLD" not in prompt["content"]
    consumed = {r["move_id"] for r in await rows(services.db, applied_moves)}
    assert consumed == {first.move_id, second.move_id}  # neither can ever act again


async def test_turn_end_applies_the_move_then_skips_turn_complete_automation(
    services: Services, clock: ManualClock
) -> None:
    board, session_id = await _running_board(services)
    result = await services.moves.move(
        board.request("Work", instructions="fix the flaky test", actor=ACTOR_AGENT)
    )
    events = services.bus.subscribe()
    clock.advance(seconds=5)
    await _end_turn(services, session_id)

    task = await get_task(services, board.task.id)
    assert task.workflow_step_id == board.step("Work").id  # not moved on by move_to_next
    assert await rows(services.db, pending_moves) == []
    [record] = await rows(services.db, applied_moves)
    assert (record["move_id"], record["session_id"]) == (result.move_id, session_id)
    [prompt] = await rows(services.db, queued_prompts)
    assert prompt["session_id"] == session_id and prompt["queued_by"] == ENTRY_PROMPT_AUTHOR
    assert prompt["content"] == (
        f"## Workflow instructions\n\n{WORKFLOW_PROMPT}\n\n"
        "STEP-PROMPT for the task description\n\n"
        f"{ENTRY}fix the flaky test"
    )
    [moved] = of_type(drain(events), "task.moved")
    assert moved.data["move_id"] == result.move_id and moved.data["actor"] == "agent"
    assert (moved.data["from_step_id"], moved.data["to_step_id"]) == (
        board.step("Backlog").id,
        board.step("Work").id,
    )
    assert moved.data["task"]["workflow_step_id"] == board.step("Work").id


async def test_a_consumed_move_never_applies_again(services: Services) -> None:
    """A pending row brought back after it was applied (a stale restore) does nothing."""
    board, session_id = await _running_board(services)
    result = await services.moves.move(board.request("Work", instructions="once"))
    [row] = await rows(services.db, pending_moves)
    await _end_turn(services, session_id)
    async with services.db.write() as conn:
        await conn.execute(queued_prompts.delete())
        await conn.execute(pending_moves.insert().values(**row))  # the stale copy
    await services.moves.move(board.request("Backlog"), human=True)
    async with services.db.write() as conn:
        await conn.execute(pending_moves.insert().values(**row))
    events = services.bus.subscribe()
    await _end_turn(services, session_id)
    assert (await get_task(services, board.task.id)).workflow_step_id == board.step("Backlog").id
    assert await rows(services.db, pending_moves) == []
    assert await rows(services.db, queued_prompts) == []
    assert of_type(drain(events), "task.moved") == []
    assert [r["move_id"] for r in await rows(services.db, applied_moves)] == [result.move_id]


async def _another_workspace(services: Services) -> str:
    return (await services.workspaces.create_workspace(WorkspaceCreate(name="Else"))).id


@pytest.mark.parametrize(
    "breakage", ["step_deleted", "step_moved", "workflow_changed", "task_archived"]
)
async def test_a_deferred_move_whose_target_broke_is_dropped_visibly(
    services: Services, breakage: str
) -> None:
    board, session_id = await _running_board(services)
    result = await services.moves.move(board.request("Review", instructions="x"))
    target = board.step("Review")
    other = await services.workflows.create_workflow(
        WorkflowCreate(workspace_id=board.task.workspace_id, name="Other")
    )
    async with services.db.write() as conn:
        if breakage == "step_deleted":
            await conn.execute(delete(workflow_steps).where(workflow_steps.c.id == target.id))
        elif breakage == "step_moved":
            await conn.execute(
                update(workflow_steps)
                .where(workflow_steps.c.id == target.id)
                .values(workflow_id=other.id)
            )
    if breakage == "workflow_changed":
        elsewhere = await _another_workspace(services)
        async with services.db.write() as conn:
            await conn.execute(
                update(workflows)
                .where(workflows.c.id == board.workflow.id)
                .values(workspace_id=elsewhere)
            )
    if breakage == "task_archived":
        await set_task(services, board.task.id, archived_at=datetime(2026, 1, 2, tzinfo=UTC))
    expected_reason = {
        "step_deleted": "step_deleted",
        "step_moved": "step_deleted",
        "workflow_changed": "workflow_changed",
        "task_archived": "task_archived",
    }[breakage]
    events = services.bus.subscribe()
    await _end_turn(services, session_id)

    [dropped] = of_type(drain(events), "task.move_dropped")
    assert dropped.data == {
        "task_id": board.task.id,
        "move_id": result.move_id,
        "session_id": session_id,
        "workflow_id": board.workflow.id,
        "workflow_step_id": target.id,
        "reason": expected_reason,
    }
    assert dropped.owner_id == "" and dropped.task_id == board.task.id
    assert (await get_task(services, board.task.id)).workflow_step_id == board.step("Backlog").id
    assert await rows(services.db, pending_moves) == []
    assert await rows(services.db, queued_prompts) == []


async def test_the_record_of_consumed_moves_stays_bounded(
    services: Services, clock: ManualClock
) -> None:
    board, session_id = await _running_board(services)
    for _ in range(moves_repo.KEEP_PER_SESSION + 15):
        await services.moves.move(board.request("Review"))  # replaces: each one is consumed
        clock.advance(seconds=1)
    async with services.db.read() as conn:
        count = (await conn.execute(select(func.count()).select_from(applied_moves))).scalar_one()
    assert count == moves_repo.KEEP_PER_SESSION
    newest = await services.moves.move(board.request("Work"))
    kept = {r["move_id"] for r in await rows(services.db, applied_moves)}
    assert len(kept) == moves_repo.KEEP_PER_SESSION
    # Old records of other sessions age out in the same transaction.
    other = await add_session(services, board.task.id, state="RUNNING", primary=False)
    async with services.db.write() as conn:
        await moves_repo.record_consumed(conn, "old-one", other, clock.now())
    clock.advance(days=8)
    await _end_turn(services, session_id)
    consumed = {r["move_id"] for r in await rows(services.db, applied_moves)}
    assert consumed == {newest.move_id}


async def test_pending_moves_of_ended_sessions_are_dropped(services: Services) -> None:
    board, session_id = await _running_board(services)
    result = await services.moves.move(board.request("Review"))
    events = services.bus.subscribe()
    await services.orchestrator.stop_session(session_id)
    [dropped] = of_type(drain(events), "task.move_dropped")
    assert dropped.data["move_id"] == result.move_id and dropped.data["reason"] == "session_ended"
    assert await rows(services.db, pending_moves) == []


async def test_start_up_drops_pending_moves_of_sessions_that_ended(services: Services) -> None:
    board, session_id = await _running_board(services)
    await services.moves.move(board.request("Review"))
    async with services.db.write() as conn:
        await conn.execute(
            update(task_sessions).where(task_sessions.c.id == session_id).values(state="FAILED")
        )
    assert await services.moves.drop_orphaned() == 1
    assert await rows(services.db, pending_moves) == []
    assert await services.moves.drop_orphaned() == 0


async def test_a_human_move_during_the_turn_applies_now_and_supersedes(
    services: Services,
) -> None:
    board, session_id = await _running_board(services)
    agent_move = await services.moves.move(board.request("Review", actor=ACTOR_AGENT))
    events = services.bus.subscribe()
    human = await services.moves.move(board.request("Work"), human=True)
    assert human.disposition == APPLIED
    assert human.task.workflow_step_id == board.step("Work").id
    kinds = [e.type for e in drain(events)]
    assert kinds == ["task.move_dropped", "task.updated", "task.moved"]
    assert await rows(services.db, pending_moves) == []
    [prompt] = await rows(services.db, queued_prompts)  # the step's prompt waits for the turn
    assert prompt["content"].endswith("STEP-PROMPT for the task description")
    await _end_turn(services, session_id)
    # Neither the superseded move nor Work's move_to_next (the turn began elsewhere) ran.
    assert (await get_task(services, board.task.id)).workflow_step_id == board.step("Work").id
    assert agent_move.move_id in {r["move_id"] for r in await rows(services.db, applied_moves)}


@pytest.mark.parametrize(
    ("stop_reason", "waiting", "primary", "moves_on"),
    [
        ("end_turn", False, True, True),
        ("end_turn", True, True, False),  # a question is open: the clarification guard
        ("cancelled", False, True, False),
        ("end_turn", False, False, False),  # only the primary session drives the task
    ],
)
async def test_turn_complete_automation(
    services: Services, stop_reason: str, waiting: bool, primary: bool, moves_on: bool
) -> None:
    board = await make_board(services, step="Work")
    session_id = await add_session(services, board.task.id, primary=primary)
    events = services.bus.subscribe()
    await _end_turn(services, session_id, stop_reason=stop_reason, waiting=waiting)
    task = await get_task(services, board.task.id)
    expected = "Review" if moves_on else "Work"
    assert task.workflow_step_id == board.step(expected).id
    moved = of_type(drain(events), "task.moved")
    assert [e.data["actor"] for e in moved] == (["workflow"] if moves_on else [])


async def _flow(services: Services, steps: list[StepCreate]):  # type: ignore[no-untyped-def]
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="W"))
    flow = await services.workflows.create_workflow(
        WorkflowCreate(workspace_id=ws.id, name="F", steps=steps)
    )
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="T")
    )
    return flow, task


async def test_move_to_step_and_move_to_previous_and_no_neighbour(services: Services) -> None:
    flow, task = await _flow(
        services,
        [
            StepCreate(name="A", events={"on_turn_complete": [{"type": "move_to_previous"}]}),  # type: ignore[arg-type]
            StepCreate(name="B", events={"on_turn_complete": [{"type": "move_to_previous"}]}),  # type: ignore[arg-type]
            StepCreate(name="C"),
        ],
    )
    a, b, c = flow.steps
    async with services.db.write() as conn:
        await conn.execute(
            update(workflow_steps)
            .where(workflow_steps.c.id == c.id)
            .values(
                events={"on_turn_complete": [{"type": "move_to_step", "config": {"step_id": b.id}}]}
            )
        )
    session_id = await add_session(services, task.id)
    await services.moves.move(MoveRequest(task.id, flow.id, c.id), human=True)
    await _end_turn(services, session_id)
    assert (await get_task(services, task.id)).workflow_step_id == b.id  # move_to_step
    await _end_turn(services, session_id)
    assert (await get_task(services, task.id)).workflow_step_id == a.id  # move_to_previous
    await _end_turn(services, session_id)
    assert (await get_task(services, task.id)).workflow_step_id == a.id  # nothing before A


async def test_terminal_steps_complete_the_task(services: Services) -> None:
    board = await make_board(services)
    session_id = await add_session(services, board.task.id, managed=False)
    done = await services.moves.move(board.request("Done"), human=True)
    assert done.task.state == "COMPLETED"
    # A turn on the Done step ends REVIEW in the recorder; the move service settles it.
    await set_task(services, board.task.id, state="REVIEW")
    await _end_turn(services, session_id)
    assert (await get_task(services, board.task.id)).state == "COMPLETED"
    back = await services.moves.move(board.request("Review"), human=True)
    assert back.task.state == "TODO"
    elsewhere = await services.moves.move(board.request("Work"), human=True)
    assert elsewhere.task.state == "TODO"


async def test_only_a_last_done_style_step_is_terminal(services: Services) -> None:
    flow, _ = await _flow(
        services, [StepCreate(name="Done"), StepCreate(name=" Approved "), StepCreate(name="x")]
    )
    assert [step_events.is_terminal(flow, s) for s in flow.steps] == [False, False, False]
    flow, _ = await _flow(services, [StepCreate(name="Todo"), StepCreate(name=" COMPLETED ")])
    assert [step_events.is_terminal(flow, s) for s in flow.steps] == [False, True]


async def test_skip_and_reset_apply_once_to_their_entry(services: Services) -> None:
    board, session_id = await _running_board(services)
    async with services.db.write() as conn:
        await conn.execute(
            update(task_sessions)
            .where(task_sessions.c.id == session_id)
            .values(acp_session_id="acp-old")
        )
    await services.moves.move(board.request("Work", skip=True, reset=True, instructions="hi"))
    await _end_turn(services, session_id)
    [prompt] = await rows(services.db, queued_prompts)
    assert prompt["content"] == f"{ENTRY}hi"  # no step prompt: automation skipped
    [session] = await rows(services.db, task_sessions, id=session_id)
    assert session["acp_session_id"] == ""  # the next prompt opens a fresh ACP session
    # The next entry (no options) runs the step's automation again.
    async with services.db.write() as conn:
        await conn.execute(queued_prompts.delete())
    live_turn(services, session_id)  # the entry prompt waits in the queue for this turn
    await services.moves.move(board.request("Backlog"), human=True)
    await services.moves.move(board.request("Work"), human=True)
    [prompt] = await rows(services.db, queued_prompts)
    assert "STEP-PROMPT" in prompt["content"] and ENTRY not in prompt["content"]


async def test_an_unmanaged_session_receives_the_entry_prompt_as_a_turn(
    services: Services,
) -> None:
    """Bring-your-own agents read their conversation over MCP: the prompt is recorded."""
    board = await make_board(services)
    session_id = await add_session(services, board.task.id, managed=False)
    before = await snapshot(services.db)
    await services.moves.move(board.request("Work", instructions="go"))
    conversation, _ = await services.sessions.list_messages(session_id, MessagePageQuery())
    assert [m.content for m in conversation] == [
        f"## Workflow instructions\n\n{WORKFLOW_PROMPT}\n\n"
        f"STEP-PROMPT for the task description\n\n{ENTRY}go"
    ]
    assert before["queued_prompts"] == await rows(services.db, queued_prompts)
