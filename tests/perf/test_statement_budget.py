"""The statement and transaction budgets of the hot paths (issue: performance), on both
databases, with a statement counter on the engine — so a regression fails CI.

- An answer reaching a blocked agent: ≤ 10 statements, ≤ 3 transactions (the read that
  authorizes it, the claim, the delivered mark with the session back to RUNNING); a losing
  answer ≤ 4 statements, ≤ 2 transactions (no read of its own after the failed claim).
- A prompt turn of a real ACP agent process: ≤ 11 statements, ≤ 4 transactions (the prompt,
  the agent's message, the turn's end with everything the layers above do at it: the moves
  layer's turn-end facts come in the turn end's view statement). The issue allows 12.
- Neither sends one of the code's constants as a bind parameter where a partial index of
  task_session_messages is proved: SQLite would re-plan that statement on every execution.

PostgreSQL counts its lock statements (turn lock, row locks) like any other statement.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import text

from kandev.auth.identity import Identity, acting_as
from kandev.board.inputs import AgentProfileCreate, TaskCreate, WorkflowCreate, WorkspaceCreate
from kandev.catalog.events import SESSION_STATE_CHANGED, SESSION_TURN_COMPLETED
from kandev.events.bus import EventStream
from kandev.services import Services
from kandev.sessions.inputs import MessagePageQuery, SessionCreate
from tests.clarification.test_repository import wait_for_lock_waiter
from tests.statement_counter import StatementCounter, bound_constants

# An answer (the budget: 10 statements, 3 transactions): the claim's transaction
# (the bundle read under its locks, authorized and validated, the claim, the answer
# message, the session's view) and the delivered mark's. SQLite has no lock statements.
ANSWER_STATEMENTS, ANSWER_TRANSACTIONS = 9, 2
# A losing answer: the bundle read under its locks and the failed claim, in one
# transaction; it replays the rows it read (nobody could change them while it held them).
LOSER_STATEMENTS, LOSER_TRANSACTIONS = 2, 1
TURN_STATEMENTS, TURN_TRANSACTIONS = 11, 4
SCRIPTED_AGENT = str(Path(__file__).resolve().parents[1] / "agents" / "scripted_agent.py")
QUESTIONS = [
    {
        "id": "q",
        "prompt": "Go on?",
        "options": [
            {"option_id": "yes", "label": "Yes", "description": "go"},
            {"option_id": "no", "label": "No", "description": "stop"},
        ],
    }
]
ALICE = Identity("alice")


@pytest.fixture
async def counter(services: Services) -> AsyncIterator[StatementCounter]:
    counting = StatementCounter(services.db)
    yield counting
    counting.close()


async def _task(services: Services) -> str:
    ws = await services.workspaces.create_workspace(WorkspaceCreate(name="w"))
    flow = await services.workflows.create_workflow(WorkflowCreate(workspace_id=ws.id, name="f"))
    task = await services.tasks.create_task(
        TaskCreate(workspace_id=ws.id, workflow_id=flow.id, title="t")
    )
    return task.id


async def _next(stream: EventStream, type_: str, **match: Any) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            event = await stream.next(timeout=30)
            assert event is not None, f"the stream ended before {type_}"
            if event.type == type_ and all(event.data.get(k) == v for k, v in match.items()):
                return event.data


@pytest.mark.parametrize("caller", [None, ALICE], ids=["unscoped", "owner"])
async def test_an_answer_reaching_a_blocked_agent_is_within_budget(
    services: Services, counter: StatementCounter, caller: Identity | None
) -> None:
    with acting_as(caller):
        task_id = await _task(services)
        session = await services.sessions.create_session(task_id, SessionCreate())
        await services.sessions.prompt(session["id"], "go")
    stream = services.bus.subscribe()
    for round_ in range(2):  # the second answer runs on warm caches, like every later one
        ask = asyncio.ensure_future(services.clarifications.ask(session["id"], QUESTIONS))
        await _next(stream, SESSION_STATE_CHANGED, state="WAITING_FOR_INPUT")
        with acting_as(caller):
            (item,) = (await services.clarifications.list_pending())["bundles"]
        with counter.counting(), acting_as(caller):
            won = await services.clarifications.resolve_bundle(
                item["pending_id"], [{"question_id": "q", "selected_options": ["yes"]}], False, ""
            )
            result = await ask
        assert won["claimed"] is True, won
        assert "yes" in str(result), result  # the agent got the answer in its call
        state = (await services.sessions.get_session(session["id"]))["state"]
        assert state == "RUNNING", state  # and went back to work
        print(f"answer {round_} ({caller and caller.user_id}): {counter.report()}")
    assert len(counter.statements) <= ANSWER_STATEMENTS, counter.report()
    assert counter.transactions <= ANSWER_TRANSACTIONS, counter.report()
    assert bound_constants(counter.full_statements) == []  # no re-planning on every answer
    with counter.counting(), acting_as(caller):  # a late answerer loses, told what won
        lost = await services.clarifications.resolve_bundle(
            item["pending_id"], [{"question_id": "q", "selected_options": ["no"]}], False, ""
        )
    assert lost["claimed"] is False and lost["status"] == "answered", lost
    assert "yes" in str(lost), lost  # the winner's answer, replayed
    assert len(counter.statements) <= LOSER_STATEMENTS, counter.report()
    assert counter.transactions <= LOSER_TRANSACTIONS, counter.report()
    stream.close()


async def test_a_prompt_turn_is_within_budget(
    services: Services, counter: StatementCounter
) -> None:
    profile = await services.agent_profiles.create_profile(
        AgentProfileCreate(name="scripted", command=[sys.executable, SCRIPTED_AGENT])
    )
    task_id = await _task(services)
    session = await services.sessions.create_session(
        task_id, SessionCreate(agent_profile_id=profile.id)
    )
    stream = services.bus.subscribe()
    await _next(stream, SESSION_STATE_CHANGED, state="IDLE")  # the agent is up
    publish = services.bus.publish

    def stop_at_turn_end(type_: str, *args: Any, **kwargs: Any) -> Any:
        # The turn's work is done when its end is announced (after its commit); what runs
        # later (the changes follower of tasks on repositories) is not the turn's.
        if type_ == SESSION_TURN_COMPLETED:
            counter.stop()
        return publish(type_, *args, **kwargs)

    services.bus.publish = stop_at_turn_end  # type: ignore[method-assign]
    for round_ in range(3):  # later turns on warm caches and a running agent
        counter.start()
        await services.sessions.prompt(session["id"], "echo ok")
        done = await _next(stream, SESSION_TURN_COMPLETED, session_id=session["id"])
        assert done["stop_reason"] == "end_turn"
        print(f"turn {round_}: {counter.report()}")
        if round_ == 0:
            continue
        assert len(counter.statements) <= TURN_STATEMENTS, counter.report()
        assert counter.transactions <= TURN_TRANSACTIONS, counter.report()
        assert bound_constants(counter.full_statements) == []  # nor on every turn
    messages, _ = await services.sessions.list_messages(session["id"], MessagePageQuery())
    replies = [m.content for m in messages if m.author_type == "agent"]
    assert replies == ["ok", "ok", "ok"], replies  # every turn's reply was recorded
    state = (await services.sessions.get_session(session["id"]))["state"]
    assert state == "IDLE", state
    stream.close()


async def test_pg_a_prompt_takes_the_turn_lock_in_its_first_read(services: Services) -> None:
    """The prompt's authorizing read carries PostgreSQL's turn lock (no statement of its
    own): a prompt waits while another transaction holds the session's turn lock."""
    if not services.db.is_postgres:
        pytest.skip("PostgreSQL advisory locks; SQLite serializes whole write transactions")
    task_id = await _task(services)
    session = await services.sessions.create_session(task_id, SessionCreate())
    async with services.db.write() as holder:
        await holder.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"),
            {"k": f"task-session-turn:{session['id']}"},
        )
        prompt = asyncio.ensure_future(services.sessions.prompt(session["id"], "go"))
        await wait_for_lock_waiter(services.db)
        assert not prompt.done()
    result = await prompt
    assert result.turn_id is not None and not result.queued
